"""A task's manifest carried in its commit message, so that the job commit need not read it
back (one DataNode read per task on HDFS, where loading sits on the job commit's path).

The copy is the saved manifest's bytes, deflated and in base64 (messages stay JSON-ready):
Hadoop's indented JSON of 50 files is some 21 KB, carried in under 2 KB, beside the file names
a message already holds. A manifest whose copy would exceed CARRIED_MAX_CHARS is not carried
(its job commit reads it), so that a job of many large tasks does not hold every manifest in
its driver's memory. The saved file stays the record (recovery, diagnostics, Hadoop); a message
is as trusted as the attempt id it names, which decides whose saved manifest would be read, and
its copy passes the same checks. A copy that does not inflate, or inflates past the manifest
cap, is refused as a damaged manifest, naming it.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from collections.abc import Sequence

from ...errors import ValidationError
from ..protocol import TaskCommitMessage
from .files import MANIFEST_MAX_BYTES

CARRIED = "manifest_z"  # the key of `TaskCommitMessage.extra` that holds the copy
CARRIED_MAX_CHARS = 16 * 1024


def carry(saved: bytes) -> str | None:
    """The copy of the manifest `saved` for its message; None where it is too large."""
    text = base64.b64encode(zlib.compress(saved, 1)).decode("ascii")
    return text if len(text) <= CARRIED_MAX_CHARS else None


def carried_by(messages: Sequence[TaskCommitMessage]) -> dict[str, str]:
    """Attempt id -> the copy its message carries (a copy over the size cap is left out: its
    saved manifest is read, with the cap that reading applies)."""
    return {
        m.attempt_id: m.extra[CARRIED]
        for m in messages
        if isinstance(m.extra.get(CARRIED), str) and len(m.extra[CARRIED]) <= CARRIED_MAX_CHARS
    }


def inflate(copy: str, source: str) -> bytes:
    """The manifest's bytes from its carried copy; ValidationError naming `source` where the
    copy is damaged or inflates past MANIFEST_MAX_BYTES."""
    try:
        packed = base64.b64decode(copy.encode("ascii"), validate=True)
        unpack = zlib.decompressobj()
        raw = unpack.decompress(packed, MANIFEST_MAX_BYTES + 1)
    except (binascii.Error, UnicodeEncodeError, zlib.error) as e:
        raise ValidationError(
            f"the copy its commit message carries is damaged: {e}", source
        ) from None
    if len(raw) > MANIFEST_MAX_BYTES or unpack.unconsumed_tail:
        raise ValidationError(
            f"the copy its commit message carries is over {MANIFEST_MAX_BYTES} bytes", source
        )
    if not unpack.eof:
        raise ValidationError("the copy its commit message carries is cut short", source)
    return raw
