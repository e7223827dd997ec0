"""The `dataferry` command: parse, call the library, render with rich. No logic of its own.

One module per group of commands; `app` holds the groups, `failures` turns any failure into
one line on stderr, `output` holds the consoles, tables, JSON and progress they share.
"""

from __future__ import annotations

from . import (  # noqa: F401  (each module adds its commands to the app)
    bench_commit,
    bench_services,
    bench_table,
    bench_write,
    demo,
    operations,
    records,
    services,
    verify,
)
from .app import app

__all__ = ["app", "main"]


def main() -> None:
    """The console script: run the command line and exit with its code."""
    import typer.main

    typer.main.get_command(app).main(prog_name="dataferry")
