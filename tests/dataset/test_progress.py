"""write_dataset's progress: a bar of the tasks committed on a terminal, nothing elsewhere."""

from __future__ import annotations

import io

import pyarrow as pa
import pytest
from rich.console import Console

from dataferry import write_dataset
from dataferry.errors import ConfigError


def _table() -> pa.Table:
    return pa.table({"k": [i % 3 for i in range(300)], "v": list(range(300))})


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal (as a pseudo-TTY would)."""

    def isatty(self) -> bool:
        return True


def test_no_terminal_no_output(tmp_path, capsys):
    """Breaking it: a library call prints escape codes into a program's logs, a pipe or a
    CI transcript (stderr is not a terminal there)."""
    write_dataset(_table(), str(tmp_path / "out"), partition_by=["k"], tasks=3)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


def test_a_terminal_shows_the_tasks_committed(tmp_path, monkeypatch):
    """Breaking it: a long write on a terminal shows nothing until it ends (the issue's
    minutes without a line), or shows a bar that never counts."""
    shown = io.StringIO()
    console = Console(file=shown, force_terminal=True, width=120)
    write_dataset(_table(), str(tmp_path / "a"), partition_by=["k"], tasks=3, progress=console)
    assert "writing " in shown.getvalue() and "3 of 3" in shown.getvalue()

    terminal = _Terminal()  # the default: stderr, when it is a terminal
    monkeypatch.setattr("sys.stderr", terminal)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.delenv("TTY_INTERACTIVE", raising=False)
    write_dataset(_table(), str(tmp_path / "b"), tasks=2)
    assert "2 of 2" in terminal.getvalue()


def test_progress_false_is_silent_even_on_a_terminal(tmp_path, monkeypatch):
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    monkeypatch.setenv("TERM", "xterm")
    write_dataset(_table(), str(tmp_path / "out"), tasks=2, progress=False)
    assert terminal.getvalue() == ""


def test_the_callers_event_hook_still_hears_every_event(tmp_path):
    heard = []
    console = Console(file=io.StringIO(), force_terminal=True)
    write_dataset(
        _table(),
        str(tmp_path / "out"),
        tasks=2,
        progress=console,
        on_event=lambda *e: heard.append(e[0]),
    )
    assert heard.count("task_committed") == 2 and "job_committed" in heard


def test_a_bad_progress_value_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ConfigError, match="progress must be True, False or a rich Console"):
        write_dataset(_table(), str(tmp_path / "out"), progress="yes")
    assert not (tmp_path / "out").exists()
