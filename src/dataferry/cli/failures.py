"""Every failure of the `dataferry` command as one line on stderr, with the right exit code.

A runtime failure (any exception a command raises) exits 1; bad usage (click's usage errors:
an unknown option, a value of the wrong type) exits 2. The line names the file, field or value
at fault; it is never read as markup, never wrapped, and a missing optional package names the
extra that brings it. `--debug` (or DATAFERRY_DEBUG=1) prints the traceback first.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import sys
import traceback
from typing import Any

import typer
from typer.core import TyperGroup

from ..errors import DataferryError
from ..extras import missing_dependency

try:  # newer typer carries its own copy of click; older typer used click itself
    from typer._click import exceptions as usage
    from typer._click.globals import get_current_context
except ImportError:  # pragma: no cover - older typer
    from click import exceptions as usage
    from click import get_current_context

# click >= 8.2 raises this for a group called without a command; its message is the help
NO_ARGS_IS_HELP = getattr(usage, "NoArgsIsHelpError", ())

RUNTIME_FAILURE = 1
INTERRUPTED = 130


def debug_wanted() -> bool:
    """--debug was given, or DATAFERRY_DEBUG is set to something true."""
    ctx = get_current_context(silent=True)
    root = ctx.find_root() if ctx is not None else None
    if root is not None and root.params.get("debug"):
        return True
    return os.environ.get("DATAFERRY_DEBUG", "").lower() not in ("", "0", "false", "no")


def one_line(text: str) -> str:
    """`text` on one line: its non-blank lines, stripped and joined by spaces."""
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


def print_error(message: str) -> None:
    """`error: message` as one line on stderr (red on a terminal, plain when piped)."""
    label = typer.style("error:", fg="red", bold=True)
    typer.echo(f"{label} {one_line(message)}", err=True, color=sys.stderr.isatty() or None)


def describe(error: BaseException) -> str:
    """What went wrong, in one line that names what is at fault."""
    name = type(error).__name__
    if isinstance(error, DataferryError):
        return str(error) or name
    if isinstance(error, ImportError):
        missing = missing_dependency(error)
        return str(missing) if missing is not None else f"{error}"
    if name == "NoCredentialsError":  # botocore's; not imported here, boto3 is optional
        return (
            "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
            "or AWS_PROFILE, or configure ~/.aws/credentials"
        )
    if isinstance(error, socket.gaierror):
        return f"cannot resolve a host name or address: {error.strerror or error}"
    if isinstance(error, sqlite3.DatabaseError):
        return f"not a usable SQLite database: {error}"
    if isinstance(error, OSError) and error.filename is not None:
        target = f"{error.filename} -> {error.filename2}" if error.filename2 else error.filename
        return f"{target}: {error.strerror or error}"
    if isinstance(error, (OSError, OverflowError, ValueError, TypeError, KeyError)):
        return f"{name}: {error}"
    return f"{name}: {error} (a bug in dataferry? --debug shows where)"


def usage_line(error: usage.ClickException) -> str:
    """A usage error with the command it concerns and where to read about it."""
    ctx = getattr(error, "ctx", None)
    where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    return f"{error.format_message()}{where}"


class OneLineErrors(TyperGroup):
    """The root command group: turns whatever a command raises into one line and an exit
    code, both when run as a program and under click's test runner."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, usage.ClickException):
            raise
        except Exception as e:
            if debug_wanted():
                traceback.print_exc(file=sys.stderr)
            print_error(describe(e))
            raise typer.Exit(RUNTIME_FAILURE) from None

    def main(  # type: ignore[override]
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except NO_ARGS_IS_HELP as e:
            typer.echo(e.ctx.get_help())
            code = e.exit_code
        except usage.ClickException as e:
            print_error(usage_line(e))
            code = e.exit_code
        except typer.Abort:
            print_error("interrupted")
            code = INTERRUPTED
        code = code if isinstance(code, int) else 0
        if standalone_mode:
            sys.exit(code)
        return code
