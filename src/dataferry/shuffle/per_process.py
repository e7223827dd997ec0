"""One object per process: the pusher and the open map outputs hold threads and descriptors of
the process that made them, so a forked child (a pool worker) makes its own on first use."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerProcess(Generic[T]):
    """`get()` returns this process's `T`, made by `factory` the first time it is asked for."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._held: tuple[int, T] | None = None

    def get(self) -> T:
        with self._lock:
            if self._held is None or self._held[0] != os.getpid():
                self._held = (os.getpid(), self._factory())
            return self._held[1]
