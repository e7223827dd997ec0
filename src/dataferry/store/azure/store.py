"""Azure Blob Storage (`abfs://container/path`) through adlfs, with Azure's own clients where
adlfs falls short. Its capabilities are the account's, read from it, never the URL's:

- a Blob account (no hierarchical namespace; Azurite): adlfs has no rename, so a rename is
  fsspec's copy and delete, neither atomic nor O(1): `auto` never picks a rename committer.
  Multipart uploads are block lists (`blocks`): `auto` picks the block-list committer;
- an account with a hierarchical namespace (ADLS Gen2): files and directories are renamed by
  the Data Lake API (azure-storage-file-datalake), atomically, and only there is `abfs://` a
  rename store. No emulator has that API; its model is `sim:abfs`.

Exclusive creates are Put Blob with If-None-Match: * (`overwrite=False`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

import fsspec

from ...errors import AlreadyExists, AmbiguousOutcome, NotADirectory, NotFound, StoreError
from .. import paths
from ..base import not_empty
from ..fsspec.store import FsspecStore
from ..pool import parallel_map
from ..types import Capabilities, FileStatus, Op, PendingUpload
from . import account, blocks

T = TypeVar("T")
DELETE_BATCH = 256  # Blob Batch's most subrequests a request
DELETE_BATCH_MIN = 32  # a smaller batch is not worth a request of its own
DELETE_THREADS = 8  # Blob Batch requests at once
log = logging.getLogger("dataferry.store")

BLOB_CAPABILITIES = Capabilities(
    atomic_file_rename=False,  # adlfs: copy + delete
    atomic_dir_rename=False,
    o1_dir_rename=False,
    etags=True,
    etags_preserved_by_rename=False,
    consistent_listing=True,
    conditional_create=True,  # Put Blob with If-None-Match: *
    multipart_upload=True,  # Put Block / Put Block List
    block_lists=True,
)
HNS_CAPABILITIES = replace(
    BLOB_CAPABILITIES,
    atomic_file_rename=True,  # the Data Lake API's rename
    atomic_dir_rename=True,
    o1_dir_rename=True,
    etags_preserved_by_rename=True,
)


def _azure_error(e: Exception, what: str, path: str) -> StoreError:
    """An Azure SDK error (the account's clients', or adlfs's own, which it lets through
    unconverted where a blob vanishes between its listing and its next request) as ours."""
    from azure.core.exceptions import (
        ResourceExistsError,
        ResourceNotFoundError,
        ServiceResponseError,
    )

    if isinstance(e, ResourceNotFoundError):
        return NotFound(f"{what}: not found", path)
    if isinstance(e, ResourceExistsError):
        return AlreadyExists(f"{what}: exists", path)
    if isinstance(e, ServiceResponseError):  # sent, answer lost (a timeout): it may have happened
        return AmbiguousOutcome(f"{what}: {type(e).__name__}: {e}", path)
    code = getattr(e, "error_code", None) or type(e).__name__
    return StoreError(f"{what}: {code}: {str(e).splitlines()[0] if str(e) else ''}", path)


class AzureStore(FsspecStore):
    """An adlfs file system rooted at `abfs://container/path`, with the account's clients."""

    def __init__(self, url: str, **storage_options: Any) -> None:
        fs, _ = fsspec.core.url_to_fs(url, **storage_options)
        self._blobs = account.blob_service(fs)
        self.hns = account.has_hierarchical_namespace(self._blobs)
        caps = HNS_CAPABILITIES if self.hns else BLOB_CAPABILITIES
        super().__init__(url, fs=fs, capabilities=caps)
        self._options = storage_options
        self.container, _, self.prefix = self.root.partition("/")

    def __reduce__(self):
        return (_rebuild, (self._url_arg, self._options))

    def describe(self) -> str:
        kind = "hierarchical namespace" if self.hns else "Blob API"
        return f"{self.url} (Azure, {kind})"

    # --- the account's clients ---------------------------------------------------------------

    def _name(self, path: str) -> str:
        """The blob name of a store path."""
        return f"{self.prefix}/{path}".strip("/") if self.prefix else path

    def _blob(self, path: str) -> Any:
        return self._blobs.get_blob_client(self.container, self._name(path))

    def _op(self, op: Op, path: str, fn: Any, *args: Any) -> Any:
        """Every operation, the file system's (adlfs) included: the SDK's errors as ours."""
        from azure.core.exceptions import AzureError

        try:
            return super()._op(op, path, fn, *args)
        except AzureError as e:
            raise _azure_error(e, f"{op.value} {self.full_url(path)}", path) from e

    def _call(self, what: str, path: str, fn: Callable[[], T]) -> T:
        from azure.core.exceptions import AzureError

        try:
            return fn()
        except AzureError as e:
            raise _azure_error(e, f"{what} {self.full_url(path)}", path) from e

    # --- exclusive creates: If-None-Match: * ---------------------------------------------------

    def _create_if_absent(self, path: str, data: bytes) -> bool:
        if self._is_dir(path):
            return False
        parent = paths.parent(path)
        if parent:
            self._mkdirs(parent)  # refuses a file in the way
        try:
            self._call("create", path, lambda: self._blob(path).upload_blob(data, overwrite=False))
        except AlreadyExists:
            return False
        return True

    def _write(self, path: str, data: bytes, overwrite: bool) -> None:
        if overwrite:
            super()._write(path, data, overwrite)
            return
        if self._is_dir(path):
            raise AlreadyExists(f"write {self.full_url(path)}: a directory is there", path)
        if not self._create_if_absent(path, data):
            raise AlreadyExists(f"write {self.full_url(path)}: file exists", path)

    def _mkdirs(self, path: str) -> None:
        """A Blob account has no directories: an empty one is a zero-byte blob whose metadata
        says it is one (`is_directory`, adlfs's own mark, which its listings read)."""
        super()._mkdirs(path)
        if not self.hns and path and not self._is_dir(path):
            blob = self._blob(path)
            self._call(
                "mkdirs",
                path,
                lambda: blob.upload_blob(b"", overwrite=True, metadata={"is_directory": "true"}),
            )
            self.fs.invalidate_cache()

    def _delete(self, path: str, recursive: bool) -> bool:
        """Blob by blob with the account's client, in Blob Batch requests sent DELETE_THREADS
        at once (one request after another, a job's thousands of records took most of its
        commit on Azurite), the directory's own marker last; never the container (adlfs's
        recursive delete removes an emptied one)."""
        container = self._blobs.get_container_client(self.container)
        name = self._name(path)
        inside = f"{name}/" if name else None
        below = self._call(
            "delete",
            path,
            lambda: [b.name for b in container.list_blobs(name_starts_with=inside)],
        )
        if below and not recursive:
            raise not_empty(self.full_url(path), path)

        def batch_deleted(batch: list[str]) -> bool:
            answers = self._call(
                "delete", path, lambda: container.delete_blobs(*batch, raise_on_any_failure=False)
            )
            for blob, answer in zip(batch, answers, strict=True):
                if answer.status_code not in (200, 202, 404):
                    raise StoreError(
                        f"delete {self.full_url(path)}: {blob} answered {answer.status_code}",
                        path,
                    )
            return any(a.status_code in (200, 202) for a in answers)

        size = min(DELETE_BATCH, max(DELETE_BATCH_MIN, -(-len(below) // DELETE_THREADS)))
        batches = [below[i : i + size] for i in range(0, len(below), size)]
        deleted = any(parallel_map(batch_deleted, batches, DELETE_THREADS))
        if name:
            deleted = batch_deleted([name]) or deleted
        self.fs.invalidate_cache()
        return deleted

    def _list(self, path: str) -> list[FileStatus]:
        """One entry a name: a directory's marker blob and its prefix are one directory."""
        out: dict[str, FileStatus] = {}
        for st in super()._list(path):
            if st.path not in out or st.is_dir:
                out[st.path] = st
        return [out[p] for p in sorted(out)]

    # --- renames: the Data Lake API on a hierarchical namespace, else copy + delete ----------

    def _rename(self, src: str, dst: str) -> None:
        what = f"rename {self.full_url(src)} to {self.full_url(dst)}"
        if not self.exists(src):
            raise NotFound(f"{what}: source does not exist", src)
        if self.exists(dst):
            raise AlreadyExists(f"{what}: destination exists", dst)
        parent = paths.parent(dst)
        if parent and self.exists(parent) and not self._is_dir(parent):
            raise NotADirectory(f"{what}: destination's parent is a file", dst)
        if not self.hns:
            self._copy_and_delete(src, dst)
            return
        lake = account.datalake_service(self._blobs).get_file_system_client(self.container)
        target = f"{self.container}/{self._name(dst)}"
        if self._is_dir(src):
            client = lake.get_directory_client(self._name(src))
            self._call("rename", src, lambda: client.rename_directory(target))
        else:
            client = lake.get_file_client(self._name(src))
            self._call("rename", src, lambda: client.rename_file(target))

    def _copy_and_delete(self, src: str, dst: str) -> None:
        """A Blob account's rename (adlfs has none): each file copied then deleted, a
        directory file by file; neither atomic nor O(1), as the capabilities say."""
        if not self._is_dir(src):
            self._copy(src, dst)
            self._delete(src, False)
            return
        for st in self._walk(src):
            rel = paths.relative_to(st.path, src)
            self._copy(st.path, f"{dst}/{rel}")
            self._delete(st.path, False)
        self._delete(src, True)
        self.fs.invalidate_cache()

    # --- multipart uploads as block lists (see `blocks`) ---------------------------------------

    @property
    def min_part_size(self) -> int:
        return 0

    def _initiate_upload(self, path: str) -> str:
        return blocks.new_upload_id()  # nothing on the account until a block is staged

    def _upload_part(self, path: str, upload_id: str, number: int, data: bytes) -> str:
        if not data:
            return blocks.block_id(upload_id, number, blocks.EMPTY)
        block = blocks.block_id(upload_id, number)
        self._call("stage block of", path, lambda: self._blob(path).stage_block(block, data))
        return block

    def _complete_upload(self, path: str, upload_id: str, etags: list[str]) -> str:
        from azure.storage.blob import BlobBlock

        staged = _own_staged(upload_id, etags)
        if staged is None:
            raise StoreError(f"complete upload to {self.full_url(path)}: not its blocks", path)
        try:
            resp = self._call(
                "commit block list of",
                path,
                lambda: self._blob(path).commit_block_list([BlobBlock(b) for b in staged]),
            )
        except StoreError as e:
            if isinstance(e, NotFound) or _code(e) == "InvalidBlockList":
                raise NotFound(
                    f"complete upload {upload_id} to {self.full_url(path)}: its blocks are "
                    "no longer staged",
                    path,
                ) from e
            raise
        return str(resp.get("etag", "")).strip('"')

    def _upload_completed(self, path: str, upload_id: str, etags: list[str]) -> bool:
        """The blob's committed block list is exactly this upload's blocks."""
        staged = _own_staged(upload_id, etags)
        try:
            committed, _ = self._call(
                "get block list of", path, lambda: self._blob(path).get_block_list("committed")
            )
        except NotFound:
            return False
        if staged == [] and not committed:
            try:  # an empty file's list has no block
                return not self._stat(path).is_dir
            except NotFound:
                return False
        return staged == [b.id for b in committed]

    def _abort_upload(self, path: str, upload_id: str) -> bool:
        """Tombstone the upload; once every upload staged at the blob is tombstoned, drop the
        blob's uncommitted blocks (delete a blob that was never committed, or commit a
        committed one's own list again: its bytes unchanged)."""
        blob = self._blob(path)
        try:
            committed, uncommitted = self._call(
                "get block list of", path, lambda: blob.get_block_list("all")
            )
        except NotFound:
            return False
        staged, dead, foreign = blocks.uploads_of([b.id for b in uncommitted])
        if upload_id not in staged or upload_id in dead:
            return False
        tomb = blocks.block_id(upload_id, 0, blocks.TOMBSTONE)
        self._call("abort upload to", path, lambda: blob.stage_block(tomb, b"x"))
        if foreign or not staged <= dead | {upload_id}:
            return True  # another upload is live there: its commit or abort drops these
        self._discard_uncommitted(path, committed)
        return True

    def _discard_uncommitted(self, path: str, committed: list[Any]) -> None:
        from azure.storage.blob import BlobBlock

        blob = self._blob(path)
        if committed:
            etag = self._call("stat", path, lambda: blob.get_blob_properties().etag)
            self._call(
                "drop staged blocks of",
                path,
                lambda: blob.commit_block_list([BlobBlock(b.id) for b in committed], etag=etag),
            )
            return
        try:
            self._call("drop staged blocks of", path, blob.delete_blob)
        except NotFound:
            pass

    def _list_uploads(self, path: str) -> list[PendingUpload]:
        """Uploads staged at blobs never committed (a committed blob's staged blocks are not
        listed: Azure drops them at its next commit, or after a week)."""
        container = self._blobs.get_container_client(self.container)
        prefix = self._name(path)
        prefix = f"{prefix}/" if prefix else ""

        def listing(include: list[str] | None) -> dict[str, Any]:
            found = container.list_blobs(name_starts_with=prefix or None, include=include)
            return {b.name: b for b in found}

        every = self._call("list uploads under", path, lambda: listing(["uncommittedblobs"]))
        visible = self._call("list", path, lambda: listing(None))
        out: list[PendingUpload] = []
        for name in sorted(set(every) - set(visible)):
            client = container.get_blob_client(name)
            try:
                _, uncommitted = client.get_block_list("uncommitted")
            except Exception:
                continue  # committed or dropped meanwhile
            staged, dead, _ = blocks.uploads_of([b.id for b in uncommitted])
            created = every[name].creation_time or every[name].last_modified
            rel = self._rel(f"{self.container}/{name}")
            out += [
                PendingUpload(rel, u, created.timestamp() if created else 0.0)
                for u in sorted(staged - dead)
            ]
        return sorted(out, key=lambda u: (u.initiated, u.path))


def _code(e: BaseException) -> str:
    """The Azure error code behind a store error ("" if none)."""
    code = getattr(e.__cause__, "error_code", None)
    return str(getattr(code, "value", code) or "")


def _own_staged(upload_id: str, ids: list[str]) -> list[str] | None:
    """The staged (non-empty) block ids of an upload's part list, in order; None if one is
    not this upload's."""
    out = []
    for b in ids:
        p = blocks.parse(b)
        if p is None or p.upload_id != upload_id or p.flag == blocks.TOMBSTONE:
            return None
        if p.flag == blocks.STAGED:
            out.append(b)
    return out


def _rebuild(url: str, storage_options: dict[str, Any]) -> AzureStore:
    return AzureStore(url, **storage_options)
