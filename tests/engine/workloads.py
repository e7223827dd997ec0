"""Task functions for engine tests (module level, so worker processes can import them)."""

from __future__ import annotations

import os
import time

from dataferry.engine import TaskOutput


def write_two(task: int, out: TaskOutput) -> int:
    for f in range(2):
        out.write(f"p={f}/t{task}-a{out.attempt_number}.txt", f"{task}/{f}".encode())
    return task * 10


def slow_first_attempt(task: int, delay: float, out: TaskOutput) -> int:
    if task == 0 and out.attempt_number == 0:
        time.sleep(delay)
    out.write(f"t{task}-a{out.attempt_number}.txt", str(os.getpid()).encode())
    return task


def always_fails(task: int, out: TaskOutput) -> None:
    out.write("partial.txt", b"partial")
    raise RuntimeError(f"task {task} cannot succeed")


def bad_input(task: int, out: TaskOutput) -> None:
    """Fails as bad input does: the same ConfigError in every attempt."""
    from dataferry.errors import ConfigError

    out.write("partial.txt", b"partial")
    raise ConfigError(f"task {task}: partition value too long for a file name")
