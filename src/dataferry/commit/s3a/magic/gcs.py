"""`magic-gcs`: the magic committer on Google Cloud Storage, over resumable upload sessions.

GCS has no multipart upload of S3's kind and no rename (a copy), and Hadoop's GCS connector
commits by renaming. Here a task attempt writes each file through a resumable upload session
opened at the file's final name: its whole 256 KiB chunks are sent, nothing is visible. The
session is not finalized; what finalizes it (the session URI, how many bytes it holds, the
bytes past the last whole chunk, the MD5 the object will have) is the file's `.pending`
record, in S3A's shape (the URI as `uploadId`, the part marks as `etags`), gathered into the
task's `.pendingset` at task commit. Job commit finalizes every session in parallel (one
request each: the held bytes with the total size), so no byte is copied at commit time.

Everything else is the magic committer's (but the zero-byte marker a task writes before each
upload on S3, which names a key whose uploads can be listed: GCS lists no sessions): its
layout under `__magic_job-<uuid>/`, the attempt claims, the intent record and the recovery after a dead driver (`dataferry cleanup`): a job
whose intent record was saved is finished (a session already finalized is known by its
object's MD5), any other is rolled back by cancelling its sessions (DELETE of the URI).

What stays different from S3: sessions cannot be listed, so a session an attempt opened and
died before recording is found by nobody; it never becomes visible, and GCS drops it after a
week. `dataferry uploads list|abort` read the sessions from the jobs' records instead.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ....errors import CommitError, NotFound, ValidationError
from ....store import Store
from ....store.types import PendingUpload
from ...protocol import TaskAttemptContext
from .committer import PENDING_SUFFIX, MagicCommitter, _UploadStream
from .config import MagicConfig
from .files import read_pending

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
    records_go_at_task_commit = False  # its `.pending` records are what lists its sessions

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
        """The sessions named by the `.pending` records of the jobs in the destination (GCS
        lists no sessions), each with its record: aborting one removes the record too."""
        found: dict[str, RecordedUpload] = {}
        for job_path in sorted({left.path for left in cls.leftovers(store)}):
            for st in store.walk(job_path):
                if not st.path.endswith(PENDING_SUFFIX):
                    continue
                try:
                    c = read_pending(store, st.path)
                except (ValidationError, NotFound) as e:
                    log.warning("%s; its session is not listed", e)
                    continue
                found.setdefault(
                    c.upload_id, RecordedUpload(c.path, c.upload_id, c.created / 1000, st.path)
                )
        return sorted(found.values(), key=lambda u: (u.initiated, u.path))


@dataclass(frozen=True)
class RecordedUpload(PendingUpload):
    """A session as a committer's record names it (`record`: that record's path)."""

    record: str = ""


__all__ = ["GcsMagicCommitter", "MagicConfig"]
