"""The marker service's files, readable without the service: `MARKERS<i>` hold one marker name
per line (only complete, newline-terminated lines count: a line cut short by a crash was never
acknowledged), and `MARKERS.type` says which kind of markers the directory holds."""

from __future__ import annotations

import re

from ..errors import NotFound
from ..store import IOPool, Store, paths

MARKERS_PREFIX = "MARKERS"
MARKERS_TYPE_FILE = "MARKERS.type"
SERVICE_TYPE = "TIMELINE_SERVER_BASED"
_INDEX = re.compile(r"^MARKERS(\d+)$")


def markers_file(directory: str, index: int) -> str:
    return paths.join(directory, f"{MARKERS_PREFIX}{index}")


def read_marker_type(store: Store, directory: str) -> str | None:
    try:
        return store.read_bytes(paths.join(directory, MARKERS_TYPE_FILE)).decode().strip() or None
    except NotFound:
        return None


def read_marker_files(store: Store, directory: str, threads: int = 16) -> dict[int, list[str]]:
    """index -> complete marker names of every `MARKERS<i>` file in the directory."""
    try:
        entries = [e for e in store.list(directory) if _INDEX.match(e.name)]
    except NotFound:
        return {}

    def read(path: str) -> tuple[int, list[str]]:
        raw = store.read_bytes(path).decode("utf-8", errors="replace")
        lines = raw.split("\n")[:-1]  # the part after the last newline is incomplete
        return int(_INDEX.match(paths.name(path)).group(1)), [ln for ln in lines if ln]  # type: ignore[union-attr]

    with IOPool(threads) as pool:
        return dict(pool.map(read, [e.path for e in entries], adaptive=True))
