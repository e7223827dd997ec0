"""The abuse suite's footing lives in tests/services.py (shared with tests/net): the
`start_service` fixture, and the helpers this suite's modules import from here."""

from __future__ import annotations

from ..services import (
    HELLO,
    TOKEN,
    app_hello,
    dial,
    exchange,
    frame_of,
    frames,
    http_status,
    markers_ok,
    no_unhandled_errors,
    read_all,
    register,
    rss_mib,
    shuffle_ok,
    start_service,
)

__all__ = [
    "HELLO",
    "TOKEN",
    "app_hello",
    "dial",
    "exchange",
    "frame_of",
    "frames",
    "http_status",
    "markers_ok",
    "no_unhandled_errors",
    "read_all",
    "register",
    "rss_mib",
    "shuffle_ok",
    "start_service",
]
