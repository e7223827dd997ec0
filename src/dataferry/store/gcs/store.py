"""Google Cloud Storage through gcsfs (its JSON API client), with what gcsfs's file system
interface does not give: exclusive creates and resumable upload sessions.

What the client does, and so what the capabilities say:
- no rename: a rename is a server-side copy (`rewriteTo`) and a delete, file by file, not
  atomic and not O(1) (gcsfs's own `mv` tries the `moveTo` call of buckets with a
  hierarchical namespace first; this store never relies on it);
- an exclusive create is a multipart upload with `ifGenerationMatch=0` (412 when an object
  is there), sent here with a well-formed body (gcsfs's `mode="create"` upload is refused by
  fake-gcs-server as malformed);
- resumable upload sessions stand in for multipart uploads (`sessions`): the object appears
  only when its session is finalized, which a job commit does (the `magic-gcs` committer);
  sessions cannot be listed, so `list_uploads` finds none;
- etags are the objects' MD5 (`md5Hash`), what a finalized session's mark predicts.

gcsfs's core `GCSFileSystem` is used (not the experimental zonal-bucket class, whose probe of
every bucket stalls against an emulator), with its listings cache off: other processes write
the same prefixes. Against an emulator (`STORAGE_EMULATOR_HOST`), no token means anonymous.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any
from urllib.parse import quote

from fsspec import asyn

from ...errors import AlreadyExists, NotFound, StoreError
from ...extras import missing_dependency
from .. import paths
from ..base import not_empty
from ..fsspec.store import FsspecStore
from ..types import Capabilities, FileStatus, PendingUpload
from .sessions import CHUNK, SessionMark, Sessions

GCS_CAPABILITIES = Capabilities(
    atomic_file_rename=False,  # copy + delete
    atomic_dir_rename=False,
    o1_dir_rename=False,
    etags=True,
    etags_preserved_by_rename=True,  # a copy keeps the MD5
    consistent_listing=True,
    conditional_create=True,  # ifGenerationMatch=0
    multipart_upload=False,  # S3's kind: none
    resumable_upload=True,
)
FIXED_OPTIONS = {"use_listings_cache": False, "skip_instance_cache": True}


def _gcsfs() -> Any:
    try:
        import gcsfs.core
    except ImportError as e:
        missing = missing_dependency(e)
        raise (missing or e) from e
    return gcsfs.core


class GcsStore(FsspecStore):
    """The objects under `gs://bucket/prefix` (or `gcs://`)."""

    def __init__(self, url: str, *, fs: Any = None, **storage_options: Any) -> None:
        scheme = url.split("://", 1)[0] if "://" in url else "gs"
        given = fs
        if fs is None:
            options = dict(storage_options)
            if os.environ.get("STORAGE_EMULATOR_HOST") and "token" not in options:
                options["token"] = "anon"
            fs = _gcsfs().GCSFileSystem(**{**options, **FIXED_OPTIONS})
        root = fs._strip_protocol(url).rstrip("/")
        super().__init__(root, fs=fs, capabilities=GCS_CAPABILITIES, root_url=f"{scheme}://{root}")
        self._gcs_args = (url, given, storage_options)
        self._sessions = Sessions()
        if given is None:  # its own client: every request it sends is this store's
            _count_requests(fs, self)

    def __reduce__(self):
        url, given, options = self._gcs_args
        return (_rebuild, (url, given, options))

    def describe(self) -> str:
        return self.url

    # --- requests gcsfs has no call for ----------------------------------------------------------

    def _request(self, method: str, url: str, **kwargs: Any) -> tuple[int, Any, bytes]:
        """One request through gcsfs's session and its retries of errors that took no effect
        (5xx, throttling); query parameters as keywords. 404 raises FileNotFoundError, 412
        FileExistsError, as gcsfs maps them."""
        status, headers, _info, body = asyn.sync(
            self.fs.loop, self.fs._request, method, url, **kwargs
        )
        return status, headers, body

    def _bucket_key(self, path: str) -> tuple[str, str]:
        bucket, key, _ = self.fs.split_path(self._abs(path))
        return bucket, key

    def _upload_url(self, bucket: str) -> str:
        return f"{self.fs._location}/upload/storage/v1/b/{quote(bucket, safe='')}/o"

    # --- status: the MD5 is the etag ----------------------------------------------------------

    def _status(self, info: dict[str, Any]) -> FileStatus:
        st = super()._status(info)
        md5 = info.get("md5Hash")
        return FileStatus(st.path, st.size, st.is_dir, md5 or st.etag, st.mtime) if md5 else st

    # --- writes --------------------------------------------------------------------------------

    def _write(self, path: str, data: bytes, overwrite: bool) -> None:
        """One upload (an object needs no parent directories)."""
        if not overwrite:
            if not self._create_if_absent(path, data):
                raise AlreadyExists(f"write {self.full_url(path)}: file exists", path)
            return
        if self._is_dir(path):
            raise AlreadyExists(f"write {self.full_url(path)}: a directory is there", path)
        self.fs.pipe_file(self._abs(path), data)

    def _walk(self, path: str) -> list[FileStatus]:
        """Every object below `path` but the empty directories' `dir/` objects."""
        if not self._is_dir(path):
            return []
        found = self.fs.find(self._abs(path), detail=True)
        out = [
            self._status(info)
            for name, info in found.items()
            if not name.endswith("/") and info.get("type") != "directory"
        ]
        return sorted(out, key=lambda s: s.path)

    def _delete(self, path: str, recursive: bool) -> bool:
        full = self._abs(path)
        if self._is_dir(path):
            if recursive:
                self.fs.rm(full, recursive=True)
                return True
            # only the empty directory's own `dir/` object: a recursive delete after the check
            # would take along an object written between the two (another job's record)
            if self._list(path):
                raise not_empty(self.full_url(path), path)
            try:
                self.fs.rm_file(full + "/")
            except FileNotFoundError:
                pass  # no marker: the directory was only the name of what was below it
            self.fs.invalidate_cache()
            return True
        try:
            self.fs.rm_file(full)
        except FileNotFoundError:
            return False
        return True

    def _create_if_absent(self, path: str, data: bytes) -> bool:
        """One multipart upload with ifGenerationMatch=0: of racing creators, one wins."""
        if self._is_dir(path):
            return False
        bucket, key = self._bucket_key(path)
        boundary = uuid.uuid4().hex
        meta = json.dumps({"name": key}).encode()
        body = b"".join(
            (
                f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n".encode(),
                meta,
                f"\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n".encode(),
                data,
                f"\r\n--{boundary}--\r\n".encode(),
            )
        )
        try:
            self._request(
                "POST",
                self._upload_url(bucket),
                uploadType="multipart",
                ifGenerationMatch="0",
                headers={"Content-Type": f"multipart/related; boundary={boundary}"},
                data=body,
            )
        except FileExistsError:
            return False
        self.fs.invalidate_cache(self._abs(paths.parent(path)) if paths.parent(path) else None)
        return True

    def _mkdirs(self, path: str) -> None:
        """GCS has no directories: an empty one is a zero-byte `path/` object (as the
        console's folders), which listings show as the directory itself."""
        super()._mkdirs(path)
        if path and not self._is_dir(path):
            self.fs.pipe_file(self._abs(path) + "/", b"")
            self.fs.invalidate_cache()

    def _rename(self, src: str, dst: str) -> None:
        """Copy then delete, file by file (what the capabilities declare)."""
        what = f"rename {self.full_url(src)} to {self.full_url(dst)}"
        with self._lock:
            if not self.exists(src):
                raise NotFound(f"{what}: source does not exist", src)
            if self.exists(dst):
                raise AlreadyExists(f"{what}: destination exists", dst)
            parent = paths.parent(dst)
            if parent and self.fs.isfile(self._abs(parent)):
                from ...errors import NotADirectory

                raise NotADirectory(f"{what}: destination's parent is a file", dst)
            files = self._walk(src) if self._is_dir(src) else [self._stat(src)]
            for f in files:
                target = dst + f.path[len(src) :]
                self.fs.copy(self._abs(f.path), self._abs(target))
                self.fs.rm_file(self._abs(f.path))

    # --- resumable upload sessions as the multipart operations ------------------------------------

    def _initiate_upload(self, path: str) -> str:
        bucket, key = self._bucket_key(path)
        _, headers, _ = self._request(
            "POST",
            self._upload_url(bucket),
            uploadType="resumable",
            name=key,
            json={"name": key},
        )
        return str(headers["Location"])

    def _upload_part(self, path: str, upload_id: str, number: int, data: bytes) -> str:
        """Send the part's whole 256 KiB chunks; hold the rest back (in the mark)."""
        state = self._sessions.state(upload_id, number)
        chunk = state.add(number, data)
        if chunk:
            end = state.sent + len(chunk) - 1
            _, headers, _ = self._request(
                "PUT",
                upload_id,
                headers={"Content-Range": f"bytes {state.sent}-{end}/*"},
                data=chunk,
            )
            persisted = headers.get("Range", "")
            if persisted and int(persisted.rsplit("-", 1)[1]) != end:
                raise StoreError(
                    f"upload part {number} of {self.full_url(path)}: the session holds "
                    f"{persisted}, not bytes 0-{end}",
                    path,
                )
            state.sent = end + 1
        return state.mark().encode()

    def _complete_upload(self, path: str, upload_id: str, etags: list[str]) -> str:
        """Finalize: the held-back bytes with the total size. NotFound when the session is
        gone (finalized before, or cancelled)."""
        mark = SessionMark.decode(etags[-1])
        if mark.held:
            span = f"bytes {mark.sent}-{mark.total - 1}/{mark.total}"
        else:
            span = f"bytes */{mark.total}"
        try:
            _, _, body = self._request(
                "PUT", upload_id, headers={"Content-Range": span}, data=mark.held
            )
        except FileNotFoundError:
            raise NotFound(
                f"complete upload of {self.full_url(path)}: the session is gone", path
            ) from None
        finally:
            self._sessions.forget(upload_id)
        self.fs.invalidate_cache()
        try:
            return str(json.loads(body).get("md5Hash") or mark.md5)
        except ValueError:
            return mark.md5

    def _abort_upload(self, path: str, upload_id: str) -> bool:
        """Cancel the session (DELETE its URI: 499 when it was cancelled); False when it was
        gone already."""
        self._sessions.forget(upload_id)
        try:
            status, _, _ = self._request("DELETE", upload_id)
        except FileNotFoundError:
            return False
        return status in (499, 200, 204)

    def _list_uploads(self, path: str) -> list[PendingUpload]:
        return []  # GCS has no listing of sessions: their URIs are in the committers' records

    @property
    def lists_uploads(self) -> bool:
        return False

    @property
    def min_part_size(self) -> int:
        return CHUNK

    def upload_etag(self, etags: list[str]) -> str:
        return SessionMark.decode(etags[-1]).md5


def _rebuild(url: str, fs: Any, storage_options: dict[str, Any]) -> GcsStore:
    return GcsStore(url, fs=fs, **storage_options)


_READ_METHODS = frozenset({"GET", "HEAD"})


def _count_requests(fs: Any, store: GcsStore) -> None:
    """Count each request the client sends in the store's statistics (`store_requests`, by
    kind, and the bytes of bodies sent), as the S3 store does, so that `bench commit` on a
    gs:// server shows what a commit asked for. Wraps the one coroutine all of gcsfs's calls
    go through, on this instance only (a pickled client is rebuilt without it); a request
    gcsfs retries counts once."""
    inner = fs._request

    async def counted(method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        stats = store.stats
        stats.incr("store_requests")
        stats.incr(f"store_requests_{'read' if method in _READ_METHODS else 'write'}")
        data = kwargs.get("data")
        if isinstance(data, (bytes, bytearray)) and data:
            stats.incr("store_bytes_write", len(data))
        return await inner(method, path, *args, **kwargs)

    fs._request = counted
