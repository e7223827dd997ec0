"""The `dataferry` command and its groups; the command modules add their commands to them.

The root options: `--version`, `--debug` (or DATAFERRY_DEBUG=1) for a failure's traceback, and
`-v`/`--verbose` for the library's log on stderr (`-v` INFO: a line per stage, services started
and stopped; `-vv` DEBUG). Without it the library prints nothing (its loggers end in the
NullHandler `dataferry/__init__.py` adds).
"""

from __future__ import annotations

import logging
import sys

import typer

from .. import __version__
from .failures import OneLineErrors

app = typer.Typer(
    cls=OneLineErrors,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="dataferry: safe, fast output commit for Python data engines.",
)


def _group(name: str, help: str) -> typer.Typer:
    group = typer.Typer(no_args_is_help=True, help=help)
    app.add_typer(group, name=name)
    return group


verify_app = _group("verify", "Check committers and stores by experiment.")
bench_app = _group("bench", "Benchmarks, side by side in one run.")
markers_app = _group("markers", "Write markers and the marker service.")
plan_app = _group("plan", "Predict commit cost at sizes past one machine.")
shuffle_app = _group("shuffle", "The push-based shuffle service.")
uploads_app = _group("uploads", "Multipart uploads left pending (billed until aborted).")
catalog_app = _group("catalog", "The partition catalog of Hive-style tables.")


LOG_HANDLER = "dataferry-cli"  # the name of the stderr handler -v adds to the library's logger
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_to_stderr(verbose: int) -> logging.Handler | None:
    """Show the library's log records (the "dataferry" loggers) on stderr: INFO for
    `verbose` 1, DEBUG for 2 or more; for 0, nothing (and a handler an earlier run added in
    this process is taken off). Returns the handler added, for `quiet_again`."""
    logger = logging.getLogger("dataferry")
    for handler in list(logger.handlers):
        if handler.get_name() == LOG_HANDLER:
            quiet_again(handler)
    if verbose <= 0:
        return None
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(LOG_HANDLER)
    handler.setFormatter(logging.Formatter(LOG_FORMAT, "%H:%M:%S"))
    handler.previous_level = logger.level  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if verbose == 1 else logging.DEBUG)
    return handler


def quiet_again(handler: logging.Handler) -> None:
    """Take the handler `log_to_stderr` added off, and the logger's level back."""
    logger = logging.getLogger("dataferry")
    logger.removeHandler(handler)
    logger.setLevel(getattr(handler, "previous_level", logging.NOTSET))
    handler.close()


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"dataferry {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print dataferry's version and exit.",
    ),
    debug: bool = typer.Option(
        False,
        "--debug",
        envvar="DATAFERRY_DEBUG",
        help="On a failure, print the traceback before the one-line error.",
    ),
    verbose: int = typer.Option(
        0,
        "--verbose",
        "-v",
        count=True,
        help="Show the library's log on stderr: -v INFO (stages, services), -vv DEBUG.",
    ),
) -> None:
    """dataferry: safe, fast output commit for Python data engines."""
    handler = log_to_stderr(verbose)
    if handler is not None:  # the command is over: the log ends with it (and with the stream)
        ctx.call_on_close(lambda: quiet_again(handler))
