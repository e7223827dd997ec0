"""Background threads: a thread whose store operations come at times (a heartbeat's renewals),
not as steps of a job. Wrappers that count a job's steps (the fault layer's operation index,
`faults.py`) leave them out, so a job's own steps keep their numbers however many renewals a
slow store lets in between."""

from __future__ import annotations

import threading

_background = threading.local()


def mark_background_thread() -> None:
    """Mark the calling thread as a background thread (for as long as it lives)."""
    _background.on = True


def is_background_thread() -> bool:
    """True on a thread marked by `mark_background_thread`."""
    return getattr(_background, "on", False)
