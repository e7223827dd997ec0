"""Progress bars for long work (rich), drawn on a terminal only.

A library must not write to a stream nobody watches: a bar is drawn only when stderr is a
terminal (or on a console the caller hands in, when that one is a terminal), and never when
the caller says ``progress=False``. Pipes, logs, CI and captured output see nothing. The
command line's progress (`dataferry.cli.output.progress`) draws with the same columns.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .errors import ConfigError

# an engine's event hook: (event, task index, attempt number)
EventHook = Callable[[str, int, int], None]


def progress_console(progress: Any = True) -> Any:
    """The rich Console to draw on, or None for no bar: `progress` is True (stderr, when it is
    an interactive terminal), False (never), or a rich Console (that one, when a terminal)."""
    if progress is False or progress is None:
        return None
    if progress is True:
        if not _is_tty(sys.stderr):
            return None
        from rich.console import Console

        console = Console(stderr=True)
        return console if console.is_interactive else None  # TERM=dumb, TTY_INTERACTIVE=0
    check_progress(progress)
    return progress if progress.is_terminal else None


def check_progress(progress: Any) -> None:
    """Refuse a `progress` that is neither True, False, None nor a rich Console."""
    if progress is True or progress is False or progress is None:
        return
    from rich.console import Console

    if not isinstance(progress, Console):
        raise ConfigError(f"progress must be True, False or a rich Console, not {progress!r}")


def shorten(text: str, width: int = 28) -> str:
    """`text` in at most `width` characters, its middle elided (a long URL keeps its scheme
    and its last names, and leaves the bar and its count room on the line)."""
    if len(text) <= width:
        return text
    head = width // 3
    return text[:head] + "…" + text[len(text) - (width - head - 1) :]


def _is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no stream, or closed
        return False


def new_bar(console: Any) -> Any:
    """A transient rich Progress on `console`: spinner, label, bar, "3 of 8" (or "3 done"
    without a total), time elapsed."""
    from rich.progress import (
        BarColumn,
        Progress,
        ProgressColumn,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.text import Text

    class CountColumn(ProgressColumn):
        """'3 of 8' when the total is known, '3 done' when it is not (never '3/?')."""

        def render(self, task: Any) -> Text:
            done = int(task.completed)
            if task.total is None:
                return Text(f"{done} done")
            return Text(f"{done} of {int(task.total)}")

    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False, style="bold"),
        BarColumn(bar_width=20),  # with a shortened title: one line of 80 columns
        CountColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


@contextmanager
def task_progress(
    title: str, total: int | None, progress: Any = True, on_event: EventHook | None = None
) -> Iterator[EventHook | None]:
    """An engine event hook counting committed tasks on a bar titled `title` (while the
    block runs), then calling `on_event`; just `on_event` when no bar is drawn."""
    console = progress_console(progress)
    if console is None:
        yield on_event
        return
    with new_bar(console) as bar:
        task = bar.add_task(title, total=total)

        def events(event: str, index: int, attempt: int) -> None:
            if event == "task_committed":
                bar.advance(task)
            elif event == "job_commit_started":
                bar.update(task, description=f"{title}: committing the job")
            if on_event is not None:
                on_event(event, index, attempt)

        yield events
