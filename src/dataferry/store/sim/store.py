"""`sim:` stores: a real local directory behind a model of another store.

Each request costs the profile's latency (a real sleep, so parallel requests really overlap),
plus transfer time for the bytes it moves. Over the profile's requests-per-second ceiling a
request either waits for a slot (HDFS, ABFS) or, as object stores do, is answered 503 Slow Down
and retried by the client after a jittered exponential backoff (S3, GCS). Rename follows the modelled store's semantics: atomic and O(1)
(HDFS, ABFS), or a copy of every byte then a delete, per file and not atomic for directories
(GCS, S3). Directory renames on such stores are carried out file by file on the inner store, so
a fault injected below the model can stop one half way, as on the real thing.

Where the modelled store has multipart upload (S3), so does the model, with S3's limits and
answers (`uploads.py`): pending uploads are invisible, a completed one appears whole with
S3's multipart etag, and the state is kept on the inner store, so every process sees it. Each
multipart call passes the inner store's `_op` hook as one operation of its own kind
(`Op.MULTIPART_*`), so a fault layer below the model can crash or answer ambiguously there.

The models' numbers live in one table, `PROFILES` (`profiles.py`); they are models, not
measurements (docs/store-models.md gives the public facts they rest on).
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from ...errors import AlreadyExists, ConfigError, NotFound
from .. import paths
from ..base import Store, not_empty
from ..pacing import Pacer, TokenBucket
from ..types import FileStatus, Op, PendingUpload
from ..wrapping import WrappingStore
from .profiles import PROFILES, SimProfile, parse_sim_url
from .uploads import RESERVED, MultipartLimits, UploadModel, is_reserved

T = TypeVar("T")

__all__ = ["PROFILES", "RESERVED", "MultipartLimits", "SimProfile", "SimStore", "parse_sim_url"]


class SimStore(WrappingStore):
    """A store model over an inner (usually local) store."""

    def __init__(self, profile: SimProfile, inner: Store, latency_scale: float = 1.0) -> None:
        if latency_scale < 0:
            raise ConfigError(f"latency_scale must be >= 0, got {latency_scale}")
        super().__init__(inner, profile.capabilities)
        self.profile = profile
        self.latency_scale = latency_scale
        self.url = f"sim:{profile.name}:{inner.url}"
        self._pacers: dict[tuple[str, str], Pacer] = {}
        self._buckets: dict[tuple[str, str], TokenBucket] = {}
        self._random = random.Random(0x5EED)
        self._pacer_lock = threading.Lock()
        limits = profile.multipart
        # the multipart model keeps its state on the inner store (shared by every process)
        self._uploads = None if limits is None else UploadModel(inner, limits, self.full_url)

    def __reduce__(self):
        return (SimStore, (self.profile, self.inner, self.latency_scale))

    @property
    def min_part_size(self) -> int:
        """The model's smallest part but the last (S3: 5 MiB); 0 without multipart."""
        return self.profile.multipart.min_part_size if self.profile.multipart else 0

    def full_url(self, path: str = "") -> str:
        return self.inner.full_url(path)

    def relative_path(self, url: str) -> str:
        return self.inner.relative_path(url)

    def describe(self) -> str:
        return f"sim:{self.profile.name} over {self.inner.describe()}"

    # --- cost model ---------------------------------------------------------------------------

    def _pacer(self, kind: str, path: str) -> Pacer:
        return self._limiter(self._pacers, Pacer, kind, path)

    def _limiter(
        self, table: dict[tuple[str, str], T], make: Callable[[float], T], kind: str, path: str
    ) -> T:
        """The rate limiter of `kind` requests for `path` (one per top-level prefix where the
        profile's ceiling is), made with `make(rate)` on first use."""
        prefix = path.split("/", 1)[0] if self.profile.per_prefix_ceiling else ""
        key = (kind, prefix)
        found = table.get(key)
        if found is None:
            with self._pacer_lock:
                rate = (
                    self.profile.write_ops_per_s if kind == "write" else self.profile.read_ops_per_s
                )
                found = table.setdefault(key, make(rate))
        return found

    def _charge(self, kind: str, path: str, nbytes: int = 0, bandwidth: float = 0.0) -> None:
        """One modelled request: wait for a slot, then latency plus transfer time."""
        self.stats.incr("store_requests")
        self.stats.incr(f"store_requests_{kind}")
        # per top-level prefix: where the load goes (S3's ceilings are per prefix)
        self.stats.incr(f"store_requests_prefix.{path.split('/', 1)[0]}")
        if nbytes:
            self.stats.incr(f"store_bytes_{kind}", nbytes)
        if self.latency_scale == 0:
            return
        transfer = nbytes / bandwidth if bandwidth and nbytes else 0.0
        if self.profile.over_ceiling == "slowdown":
            self._slow_down(kind, path)
            time.sleep((self.profile.latency_s + transfer) * self.latency_scale)
            return
        wait = self._pacer(kind, path).reserve()
        if wait > 0:
            self.stats.add_sample("store_io_rate_limited", wait * 1000.0)
        time.sleep(wait + (self.profile.latency_s + transfer) * self.latency_scale)

    def _slow_down(self, kind: str, path: str) -> None:
        """Over the prefix's rate the service answers 503 Slow Down: each rejected request costs
        a round trip, and the client backs off (full jitter, base factor 2, at most 20 s) before
        it tries again."""
        bucket = self._bucket(kind, path)
        retry = 0
        while not bucket.try_take():
            retry += 1
            self.stats.incr("store_requests_throttled")
            self.stats.incr("store_requests")
            self.stats.incr(f"store_requests_prefix.{path.split('/', 1)[0]}")
            backoff = min(20.0, self._random.random() * 2 ** (retry - 1))
            self.stats.add_sample("store_throttle_backoff", backoff * 1000.0)
            time.sleep((self.profile.latency_s + backoff) * self.latency_scale)

    def _bucket(self, kind: str, path: str) -> TokenBucket:
        return self._limiter(self._buckets, TokenBucket, kind, path)

    def _strip(self, st: FileStatus) -> FileStatus:
        return st if self.profile.etags else replace(st, etag=None)

    # --- the model's own state: hidden, refused as a user path, kept in step -------------------

    def _user_path(self, *candidates: str) -> None:
        """Refuse the reserved name of the multipart model's state (on every profile, so a
        directory keeps its meaning whichever model opens it)."""
        for path in candidates:
            if is_reserved(path):
                raise ConfigError(
                    f"{self.full_url(path)}: {RESERVED!r} is reserved for the store model's "
                    "multipart uploads"
                )

    def _visible(self, statuses: list[FileStatus], path: str) -> list[FileStatus]:
        """A listing or walk without the model's state (only the root can hold it)."""
        return statuses if path else [s for s in statuses if not is_reserved(s.path)]

    def _forget(self, path: str, tree: bool = False) -> None:
        """An ordinary change at `path`: an upload's object there is no longer one."""
        if self._uploads is not None:
            self._uploads.forget(path, tree)

    def _statuses(self, statuses: list[FileStatus], path: str, recursive: bool) -> list[FileStatus]:
        """Listed statuses as the model answers them: multipart etags, etags stripped."""
        if self._uploads is not None:
            statuses = self._uploads.with_etags(statuses, path, recursive)
        return [self._strip(s) for s in statuses]

    # --- primitives with the model -------------------------------------------------------------

    def _stat(self, path: str) -> FileStatus:
        self._user_path(path)
        self._charge("read", path)
        st = self.inner.stat(path)
        if self._uploads is not None:
            st = self._uploads.with_etag(st)
        return self._strip(st)

    def _list(self, path: str) -> list[FileStatus]:
        self._user_path(path)
        out = self._visible(self.inner.list(path), path)
        for _ in range(max(1, math.ceil(len(out) / self.profile.list_page))):
            self._charge("read", path)
        return self._statuses(out, path, recursive=False)

    def _walk(self, path: str) -> list[FileStatus]:
        self._user_path(path)
        out = self._visible(self.inner.walk(path), path)
        if self.profile.rename == "atomic":  # hierarchical: one listing per directory
            dirs = {paths.parent(s.path) for s in out} or {path}
            requests = len(dirs)
        else:  # flat namespace: one paged listing of the prefix
            requests = max(1, math.ceil(len(out) / self.profile.list_page))
        for _ in range(requests):
            self._charge("read", path)
        return self._statuses(out, path, recursive=True)

    def _mkdirs(self, path: str) -> None:
        self._user_path(path)
        self._charge("write", path)
        self.inner.mkdirs(path)

    def _delete(self, path: str, recursive: bool) -> bool:
        self._user_path(path)
        if self.profile.rename == "copy" and recursive:
            # a flat namespace deletes object by object: list, then batched delete requests
            files = self._visible(self.inner.walk(path), path)
            self._charge("read", path)
            for _ in range(max(1, math.ceil(len(files) / self.profile.delete_batch))):
                self._charge("write", path)
        else:
            self._charge("write", path)
        self._forget(path, tree=recursive)
        if path == "" and self._uploads is not None and self._uploads.has_state():
            return self._delete_root(recursive)
        return self.inner.delete(path, recursive)

    def _delete_root(self, recursive: bool) -> bool:
        """Delete everything visible, never the model's state: pending uploads outlive a
        recursive delete, as on S3 (a bucket's uploads are not objects)."""
        entries = self._visible(self.inner.list(""), "")
        if entries and not recursive:
            raise not_empty(self.full_url(""), "")
        deleted = False
        for e in entries:
            deleted = self.inner.delete(e.path, recursive=e.is_dir) or deleted
        if self._uploads is not None:
            self._uploads.drop_state_if_idle()
        return deleted

    def _rename(self, src: str, dst: str) -> None:
        self._user_path(src, dst)
        if self.profile.rename == "atomic":
            self._charge("write", src)
            self.inner.rename(src, dst)
            self._forget(src, tree=True)  # what moved keeps no upload's etag (not on S3)
            self._forget(dst, tree=True)
            return
        # copy-then-delete: probe, then per file copy + delete, in place of a rename
        self._charge("read", src)
        st = self.inner.stat(src)
        self._charge("read", dst)
        if self.inner.exists(dst):
            raise AlreadyExists(
                f"rename {self.full_url(src)} to {self.full_url(dst)}: destination exists", dst
            )
        self._forget(src, tree=True)  # the copies are objects of their own, with plain etags
        self._forget(dst, tree=True)
        if not st.is_dir:
            self._copy_delete(src, dst, st.size)
            return
        files = self._walk(src)
        for f in files:
            rel = paths.relative_to(f.path, src)
            self._copy_delete(f.path, paths.join(dst, rel), f.size)
        self.inner.delete(src, recursive=True)  # directory markers go with the last object

    def _copy_delete(self, src: str, dst: str, size: int) -> None:
        self._charge("write", dst, size, self.profile.copy_bandwidth_bytes_s)
        self.inner.copy(src, dst)
        self._charge("write", src)
        if not self.inner.delete(src):
            raise NotFound(f"rename {self.full_url(src)}: source vanished during copy", src)

    def _copy(self, src: str, dst: str) -> None:
        self._user_path(src, dst)
        size = self.inner.stat(src).size
        self._charge("write", dst, size, self.profile.copy_bandwidth_bytes_s)
        self._forget(dst)  # a copy is an object of its own, with a plain etag (as S3's COPY)
        self.inner.copy(src, dst)

    def _read(self, path: str, max_bytes: int | None = None) -> bytes:
        self._user_path(path)
        data = self.inner.read_bytes(path, max_bytes)
        self._charge("read", path, len(data), self.profile.bandwidth_bytes_s)
        return data

    def _write(self, path: str, data: bytes, overwrite: bool) -> None:
        self._user_path(path)
        self._charge("write", path, len(data), self.profile.bandwidth_bytes_s)
        if overwrite:
            self._forget(path)
        self.inner.write_bytes(path, data, overwrite)

    def _append(self, path: str, data: bytes) -> None:
        self._user_path(path)
        if not self.capabilities.native_append:  # an object store rewrites the whole object
            self.stats.incr("append_rewrites")
            size = self.inner.stat(path).size if self.inner.exists(path) else 0
            self._charge("write", path, size + len(data), self.profile.bandwidth_bytes_s)
        else:
            self._charge("write", path, len(data), self.profile.bandwidth_bytes_s)
        self._forget(path)
        self.inner.append_bytes(path, data)

    def _read_range(self, path: str, start: int, length: int) -> bytes:
        self._user_path(path)
        data = self.inner.read_range(path, start, length)
        self._charge("read", path, len(data), self.profile.bandwidth_bytes_s)
        return data

    def _create_if_absent(self, path: str, data: bytes) -> bool:
        self._user_path(path)
        self._charge("write", path, len(data), self.profile.bandwidth_bytes_s)
        return self.inner.create_if_absent(path, data)

    # --- multipart upload (profiles with `multipart`) -----------------------------------------

    def _model(self) -> UploadModel:
        if self._uploads is None:
            self._no_multipart()
        assert self._uploads is not None
        return self._uploads

    def _request(self, op: Op, path: str, fn: Callable[..., T], *args: Any) -> T:
        """One modelled multipart request, run through the inner store's `_op` hook as one
        operation of its own kind: a fault layer below the model traces it, and can crash or
        answer ambiguously before or after it, as for any other request."""
        return self.inner._op(op, path, fn, *args)

    # a completed upload's object has S3's multipart etag here, as on S3 (not the inner's)
    _upload_completed = Store._upload_completed

    def _initiate_upload(self, path: str) -> str:
        self._user_path(path)
        model = self._model()
        self._charge("write", path)
        return self._request(Op.MULTIPART_INITIATE, path, model.initiate, path)

    def _upload_part(self, path: str, upload_id: str, number: int, data: bytes) -> str:
        self._user_path(path)
        model = self._model()
        self._charge("write", path, len(data), self.profile.bandwidth_bytes_s)
        return self._request(
            Op.MULTIPART_PART, path, model.upload_part, path, upload_id, number, data
        )

    def _complete_upload(self, path: str, upload_id: str, etags: list[str]) -> str:
        self._user_path(path)
        model = self._model()
        self._charge("write", path)
        return self._request(Op.MULTIPART_COMPLETE, path, model.complete, path, upload_id, etags)

    def _abort_upload(self, path: str, upload_id: str) -> bool:
        self._user_path(path)
        model = self._model()
        self._charge("write", path)
        return self._request(Op.MULTIPART_ABORT, path, model.abort, path, upload_id)

    def _list_uploads(self, path: str) -> list[PendingUpload]:
        if self._uploads is None:
            return []
        self._user_path(path)
        found = self._request(Op.MULTIPART_LIST, path, self._uploads.list, path)
        for _ in range(max(1, math.ceil(len(found) / self.profile.list_page))):
            self._charge("read", path)  # ListMultipartUploads pages as listings do
        return found
