"""The `dataferry` command and its groups; the command modules add their commands to them.

The root options: `--version`, and `--debug` (or DATAFERRY_DEBUG=1) for a failure's traceback.
"""

from __future__ import annotations

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


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"dataferry {__version__}")
        raise typer.Exit()


@app.callback()
def root(
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
) -> None:
    """dataferry: safe, fast output commit for Python data engines."""
