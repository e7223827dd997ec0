"""S3's multipart upload, modelled over a plain store (for the `sim:s3` profile).

The state lives on the store itself, under one reserved hidden top-level name (`RESERVED`), so
every process that opens the same directory sees the same uploads (the crash harness runs driver
and task processes on one directory, and a `SimStore` pickles as its profile and inner store):

- `RESERVED/uploads/<id>/meta`: the upload's key and initiation time; `part-NNNNN`: its parts;
  `claim`: while a caller completes or aborts it, which process that is.
- `RESERVED/objects/d<dir>/.../f<name>`: for a key whose object a completed upload produced, the
  multipart etag, the upload id, the object's size and md5, and the inner store's etag of the
  file as published. The tree mirrors the key (`d` before each directory name, `f` before the
  file name, so a file and a directory of one name never collide), and a recursive delete of a
  directory can drop the records below it in one go.

`SimStore` hides `RESERVED` from every listing, walk, stat and read, and refuses it as a user
path; its ordinary writes, copies, renames and deletes forget the record of the key they touch,
so an object overwritten by a plain PUT has its plain etag again.

Completing an upload: the listed parts are checked against S3's rules (nothing changes if they
fail); the caller takes the upload's claim (an exclusive create: one completer or aborter at a
time); writes the object whole in one write (it replaces what was at the key) and its record;
and last takes the upload out of the pending set by renaming its directory away. A concurrent
completer of the same upload waits for the claim, then finds the upload gone and gets
`NotFound` (S3's NoSuchUpload) - with the object already in place and its etag the upload's, so
the committers' check after NotFound passes, and exactly one caller has succeeded. Aborting
takes the same claim, so an upload is never both completed and aborted. A caller that dies part
way (SIGKILL) leaves the upload pending, perhaps with its object already published; its claim
names a process that no longer runs and is taken over, and completing (or aborting) the upload
again finishes the job. Deciding races this way relies on the inner store's exclusive create
and atomic rename, which the local file system has.

Known gaps, acceptable in a model: a reader racing a completion may briefly see the new object
with its plain etag (before its record is written); and a write that bypasses the model
(straight to the directory), of the same size within the file system's timestamp granularity,
keeps the multipart etag.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ...errors import AmbiguousOutcome, ConfigError, NotFound, StoreError
from ...liveness import process_alive, this_process
from .. import paths
from ..base import Store
from ..etags import multipart_etag, part_etag
from ..types import FileStatus, PendingUpload

RESERVED = ".dataferry-sim-uploads"  # the model's own top-level name; never a user's path
UPLOADS = f"{RESERVED}/uploads"
OBJECTS = f"{RESERVED}/objects"
TRASH = f"{RESERVED}/trash"
CLAIM = "claim"  # in an upload's directory: who is completing or aborting it now
CLAIM_WAIT_S = 120.0  # how long to wait for a live holder before answering "timed out"
CLAIM_POLL_S = 0.002
UNNAMED_CLAIM_S = 5.0  # a claim still without its holder's name after this is a dead one's
_UPLOAD_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class MultipartLimits:
    """S3's limits on multipart uploads (documented in the profile table and the docs).

    min_part_size: every part but the last at least this many bytes, checked when the upload is
        completed (S3 answers EntityTooSmall then, not at upload time).
    max_part_size: any one part at most this many bytes (EntityTooLarge at upload).
    max_parts: part numbers run from 1 to this (InvalidArgument outside).
    """

    min_part_size: int
    max_part_size: int
    max_parts: int


def is_reserved(path: str) -> bool:
    """Whether a (normalized) store path is the model's own state."""
    return path == RESERVED or path.startswith(RESERVED + "/")


def record_dir(prefix: str) -> str:
    """Where the records of keys below the directory `prefix` live."""
    parts = [p for p in prefix.split("/") if p]
    return "/".join([OBJECTS, *(f"d{p}" for p in parts)])


def record_path(key: str) -> str:
    """The record of one key's object."""
    head, _, name = key.rpartition("/")
    return f"{record_dir(head)}/f{name}"


def key_of_record(record: str) -> str:
    """Inverse of `record_path`."""
    rel = paths.relative_to(record, OBJECTS)
    return "/".join(part[1:] for part in rel.split("/"))


class UploadModel:
    """S3's multipart upload calls, with S3's limits and answers, over `store`'s files.

    Bookkeeping goes through the store's primitives (`_read`, `_write`, ...) rather than its
    public calls: a fault layer below the model then sees one operation per modelled request
    (the caller wraps each in the store's `_op` hook), not the model's internal file work.
    """

    def __init__(self, store: Store, limits: MultipartLimits, url: Callable[[str], str]) -> None:
        self.store = store
        self.limits = limits
        self.url = url

    # --- errors as S3Store raises them ------------------------------------------------------

    def _error(self, code: str, what: str, path: str, detail: str) -> StoreError:
        """S3's error answers other than NoSuchUpload: a StoreError naming S3's code."""
        return StoreError(f"{what} {self.url(path)}: {code}: {detail}", path)

    def _no_such_upload(self, what: str, path: str, upload_id: str) -> NotFound:
        return NotFound(
            f"{what} {self.url(path)}: NoSuchUpload: upload {upload_id!r} is not pending", path
        )

    # --- the upload's files -----------------------------------------------------------------

    def _meta(self, upload_id: str) -> dict[str, Any] | None:
        """An upload's key and initiation time; None if it is not pending (or never was)."""
        if not _UPLOAD_ID.match(upload_id):
            return None
        try:
            meta = json.loads(self.store._read(f"{UPLOADS}/{upload_id}/meta"))
        except (NotFound, ValueError):  # gone, or its initiation died half way
            return None
        return meta if isinstance(meta, dict) and "path" in meta else None

    def _pending_at(self, what: str, path: str, upload_id: str) -> dict[str, Any]:
        """The meta of an upload pending at `path`; NotFound (NoSuchUpload) otherwise (S3
        answers so for an upload id given with another key, too)."""
        meta = self._meta(upload_id)
        if meta is None or meta["path"] != path:
            raise self._no_such_upload(what, path, upload_id)
        return meta

    def _deregister(self, upload_id: str) -> bool:
        """Take the upload out of the pending set; True for the one caller whose atomic rename
        found it there (the decision of a race), False if it was gone already."""
        if not _UPLOAD_ID.match(upload_id):  # never a path of the caller's making
            return False
        self.store._mkdirs(TRASH)
        doomed = f"{TRASH}/{upload_id}-{uuid.uuid4().hex[:8]}"
        try:
            self.store._rename(f"{UPLOADS}/{upload_id}", doomed)
        except NotFound:
            return False
        self.store._delete(doomed, True)
        return True

    # --- the multipart calls ----------------------------------------------------------------

    def initiate(self, path: str) -> str:
        """Start an upload to `path`: nothing appears there until it is completed."""
        if not path:
            raise ConfigError(f"initiate upload to {self.url(path)}: not an object key")
        upload_id = uuid.uuid4().hex
        meta = {"path": path, "initiated": time.time()}
        self.store._write(f"{UPLOADS}/{upload_id}/meta", json.dumps(meta).encode(), False)
        return upload_id

    def upload_part(self, path: str, upload_id: str, number: int, data: bytes) -> str:
        """Store part `number`; returns its etag (md5 hex, unquoted, as S3Store returns it).
        A part of the same number uploaded again replaces the earlier one, as on S3."""
        what = "upload part to"
        if not 1 <= number <= self.limits.max_parts:
            raise self._error(
                "InvalidArgument",
                what,
                path,
                f"part number {number} is not between 1 and {self.limits.max_parts}",
            )
        if len(data) > self.limits.max_part_size:
            raise self._error(
                "EntityTooLarge",
                what,
                path,
                f"part {number} has {len(data)} bytes, over {self.limits.max_part_size}",
            )
        self._pending_at(what, path, upload_id)
        part = f"{UPLOADS}/{upload_id}/part-{number:05d}"
        self.store._write(part, data, True)
        if self._meta(upload_id) is None:  # aborted meanwhile: the part went to no upload
            self.store._delete(f"{UPLOADS}/{upload_id}", True)
            raise self._no_such_upload(what, path, upload_id)
        return part_etag(data)

    def _assemble(self, path: str, upload_id: str, etags: list[str]) -> bytes:
        """The object's bytes from the listed parts, checked as S3 checks them: each listed
        part uploaded with that etag (InvalidPart), all but the last at least the minimum part
        size (EntityTooSmall)."""
        what = "complete upload to"
        if not etags:
            raise self._error("MalformedXML", what, path, "no parts listed")
        if len(etags) > self.limits.max_parts:
            raise self._error(
                "InvalidArgument", what, path, f"{len(etags)} parts, over {self.limits.max_parts}"
            )
        parts: list[bytes] = []
        for number, etag in enumerate(etags, start=1):
            try:
                data = self.store._read(f"{UPLOADS}/{upload_id}/part-{number:05d}")
            except NotFound:
                # the upload may have been completed or aborted meanwhile: that answer first
                self._pending_at(what, path, upload_id)
                raise self._error(
                    "InvalidPart", what, path, f"part {number} was never uploaded"
                ) from None
            if part_etag(data) != etag.strip('"').lower():
                raise self._error(
                    "InvalidPart", what, path, f"part {number} does not have etag {etag!r}"
                )
            parts.append(data)
        for number, data in enumerate(parts[:-1], start=1):
            if len(data) < self.limits.min_part_size:
                raise self._error(
                    "EntityTooSmall",
                    what,
                    path,
                    f"part {number} has {len(data)} bytes; every part but the last needs "
                    f"at least {self.limits.min_part_size}",
                )
        return b"".join(parts)

    def complete(self, path: str, upload_id: str, etags: list[str]) -> str:
        """Publish the upload at `path` (whole, in one write, replacing any object there) and
        return its multipart etag; NotFound if it is not pending, or once another caller has
        completed it (see the module's docstring for the order of the steps and why)."""
        what = "complete upload to"
        self._pending_at(what, path, upload_id)
        data = self._assemble(path, upload_id, etags)  # S3's checks, before anything changes
        etag = multipart_etag([e.strip('"').lower() for e in etags])
        self._claim(what, path, upload_id)
        try:
            if not self._published(path, upload_id):  # else a dead holder published it
                self._publish(path, upload_id, data, etag)
            if not self._deregister(upload_id):
                raise self._no_such_upload(what, path, upload_id)
        except BaseException:
            self._release(upload_id)
            raise
        return etag

    def _publish(self, path: str, upload_id: str, data: bytes, etag: str) -> None:
        """The object at `path` in one write, then its record (the etag, and what identifies
        the file as the upload's object: the inner store's etag, the size and the md5)."""
        self.forget(path)  # an earlier object's record must not match the new file
        self.store._write(path, data, True)
        record = {
            "path": path,
            "upload_id": upload_id,
            "etag": etag,
            "size": len(data),
            "md5": hashlib.md5(data).hexdigest(),
            "inner_etag": self.store._stat(path).etag,
        }
        self.store._write(record_path(path), json.dumps(record).encode(), True)

    def _published(self, path: str, upload_id: str) -> bool:
        """Whether the object at `path` is already this upload's (its completer died after
        publishing and before deregistering)."""
        record = self._record(path)
        if record is None or record.get("upload_id") != upload_id:
            return False
        try:
            return self._is_upload_object(self.store._stat(path), record)
        except StoreError:
            return False

    def abort(self, path: str, upload_id: str) -> bool:
        """Abort a pending upload and drop its parts; False if it is not pending at `path`
        (unknown, aborted, completed), as S3Store answers NoSuchUpload."""
        what = "abort upload to"
        try:
            self._claim(what, path, upload_id)
        except NotFound:
            return False
        try:
            record = self._record(path)
            if record is not None and record.get("upload_id") == upload_id:
                # published by a completer that died before deregistering it: completed
                self._deregister(upload_id)
                return False
            return self._deregister(upload_id)
        except BaseException:
            self._release(upload_id)
            raise

    # --- one caller at a time completes or aborts an upload ------------------------------------

    def _claim(self, what: str, path: str, upload_id: str) -> None:
        """Become the one caller that completes or aborts the upload now: an exclusive create
        of its claim file. While a live caller holds it, wait (a caller that finds the upload
        gone then answers NoSuchUpload, and the object is in place by then); a claim of a
        process that died is taken over, so a killed completer never wedges its upload."""
        claim = f"{UPLOADS}/{upload_id}/{CLAIM}"
        me = json.dumps(_identity()).encode()
        deadline = time.monotonic() + CLAIM_WAIT_S
        while True:
            self._pending_at(what, path, upload_id)
            if self.store._create_if_absent(claim, me):
                if self._meta(upload_id) is None:  # gone meanwhile: the create made a stray
                    self.store._delete(f"{UPLOADS}/{upload_id}", True)
                    raise self._no_such_upload(what, path, upload_id)
                return
            if self._holder_died(claim):
                self._take_over(claim)
                continue
            if time.monotonic() > deadline:
                raise AmbiguousOutcome(
                    f"{what} {self.url(path)}: another caller has been completing or aborting "
                    f"upload {upload_id!r} for {CLAIM_WAIT_S:.0f} s",
                    path,
                )
            time.sleep(CLAIM_POLL_S)

    def _holder_died(self, claim: str) -> bool:
        """Whether the claim's holder is a process that no longer runs (or one that died
        between creating the claim and writing who it is)."""
        try:
            holder = json.loads(self.store._read(claim))
        except NotFound:
            return False  # released meanwhile: try again
        except ValueError:
            try:
                mtime = self.store._stat(claim).mtime or time.time()
            except NotFound:
                return False
            return time.time() - mtime > UNNAMED_CLAIM_S
        return isinstance(holder, dict) and not _alive(holder)

    def _take_over(self, claim: str) -> None:
        """Remove a dead holder's claim; of several callers doing so, one rename succeeds."""
        doomed = f"{claim}.dead-{uuid.uuid4().hex[:8]}"
        try:
            self.store._rename(claim, doomed)
        except (NotFound, StoreError):
            return
        self.store._delete(doomed, False)

    def _release(self, upload_id: str) -> None:
        """Give the claim up after a failure (the upload stays pending)."""
        try:
            self.store._delete(f"{UPLOADS}/{upload_id}/{CLAIM}", False)
        except StoreError:
            pass

    def list(self, prefix: str) -> list[PendingUpload]:
        """Pending uploads whose key starts with `prefix` (a plain string prefix, as S3's
        ListMultipartUploads filters), oldest first."""
        try:
            entries = self.store._list(UPLOADS)
        except NotFound:
            return []
        out = []
        for entry in entries:
            upload_id = paths.name(entry.path)
            meta = self._meta(upload_id)
            if meta is not None and str(meta["path"]).startswith(prefix):
                out.append(PendingUpload(meta["path"], upload_id, float(meta["initiated"])))
        return sorted(out, key=lambda u: (u.initiated, u.path))

    # --- etags of completed objects -----------------------------------------------------------

    def _record(self, key: str) -> dict[str, Any] | None:
        try:
            record = json.loads(self.store._read(record_path(key)))
        except (NotFound, ValueError, StoreError):
            return None
        return record if isinstance(record, dict) else None

    def _is_upload_object(self, st: FileStatus, record: dict[str, Any]) -> bool:
        """Whether the file is still the object the recorded upload published: the inner
        store's etag is unchanged, or (a concurrent completer of the same upload rewrote the
        same bytes) the bytes are."""
        if st.etag is not None and st.etag == record.get("inner_etag"):
            return True
        if st.size != record.get("size"):
            return False
        try:
            data = self.store._read(st.path)
        except StoreError:
            return False
        return hashlib.md5(data).hexdigest() == record.get("md5")

    def with_etag(self, st: FileStatus, record: dict[str, Any] | None = None) -> FileStatus:
        """The status with the multipart etag if the file is an upload's object."""
        if st.is_dir:
            return st
        record = record if record is not None else self._record(st.path)
        if record is None or record.get("path") != st.path:
            return st
        return replace(st, etag=record["etag"]) if self._is_upload_object(st, record) else st

    def with_etags(
        self, statuses: list[FileStatus], under: str, recursive: bool
    ) -> list[FileStatus]:
        """`with_etag` for a listing (recursive: a walk) of `under`, reading only the records
        there are: one listing of the record tree, then one read per record."""
        lister = self.store._walk if recursive else self.store._list
        try:
            found = [r for r in lister(record_dir(under)) if not r.is_dir]
        except (NotFound, StoreError):
            return statuses
        if not found:
            return statuses
        keys = {key_of_record(r.path) for r in found if paths.name(r.path).startswith("f")}
        return [self.with_etag(s) if s.path in keys else s for s in statuses]

    def forget(self, key: str, tree: bool = False) -> None:
        """Drop the record of `key` (and with `tree`, of every key below it): an ordinary
        write, copy, rename or delete makes the object no longer the upload's."""
        try:
            if key:
                self.store._delete(record_path(key), False)
            if tree:
                self.store._delete(record_dir(key), True)  # the root's: every record
        except StoreError:
            pass

    def has_state(self) -> bool:
        """Whether the model keeps any state on the store (a root delete must step round it)."""
        try:
            self.store._stat(RESERVED)
        except NotFound:
            return False
        return True

    def drop_state_if_idle(self) -> None:
        """After every object was deleted: drop the records (all stale now), and the whole
        state if no upload is pending; pending uploads outlive the delete, as on S3."""
        try:
            pending = bool(self.store._list(UPLOADS))
        except NotFound:
            pending = False
        self.store._delete(RESERVED if not pending else OBJECTS, True)


# --- who holds a claim ---------------------------------------------------------------------------


def _identity() -> dict[str, Any]:
    """This process, as a claim names its holder."""
    _host, pid, start = this_process()
    return {"pid": pid, "start": start}


def _alive(holder: dict[str, Any]) -> bool:
    """Whether the process a claim names still runs (the model's processes share a host)."""
    return process_alive(holder.get("pid"), holder.get("start"))
