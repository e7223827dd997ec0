"""Amazon S3 and S3-compatible stores (MinIO, moto, ...) through boto3.

boto3 rather than s3fs: the magic committer needs every multipart call (initiate, upload part,
complete, abort, list pending uploads) and conditional puts, which boto3 exposes one to one; its
client is synchronous and thread-safe, which fits the bounded thread pool all parallel I/O goes
through. Endpoint, credentials and region come from the ordinary AWS variables
(`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_DEFAULT_REGION`), from
boto3 client options (`endpoint_url`, `region_name`, ...), or from `storage_options` in s3fs's
names (`key`, `secret`, `token`, `endpoint_url`, `client_kwargs`, `config_kwargs`, `anon`,
`profile`), which are translated to the boto3 client's (`S3_STORAGE_OPTIONS`).

S3 has no directories: a directory is a common key prefix, and `mkdirs` writes an empty
`dir/` marker object so an empty directory can exist. There is no rename: `rename` is a copy of
every object and a delete, per object and not atomic, and the capabilities say so.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ...errors import (
    AccessDenied,
    AlreadyExists,
    AmbiguousOutcome,
    ConfigError,
    DataferryError,
    NotFound,
    PreconditionFailed,
    StoreError,
)
from .. import paths
from ..base import Store, not_empty, read_capped, record_too_large
from ..types import Capabilities, FileStatus, Op, PendingUpload
from . import dirs
from .client import _CURRENT, client_spec, s3_client

T = TypeVar("T")

S3_CAPABILITIES = Capabilities(
    atomic_file_rename=False,
    atomic_dir_rename=False,
    o1_dir_rename=False,
    etags=True,
    etags_preserved_by_rename=False,
    consistent_listing=True,
    conditional_create=True,
    multipart_upload=True,
    native_append=False,  # an object is written whole
    native_positional_write=False,
)

MIN_PART_SIZE = 5 * 1024 * 1024  # S3: every part of a multipart upload but the last (5 MiB)
# _REFUSED: an S3 Tables bucket (SeaweedFS's, AWS's) takes objects only inside a table's own
# directories (namespace/table/data/..., metadata/..., _name/...) and answers 403 to any
# request for a key outside them: a HEAD of the table's root key, of a bare key right under it
# (`_temporary`, `.hoodie/.temp`: what cleanup probes of every committer) and the root's
# directory marker. The probes asking whether a file is there (`_probe`) take a HEAD refused
# as "none of dataferry's files there" (dataferry reads back every object it writes, so a key
# it may not HEAD is not one of its own; a listing says whether it is a directory), and the
# root gets no directory marker (S3 needs none). Reads and writes of a refused key still fail
# with AccessDenied.


def _code(e: Exception) -> str:
    return str(getattr(e, "response", {}).get("Error", {}).get("Code", ""))


class S3Store(Store):
    """The objects under `s3://bucket/prefix`."""

    def __init__(
        self, url: str, *, storage_options: Mapping[str, Any] | None = None, **options: Any
    ) -> None:
        """`options` are boto3 client options; `storage_options` s3fs's (see `client_spec`)."""
        if not url.startswith(("s3://", "s3a://")):
            raise ConfigError(f"not an s3:// URL: {url!r}")
        rest = url.split("://", 1)[1]
        bucket, _, prefix = rest.partition("/")
        if not bucket:
            raise ConfigError(f"no bucket in {url!r}")
        self.bucket = bucket
        self.prefix = paths.normalize(prefix)
        self.options = options
        self.storage_options = copy.deepcopy(dict(storage_options or {}))
        self._spec = client_spec(options, self.storage_options)
        super().__init__(f"s3://{bucket}/{self.prefix}".rstrip("/"), S3_CAPABILITIES)

    def __reduce__(self):
        return (_rebuild, (self.url, self.options, self.storage_options))

    @property
    def client(self) -> Any:
        return s3_client(self._spec)

    @property
    def min_part_size(self) -> int:
        """S3 refuses to complete an upload with a part but the last under 5 MiB."""
        return MIN_PART_SIZE

    def _op(self, op: Op, path: str, fn: Callable[..., T], *args: Any) -> T:
        outer = getattr(_CURRENT, "store", None)
        _CURRENT.store = self
        try:
            return super()._op(op, path, fn, *args)
        except DataferryError:
            raise
        except Exception as e:
            from botocore.exceptions import BotoCoreError, ClientError

            if isinstance(e, ClientError):
                raise self._err(e, path, op.value) from e
            if isinstance(e, BotoCoreError):
                raise self._boto_err(e, path, op.value) from e
            raise
        finally:
            _CURRENT.store = outer

    def _key(self, path: str) -> str:
        return paths.join(self.prefix, path)

    def _rel(self, key: str) -> str:
        return paths.relative_to(key.rstrip("/"), self.prefix)

    def _dir_prefix(self, path: str) -> str:
        key = self._key(path)
        return key + "/" if key else ""

    def _err(self, e: Exception, path: str, what: str, if_match: bool = False) -> StoreError:
        """S3's answer as ours. A 412 is AlreadyExists for a request whose one condition is
        If-None-Match (a create); for one naming a version (`if_match`: If-Match,
        x-amz-copy-source-if-match) it is PreconditionFailed, and so is the 404 moto gives
        where real S3 (and SeaweedFS) answer 412 to If-Match on an absent key."""
        code = _code(e)
        msg = f"{what} {self.full_url(path)}: {code or e}"
        if if_match and code in ("PreconditionFailed", "412", "NoSuchKey", "404", "NotFound"):
            return PreconditionFailed(msg + " (the object is not the version named)", path)
        if code in ("NoSuchKey", "404", "NotFound", "NoSuchUpload"):
            return NotFound(msg, path)
        if code in ("PreconditionFailed", "412"):
            return AlreadyExists(msg, path)
        if code in ("AccessDenied", "403"):
            return AccessDenied(msg, path)
        if code in ("SlowDown", "503"):
            from ...errors import Throttled

            return Throttled(msg, path)
        return StoreError(msg, path)

    def _boto_err(self, e: Exception, path: str, what: str) -> StoreError:
        """botocore's own failures (no credentials, no connection, a timeout) as ours."""
        from botocore.exceptions import (
            ConnectionClosedError,
            NoCredentialsError,
            PartialCredentialsError,
            ReadTimeoutError,
        )

        msg = f"{what} {self.full_url(path)}: {e}"
        if isinstance(e, NoCredentialsError | PartialCredentialsError):
            return AccessDenied(
                msg + " (set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or pass storage_options "
                "key/secret, profile, or anon=True for a public bucket)",
                path,
            )
        if isinstance(e, ReadTimeoutError | ConnectionClosedError):
            return AmbiguousOutcome(msg, path)  # sent, answer lost: it may have happened
        return StoreError(msg, path)

    # --- helpers ---------------------------------------------------------------------------

    def _head(self, path: str) -> dict[str, Any] | None:
        from botocore.exceptions import ClientError

        if not self._key(path):
            return None
        try:
            return self.client.head_object(Bucket=self.bucket, Key=self._key(path))
        except ClientError as e:
            if _code(e) in ("404", "NoSuchKey", "NotFound"):
                return None
            raise self._err(e, path, "stat") from None

    def _probe(self, path: str) -> dict[str, Any] | None:
        """`_head` for the probes that ask whether a file is there (stat, exists, a listing
        that found nothing, mkdirs, delete): a key the bucket refuses is none of dataferry's
        files (`_REFUSED`), and a listing says whether it is a directory."""
        try:
            return self._head(path)
        except AccessDenied:
            return None

    def _is_dir(self, path: str) -> bool:
        resp = self.client.list_objects_v2(
            Bucket=self.bucket, Prefix=self._dir_prefix(path), MaxKeys=1
        )
        return resp.get("KeyCount", 0) > 0 or not self._key(path)

    def _keys_under(self, path: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        pager = self.client.get_paginator("list_objects_v2")
        for page in pager.paginate(Bucket=self.bucket, Prefix=self._dir_prefix(path)):
            out.extend(page.get("Contents", []))
        return out

    def _file_status(self, obj: dict[str, Any]) -> FileStatus:
        modified = obj.get("LastModified")
        return FileStatus(
            path=self._rel(obj["Key"]),
            size=int(obj.get("Size", obj.get("ContentLength", 0))),
            is_dir=False,
            etag=str(obj.get("ETag", "")).strip('"') or None,
            mtime=modified.timestamp() if modified else None,
        )

    # --- primitives ------------------------------------------------------------------------

    def _stat(self, path: str) -> FileStatus:
        head = self._probe(path)
        if head is not None:
            return self._file_status(
                {"Key": self._key(path), "Size": head["ContentLength"], **head}
            )
        if self._is_dir(path):
            return FileStatus(path, 0, True)
        raise NotFound(f"stat {self.full_url(path)}: no such object or prefix", path)

    def _list(self, path: str) -> list[FileStatus]:
        prefix = self._dir_prefix(path)
        out: list[FileStatus] = []
        pager = self.client.get_paginator("list_objects_v2")
        for page in pager.paginate(Bucket=self.bucket, Prefix=prefix, Delimiter="/"):
            for cp in page.get("CommonPrefixes", []):
                out.append(FileStatus(self._rel(cp["Prefix"]), 0, True))
            for obj in page.get("Contents", []):
                if obj["Key"] != prefix:  # the directory's own marker
                    out.append(self._file_status(obj))
        if not out and not self._is_dir(path):
            if self._probe(path) is not None:
                from ...errors import NotADirectory

                raise NotADirectory(f"list {self.full_url(path)}: is a file", path)
            raise NotFound(f"list {self.full_url(path)}: no such prefix", path)
        return sorted(out, key=lambda s: s.path)

    def marker_objects(self, path: str = "") -> list[str]:
        """Zero-byte `dir/` entries in the delimiter listing of `path` (its own included, as
        ""): what a Hive-style reader listing the directory meets besides files and
        subdirectories. `list` leaves them out; a check for leftovers must not."""
        prefix = self._dir_prefix(path)
        found: list[str] = []
        pager = self.client.get_paginator("list_objects_v2")
        for page in pager.paginate(Bucket=self.bucket, Prefix=prefix, Delimiter="/"):
            for obj in page.get("Contents", []):
                if obj["Key"].endswith("/") and not int(obj.get("Size", 0)):
                    found.append(obj["Key"][len(prefix) :].rstrip("/"))
        if "" in found and not self._listed_in_parent(prefix):
            found.remove("")  # its own entry, which no listing of its parent shows
        return sorted(found)

    def _listed_in_parent(self, prefix: str) -> bool:
        """Whether a delimiter listing of `prefix`'s parent shows it (an object or a common
        prefix): what a reader of the parent meets. An S3 Tables bucket on SeaweedFS hides an
        empty table directory there, and refuses (403) deleting it by either name."""
        answer = self.client.list_objects_v2(
            Bucket=self.bucket, Prefix=prefix.rstrip("/"), Delimiter="/"
        )
        keys = [o["Key"] for o in answer.get("Contents", [])]
        return prefix in keys or any(
            p["Prefix"] == prefix for p in answer.get("CommonPrefixes", [])
        )

    def _walk(self, path: str) -> list[FileStatus]:
        objs = [o for o in self._keys_under(path) if not o["Key"].endswith("/")]
        return sorted((self._file_status(o) for o in objs), key=lambda s: s.path)

    def _mkdirs(self, path: str) -> None:
        """A `dir/` marker object, so an empty directory can exist; none for the store's own
        root (a destination exists once anything is in it: a marker at its key would stay
        beside the data, a zero-byte entry in every listing of it)."""
        probe = path
        while probe:
            if self._probe(probe) is not None:
                raise AlreadyExists(f"mkdirs {self.full_url(path)}: a file is in the way", probe)
            probe = paths.parent(probe)
        if path and self._key(path):  # none for the root: a table bucket refuses it (`_REFUSED`)
            self.client.put_object(Bucket=self.bucket, Key=self._dir_prefix(path), Body=b"")

    def _delete(self, path: str, recursive: bool) -> bool:
        if self._key(path) and self._probe(path) is not None:
            self._delete_keys([self._key(path)], path)
            return True
        keys = [o["Key"] for o in self._keys_under(path)]
        if not recursive and any(k != self._dir_prefix(path) for k in keys):
            raise not_empty(self.full_url(path), path)
        self._delete_keys(keys, path, directory=True)  # also an emptied directory's entry
        return bool(keys)

    def _delete_keys(self, keys: list[str], path: str, directory: bool = False) -> None:
        """Delete objects, then the directory entries they leave empty (`dirs.emptied_dirs`,
        `path`'s own too for a directory), in the same batched requests. Never a data object:
        every extra key named ends in `/`. An error on a named object raises."""
        emptied = dirs.emptied_dirs(self.prefix, keys, self._key(path) if directory else None)
        names = [*keys, *(d for d in emptied if d not in keys)]
        failed, refused = dirs.delete_batched(self.client, self.bucket, names)
        if failed:
            code = failed[0].get("Code", "")
            msg = f"delete {self.full_url(self._rel(failed[0]['Key']))}: {code}"
            if code in ("AccessDenied", "403"):
                raise AccessDenied(msg, path)
            raise StoreError(msg, path)
        if refused:  # an S3 Tables bucket's deeper directories (see `dirs`)
            dirs.delete_refused_dirs(self.client, self.bucket, self.prefix, refused, emptied)

    def _rename(self, src: str, dst: str) -> None:
        what = f"rename {self.full_url(src)} to {self.full_url(dst)}"
        if self._head(dst) is not None or (self._key(dst) and self._is_dir(dst)):
            raise AlreadyExists(f"{what}: destination exists", dst)
        head = self._head(src)
        if head is not None:
            self._copy_new(self._key(src), str(head.get("ETag", "")), self._key(dst), what)
            self.stats.incr("store_bytes_copied", int(head.get("ContentLength", 0)))
            self._delete_keys([self._key(src)], src)
            return
        objs = self._keys_under(src)
        if not objs:
            raise NotFound(f"{what}: source does not exist", src)
        for o in objs:  # per object, not atomic: S3 has no rename
            rel = o["Key"][len(self._dir_prefix(src)) :]
            target = self._dir_prefix(dst) + rel
            self._copy_new(o["Key"], str(o.get("ETag", "")), target, what)
            self.client.delete_object(Bucket=self.bucket, Key=o["Key"])
            self.stats.incr("store_bytes_copied", int(o.get("Size", 0)))
        self._delete_keys([], src, directory=True)  # the source's emptied directories

    def _copy_new(self, src_key: str, etag: str, dst_key: str, what: str) -> None:
        """A rename's copy: only onto an absent key (If-None-Match), only of the version of
        the source that was listed (x-amz-copy-source-if-match), so a file another writer puts
        at the destination meanwhile is never overwritten, and a source rewritten meanwhile
        is not moved half-known. A server that ignores the conditions (moto) still gets the
        check made before the copy."""
        from botocore.exceptions import ClientError

        conditions = {"IfNoneMatch": "*", **({"CopySourceIfMatch": etag} if etag else {})}
        try:
            self.client.copy_object(
                Bucket=self.bucket,
                Key=dst_key,
                CopySource={"Bucket": self.bucket, "Key": src_key},
                **conditions,
            )
        except ClientError as e:
            dst = self._rel(dst_key)
            if _code(e) not in ("PreconditionFailed", "412"):
                raise self._err(e, dst, what) from None
            if self._head(dst) is not None:  # which condition failed: the destination's
                raise AlreadyExists(f"{what}: destination exists", dst) from None
            raise self._err(e, self._rel(src_key), what, if_match=True) from None

    def _copy(self, src: str, dst: str) -> None:
        from botocore.exceptions import ClientError

        try:
            self.client.copy_object(
                Bucket=self.bucket,
                Key=self._key(dst),
                CopySource={"Bucket": self.bucket, "Key": self._key(src)},
            )
        except ClientError as e:
            raise self._err(e, src, "copy") from None

    def _read(self, path: str, max_bytes: int | None = None) -> bytes:
        from botocore.exceptions import ClientError

        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self._key(path))
        except ClientError as e:
            raise self._err(e, path, "read") from None
        body = answer["Body"]
        if max_bytes is None:
            return body.read()
        size = int(answer.get("ContentLength") or 0)
        data = b"" if size > max_bytes else read_capped(body, size, max_bytes)
        if size > max_bytes or len(data) > max_bytes:
            body.close()  # the rest is never downloaded
            size = max(size, len(data))
            raise record_too_large(self.full_url(path), path, size, max_bytes)
        return data

    def _read_range(self, path: str, start: int, length: int) -> bytes:
        from botocore.exceptions import ClientError

        if length <= 0:
            return b""
        try:
            rng = f"bytes={start}-{start + length - 1}"
            return self.client.get_object(Bucket=self.bucket, Key=self._key(path), Range=rng)[
                "Body"
            ].read()
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") == "InvalidRange":
                return b""
            raise self._err(e, path, "read") from None

    def _write(self, path: str, data: bytes, overwrite: bool) -> None:
        from botocore.exceptions import ClientError

        extra = {} if overwrite else {"IfNoneMatch": "*"}
        if self._key(path) and self._is_dir(path):
            raise AlreadyExists(f"write {self.full_url(path)}: a directory is there", path)
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(path), Body=data, **extra)
        except ClientError as e:
            raise self._err(e, path, "write") from None

    # --- multipart upload ------------------------------------------------------------------

    def _initiate_upload(self, path: str) -> str:
        return self.client.create_multipart_upload(Bucket=self.bucket, Key=self._key(path))[
            "UploadId"
        ]

    def _upload_part(self, path: str, upload_id: str, number: int, data: bytes) -> str:
        from botocore.exceptions import ClientError

        try:
            resp = self.client.upload_part(
                Bucket=self.bucket,
                Key=self._key(path),
                UploadId=upload_id,
                PartNumber=number,
                Body=data,
            )
        except ClientError as e:
            raise self._err(e, path, "upload part to") from None
        return str(resp["ETag"]).strip('"')

    def _complete_upload(self, path: str, upload_id: str, etags: list[str]) -> str:
        from botocore.exceptions import ClientError

        parts = [{"ETag": f'"{e}"', "PartNumber": i} for i, e in enumerate(etags, start=1)]
        try:
            resp = self.client.complete_multipart_upload(
                Bucket=self.bucket,
                Key=self._key(path),
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
            )
        except ClientError as e:
            raise self._err(e, path, "complete upload to") from None
        return str(resp.get("ETag", "")).strip('"')

    def _abort_upload(self, path: str, upload_id: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.client.abort_multipart_upload(
                Bucket=self.bucket, Key=self._key(path), UploadId=upload_id
            )
        except ClientError as e:
            if _code(e) in ("NoSuchUpload", "404"):
                return False
            raise self._err(e, path, "abort upload to") from None
        return True

    def _list_uploads(self, path: str) -> list[PendingUpload]:
        prefix = self._key(path)
        out: list[PendingUpload] = []
        pager = self.client.get_paginator("list_multipart_uploads")
        for page in pager.paginate(Bucket=self.bucket, Prefix=prefix):
            for u in page.get("Uploads", []):
                out.append(
                    PendingUpload(self._rel(u["Key"]), u["UploadId"], u["Initiated"].timestamp())
                )
        return sorted(out, key=lambda u: (u.initiated, u.path))


def _rebuild(
    url: str, options: dict[str, Any], storage_options: dict[str, Any] | None = None
) -> S3Store:
    return S3Store(url, storage_options=storage_options, **options)
