"""What every command shares for its output: the consoles, JSON, tables and labelled progress.

Tables and results go to stdout; progress and errors go to stderr, so `--json` output can be
piped. Text that comes from users or stores (paths, names) is never read as rich markup.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table
from rich.text import Text

from ..progress import new_bar
from ..stats import IOStatistics

console = Console(width=None if sys.stdout.isatty() else 140)
stderr = Console(stderr=True, soft_wrap=True)

JSON_OPT = typer.Option(False, "--json", help="Print JSON instead of tables.")
QUIET_OPT = typer.Option(False, "--quiet", "-q", help="No progress display.")

__all__ = [
    "JSON_OPT",
    "QUIET_OPT",
    "Steps",
    "console",
    "escape",
    "names",
    "ops_table",
    "pairs",
    "print_json",
    "progress",
    "say",
    "table",
]


def names(text: str) -> tuple[str, ...]:
    """A comma-separated option ("v1, manifest") as its names."""
    return tuple(n.strip() for n in text.split(",") if n.strip())


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def say(text: str) -> None:
    """A line on stdout; `text` may hold markup, so values in it must be `escape`d."""
    console.print(text)


class PlainTable(Table):
    """A table whose string cells are plain text: a path holding "[/]" is shown as it is."""

    def add_row(self, *cells: Any, **kwargs: Any) -> None:
        super().add_row(*(Text(c) if isinstance(c, str) else c for c in cells), **kwargs)


def table(title: str, columns: Iterable[str], left: Iterable[str] = ()) -> Table:
    """A table with these columns: numbers right-aligned, the columns in `left` (by default
    the first) left-aligned. Title and cells are plain text, never markup."""
    cols = list(columns)
    lefts = set(left) or {cols[0]}
    t = PlainTable(title=Text(title) if title else None)
    for col in cols:
        t.add_column(col, justify="left" if col in lefts else "right")
    return t


def pairs(title: str, rows: Iterable[tuple[str, Any]]) -> Table:
    """A two-column table of names and values (plain text)."""
    t = PlainTable(title=Text(title), show_header=False)
    t.add_column(style="bold")
    t.add_column()
    for k, v in rows:
        t.add_row(str(k), str(v))
    return t


def ops_table(stats: IOStatistics, title: str) -> Table:
    """Store operations from I/O statistics: counts, failures and times."""
    t = table(title, ("operation", "count", "failures", "mean ms", "max ms", "total s"))
    for row in stats.durations("op_"):
        t.add_row(
            row.name,
            str(row.count),
            str(row.failures),
            f"{row.mean_s * 1000:.3f}",
            f"{row.max_s * 1000:.3f}",
            f"{row.total_s:.3f}",
        )
    return t


class Steps:
    """The progress of one command: a title, the step running, and how many are done.

    `step(label)` starts a new step (the one before it is done); `update` sets the counts
    directly for callers that report "k of n"; `advance` counts finished steps."""

    def __init__(self, bar: Progress | None, title: str, total: int | None) -> None:
        self._bar = bar
        self._title = title
        self._started = 0
        self._task = bar.add_task(title, total=total) if bar is not None else None

    def _show(self, **fields: Any) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, **fields)

    def step(self, label: str = "") -> None:
        self._started += 1
        self._show(
            completed=self._started - 1,
            description=f"{self._title}: {label}" if label else self._title,
        )

    def update(self, completed: int, total: int | None = None, label: str = "") -> None:
        fields: dict[str, Any] = {"completed": completed}
        if total is not None:
            fields["total"] = total
        if label:
            fields["description"] = f"{self._title}: {label}"
        self._show(**fields)

    def starting(self, label: str, number: int, total: int) -> None:
        """Step `number` (from 1) of `total`, called `label`, begins: those before it are done."""
        self.update(number - 1, total, label)

    def advance(self, n: int = 1) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.advance(self._task, n)


@contextmanager
def progress(title: str, total: int | None = None, quiet: bool = False) -> Iterator[Steps]:
    """A labelled progress display on stderr, shown only on a terminal and unless `quiet`."""
    if quiet or not stderr.is_terminal:
        yield Steps(None, title, total)
        return
    with new_bar(stderr) as bar:  # the library's bar (dataferry.progress), on stderr
        yield Steps(bar, title, total)
