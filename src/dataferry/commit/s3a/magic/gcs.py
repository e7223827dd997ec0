"""`magic-gcs`: the magic committer on Google Cloud Storage, over resumable upload sessions.

GCS has no multipart upload of S3's kind and no rename (a copy), and Hadoop's GCS connector
commits by renaming. Here a task attempt writes each file through a resumable upload session
opened at the file's final name: its whole 256 KiB chunks are sent, nothing is visible. The
session is not finalized; what finalizes it (the session URI, how many bytes it holds, the
bytes past the last whole chunk, the MD5 the object will have) is the file's `.pending`
record, in S3A's shape (the URI as `uploadId`, the part marks as `etags`), gathered into the
task's `.pendingset` at task commit, which also saves the attempt's own copy of it and then
deletes the attempt's `.pending` records, as the magic committer does: the pendingsets name
every committed attempt's sessions, so job commit deletes a few records per task, not one per
file. Job commit finalizes every session in parallel (one request each: the held bytes with
the total size), so no byte is copied at commit time.

Everything else is the magic committer's (but the zero-byte marker a task writes before each
upload on S3, which names a key whose uploads can be listed: GCS lists no sessions): its
layout under `__magic_job-<uuid>/`, the attempt claims, the intent record and the recovery after a dead driver (`dataferry cleanup`): a job
whose intent record was saved is finished (a session already finalized is known by its
object's MD5), any other is rolled back by cancelling its sessions (DELETE of the URI).

What stays different from S3: sessions cannot be listed, so a session an attempt opened and
died before recording is found by nobody; it never becomes visible, and GCS drops it after a
week. `dataferry uploads list|abort` read the sessions from the jobs' records instead: the
tasks' pendingsets, the attempts' own copies, and the `.pending` records of attempts that have
not committed (yet).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ....errors import CommitError, NotFound, ValidationError
from ....store import Store
from ....store.types import PendingUpload
from ...protocol import TaskAttemptContext
from .committer import PENDING_SUFFIX, PENDINGSET_SUFFIX, MagicCommitter, _UploadStream
from .config import MagicConfig
from .files import PendingCommit, read_pending, read_pendingset_file

COMMITTER_NAME = "dataferry.commit.magic.GcsMagicCommitter"

log = logging.getLogger("dataferry.commit")


class _SessionStream(_UploadStream):
    """The magic committer's stream without the zero-byte marker at the file's magic path:
    a marker lets S3's committer find an unrecorded upload by its key, and GCS lists no
    sessions by key, so here it would be one more object to write and to delete."""

    def _start(self) -> str:
        if self.upload_id is None:
            self.upload_id = self.store.initiate_upload(self.path)
        return self.upload_id


class GcsMagicCommitter(MagicCommitter):
    name = "magic-gcs"

    def require_multipart(self) -> None:
        if not self.store.capabilities.resumable_upload:
            raise CommitError(
                f"the {self.name} committer needs GCS resumable upload sessions, which "
                f"{self.store.describe()} lacks (use `magic` on S3)"
            )

    def stream(self, task: TaskAttemptContext, relpath: str) -> _UploadStream:
        return _SessionStream(self, task, relpath)

    @classmethod
    def serves(cls, store: Store) -> bool:
        return store.capabilities.resumable_upload

    def success_committer_name(self) -> str:
        return COMMITTER_NAME

    @classmethod
    def recorded_uploads(cls, store: Store) -> list[PendingUpload]:
        """The sessions the records of the jobs in the destination name (GCS lists no
        sessions): the tasks' `.pendingset`s, the attempts' own copies of them, and the
        `.pending` records of attempts not committed; each with every record naming it
        (`uploads abort` deletes a record once all the sessions it names are aborted)."""
        named: dict[str, list[tuple[PendingCommit, str]]] = {}
        for job_path in sorted({left.path for left in cls.leftovers(store)}):
            for st in store.walk(job_path):
                for c in _commits_in(store, st.path):
                    named.setdefault(c.upload_id, []).append((c, st.path))
        found = [
            RecordedUpload(
                pairs[0][0].path,
                upload_id,
                min(c.created for c, _ in pairs) / 1000,
                records=tuple(sorted({record for _, record in pairs})),
            )
            for upload_id, pairs in named.items()
        ]
        return sorted(found, key=lambda u: (u.initiated, u.path))


def _commits_in(store: Store, path: str) -> list[PendingCommit]:
    """The pending commits a job record names: a `.pending`'s one, a `.pendingset`'s all;
    none for other files, or for a record that cannot be read (logged)."""
    try:
        if path.endswith(PENDING_SUFFIX):
            return [read_pending(store, path)]
        if path.endswith(PENDINGSET_SUFFIX):
            return read_pendingset_file(store, path).commits
    except (ValidationError, NotFound) as e:
        log.warning("%s; the sessions it names are not listed", e)
    return []


@dataclass(frozen=True)
class RecordedUpload(PendingUpload):
    """A session as the committer's records name it (`records`: their paths)."""

    records: tuple[str, ...] = ()


__all__ = ["GcsMagicCommitter", "MagicConfig"]
