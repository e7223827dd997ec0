"""`WrappingStore`: a store stacked on another store (latency models, fault injection,
counting), forwarding every primitive to the inner store's public operation."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from .base import Store
from .types import Capabilities, FileStatus, PendingUpload

T = TypeVar("T")


class WrappingStore(Store):
    """A store that forwards every primitive to an inner store's public operation.

    Subclasses override `_op` (to add latency, faults, ...) or single primitives.
    """

    def __init__(self, inner: Store, capabilities: Capabilities | None = None) -> None:
        super().__init__(inner.url, capabilities or inner.capabilities)
        self.inner = inner

    def describe(self) -> str:
        return self.inner.describe()

    @property
    def min_part_size(self) -> int:
        return self.inner.min_part_size

    def _stat(self, path: str) -> FileStatus:
        return self.inner.stat(path)

    def _list(self, path: str) -> list[FileStatus]:
        return self.inner.list(path)

    def _walk(self, path: str) -> list[FileStatus]:
        return self.inner.walk(path)

    def _mkdirs(self, path: str) -> None:
        self.inner.mkdirs(path)

    def _delete(self, path: str, recursive: bool) -> bool:
        return self.inner.delete(path, recursive)

    def _rename(self, src: str, dst: str) -> None:
        self.inner.rename(src, dst)

    def _copy(self, src: str, dst: str) -> None:
        self.inner.copy(src, dst)

    def _read(self, path: str, max_bytes: int | None = None) -> bytes:
        return self.inner.read_bytes(path, max_bytes)

    def _write(self, path: str, data: bytes, overwrite: bool) -> None:
        self.inner.write_bytes(path, data, overwrite)

    def _create_if_absent(self, path: str, data: bytes) -> bool:
        return self.inner.create_if_absent(path, data)

    def _append(self, path: str, data: bytes) -> None:
        self.inner.append_bytes(path, data)

    def _write_at(self, path: str, offset: int, data: bytes) -> None:
        self.inner.write_at(path, offset, data)

    def _truncate(self, path: str, size: int) -> None:
        self.inner.truncate(path, size)

    def _read_range(self, path: str, start: int, length: int) -> bytes:
        return self.inner.read_range(path, start, length)

    def _external_commit(self, path: str, fn: Callable[[], T]) -> T:
        return self.inner.external_commit(path, fn)

    def _initiate_upload(self, path: str) -> str:
        return self.inner.initiate_upload(path)

    def _upload_part(self, path: str, upload_id: str, number: int, data: bytes) -> str:
        return self.inner.upload_part(path, upload_id, number, data)

    def _complete_upload(self, path: str, upload_id: str, etags: list[str]) -> str:
        return self.inner.complete_upload(path, upload_id, etags)

    def _abort_upload(self, path: str, upload_id: str) -> bool:
        return self.inner.abort_upload(path, upload_id)

    def _list_uploads(self, path: str) -> list[PendingUpload]:
        return self.inner.list_uploads(path)

    @property
    def lists_uploads(self) -> bool:
        return self.inner.lists_uploads

    def _upload_completed(self, path: str, upload_id: str, etags: list[str]) -> bool:
        return self.inner.upload_completed(path, upload_id, etags)
