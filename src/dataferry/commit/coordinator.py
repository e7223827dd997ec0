"""The commit coordinator: for each task, exactly one attempt may commit ("first committer wins").

This is the role of Spark's OutputCommitCoordinator. The first attempt to ask is authorised;
others are denied while it holds the right. If the authorised attempt fails (its process died,
or its commit raised), the right is released and a later attempt may take it. Once a task is
reported committed, nobody else is ever authorised for it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class _TaskState:
    authorised: int | None = None
    committed: int | None = None
    failed: set[int] = field(default_factory=set)


class CommitCoordinator:
    """Thread-safe; engines keep one per job on the driver."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tasks: dict[int, _TaskState] = {}
        self.denials = 0

    def can_commit(self, task: int, attempt: int) -> bool:
        """Ask for the right to commit `task` with `attempt`."""
        with self._lock:
            st = self._tasks.setdefault(task, _TaskState())
            if attempt in st.failed or (st.committed is not None and st.committed != attempt):
                self.denials += 1
                return False
            if st.authorised is None:
                st.authorised = attempt
                return True
            if st.authorised == attempt:
                return True
            self.denials += 1
            return False

    def attempt_failed(self, task: int, attempt: int) -> None:
        """An attempt died or its commit failed; release the right if it held it."""
        with self._lock:
            st = self._tasks.setdefault(task, _TaskState())
            st.failed.add(attempt)
            if st.authorised == attempt and st.committed is None:
                st.authorised = None

    def task_committed(self, task: int, attempt: int) -> None:
        with self._lock:
            st = self._tasks.setdefault(task, _TaskState())
            if st.authorised != attempt:
                raise RuntimeError(
                    f"task {task}: attempt {attempt} reported a commit it was not authorised for"
                )
            st.committed = attempt

    def committed_attempt(self, task: int) -> int | None:
        with self._lock:
            st = self._tasks.get(task)
            return st.committed if st else None
