"""GCS resumable upload sessions behind the store's multipart operations.

A session (`initiate_upload`: its URI is the upload id) takes the object's bytes in chunks
and makes the object visible only when it is finalized, when the request carries the total
size. Every chunk but the final one must be a multiple of 256 KiB, so a part's bytes beyond
the last whole 256 KiB are held back, and the final, shorter chunk can only be sent with the
finalization. A part's "etag" is therefore a `SessionMark`: how many bytes the session holds,
the MD5 of every byte of the file so far (what GCS reports as the object's `md5Hash` once it
is finalized), and the bytes held back. The last part's mark is all `complete_upload` needs
(in any process): it sends those bytes with the total, or a zero-length finalization.

The held-back bytes (under 256 KiB a file) travel in the commit records: a small file lives
whole in its task's pending record until job commit.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import threading
from dataclasses import dataclass, field

from ...errors import ConfigError

CHUNK = 256 * 1024  # GCS: every chunk but the final one is a multiple of this
MARK_PREFIX = "gcs1"


@dataclass(frozen=True)
class SessionMark:
    """What a part's etag records of its session (`encode`: `gcs1:<sent>:<md5>:<held>`)."""

    sent: int  # bytes the session holds after this part
    md5: str  # base64 MD5 of all the file's bytes so far (sent and held)
    held: bytes  # bytes not sent yet (< 256 KiB): the final chunk

    @property
    def total(self) -> int:
        return self.sent + len(self.held)

    def encode(self) -> str:
        return f"{MARK_PREFIX}:{self.sent}:{self.md5}:{base64.b64encode(self.held).decode()}"

    @classmethod
    def decode(cls, etag: str) -> SessionMark:
        """The mark an etag carries; ConfigError naming it when it is not one."""
        parts = etag.split(":")
        try:
            if len(parts) != 4 or parts[0] != MARK_PREFIX:
                raise ValueError("not a session mark")
            held = base64.b64decode(parts[3], validate=True)
            return cls(int(parts[1]), parts[2], held)
        except (ValueError, binascii.Error) as e:
            shown = etag if len(etag) < 80 else etag[:77] + "..."
            raise ConfigError(
                f"{shown!r} is not a GCS upload session's part record ({e}); was the upload "
                "started on another kind of store?"
            ) from None


@dataclass
class SessionState:
    """A session's progress in the process writing it: parts arrive in order, one by one."""

    sent: int = 0
    held: bytes = b""
    md5: hashlib._Hash = field(default_factory=hashlib.md5)
    parts: int = 0

    def add(self, number: int, data: bytes) -> bytes:
        """Take part `number`; the bytes to send now (whole 256 KiB chunks)."""
        if number != self.parts + 1:
            raise ConfigError(
                f"GCS upload sessions take their parts in order: part {number} after {self.parts}"
            )
        self.parts = number
        self.md5.update(data)
        buf = self.held + data
        n = len(buf) // CHUNK * CHUNK
        self.held = buf[n:]
        return buf[:n]

    def mark(self) -> SessionMark:
        return SessionMark(self.sent, base64.b64encode(self.md5.digest()).decode(), self.held)


class Sessions:
    """The states of the sessions this process is writing, by session URI."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._states: dict[str, SessionState] = {}

    def state(self, uri: str, number: int) -> SessionState:
        with self._lock:
            state = self._states.get(uri)
            if state is None:
                if number != 1:
                    raise ConfigError(
                        f"part {number} of GCS upload session {uri} is sent by a process that "
                        "did not send its first part: a session is written by one process"
                    )
                state = self._states[uri] = SessionState()
            return state

    def forget(self, uri: str) -> None:
        with self._lock:
            self._states.pop(uri, None)
