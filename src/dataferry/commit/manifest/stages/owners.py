"""Which task attempt writes each destination: job commit refuses two tasks writing one file
before anything moves, naming the file and both attempts.

A job can write hundreds of thousands of files, so a destination is remembered by its string
hash (Python's, which the manifest's own duplicate check has computed already, so asking costs
next to nothing), not by its path. Two attempts whose destinations share a hash are then told
apart exactly: each attempt's destinations are read again (`destinations_of`) and the path
looked up in them. Only a real conflict or a hash collision (odds about n² / 2⁶⁵ for n files)
asks for that re-read, so a good job pays one hash look-up per file and no path is kept.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Hashable

from ....errors import JobCommitError


class DestinationOwners:
    """Claims of destinations by task attempts, safe to use from many threads.

    `destinations_of(attempt)` gives an attempt's destinations again (for the exact check);
    `name(dest)` writes a destination as the error shows it; `key` is the compact key of a
    destination (`hash`; a test gives one that collides)."""

    def __init__(
        self,
        destinations_of: Callable[[str], Collection[str]],
        name: Callable[[str], str] = str,
        key: Callable[[str], Hashable] = hash,
    ) -> None:
        self._destinations_of = destinations_of
        self._name = name
        self._key = key
        self._first: dict[Hashable, str] = {}  # key -> the first attempt that had it
        self._shared: dict[Hashable, list[str]] = {}  # key -> every attempt that had it
        self._reread: dict[str, Collection[str]] = {}
        self._lock = threading.Lock()

    def claim(self, attempt: str, dests: list[str]) -> None:
        """Record `attempt` as the writer of `dests` (distinct paths); JobCommitError naming
        the destination and both attempts where another attempt writes one of them."""
        keys = list(map(self._key, dests))
        clashes: list[tuple[str, list[str]]] = []
        with self._lock:
            if self._first.keys().isdisjoint(keys):  # the common case: nothing shared
                self._first.update(dict.fromkeys(keys, attempt))
                return
            for dest, key in zip(dests, keys, strict=True):
                first = self._first.setdefault(key, attempt)
                if first == attempt and key not in self._shared:
                    continue  # new, or this attempt's own (two of its paths share a key)
                holders = self._shared.setdefault(key, [first])
                others = [a for a in holders if a != attempt]
                if others:
                    clashes.append((dest, others))
                if attempt not in holders:
                    holders.append(attempt)
        for dest, others in clashes:  # outside the lock: the exact check reads
            for other in others:
                if dest in self._destinations(other):
                    raise JobCommitError(
                        f"destination {self._name(dest)} is written by two tasks: "
                        f"{other} and {attempt}"
                    )

    def _destinations(self, attempt: str) -> Collection[str]:
        with self._lock:
            known = self._reread.get(attempt)
        if known is None:
            known = set(self._destinations_of(attempt))
            with self._lock:
                self._reread[attempt] = known
        return known
