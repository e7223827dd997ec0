"""A store rooted at a directory of another store: every path is prefixed on the way in and
stripped on the way out. Lets a committer run unchanged inside a staging directory."""

from __future__ import annotations

from dataclasses import replace
from typing import BinaryIO

from . import paths
from .base import Store
from .types import FileStatus, PendingUpload
from .wrapping import WrappingStore


class SubStore(WrappingStore):
    def __init__(self, inner: Store, prefix: str) -> None:
        super().__init__(inner)
        self.prefix = paths.normalize(prefix)
        self.url = inner.full_url(self.prefix)

    def __reduce__(self):
        return (SubStore, (self.inner, self.prefix))

    def describe(self) -> str:
        return f"{self.inner.describe()} / {self.prefix}"

    def _in(self, path: str) -> str:
        return paths.join(self.prefix, path)

    def _out(self, st: FileStatus) -> FileStatus:
        return replace(st, path=paths.relative_to(st.path, self.prefix))

    def _stat(self, path: str) -> FileStatus:
        return self._out(self.inner.stat(self._in(path)))

    def _list(self, path: str) -> list[FileStatus]:
        return [self._out(s) for s in self.inner.list(self._in(path))]

    def _walk(self, path: str) -> list[FileStatus]:
        return [self._out(s) for s in self.inner.walk(self._in(path))]

    def _mkdirs(self, path: str) -> None:
        self.inner.mkdirs(self._in(path))

    def _delete(self, path: str, recursive: bool) -> bool:
        return self.inner.delete(self._in(path), recursive)

    def _rename(self, src: str, dst: str) -> None:
        self.inner.rename(self._in(src), self._in(dst))

    def _copy(self, src: str, dst: str) -> None:
        self.inner.copy(self._in(src), self._in(dst))

    def _read(self, path: str, max_bytes: int | None = None) -> bytes:
        return self.inner.read_bytes(self._in(path), max_bytes)

    def _write(self, path: str, data: bytes, overwrite: bool) -> None:
        self.inner.write_bytes(self._in(path), data, overwrite)

    def _create_if_absent(self, path: str, data: bytes) -> bool:
        return self.inner.create_if_absent(self._in(path), data)

    def _append(self, path: str, data: bytes) -> None:
        self.inner.append_bytes(self._in(path), data)

    def _write_at(self, path: str, offset: int, data: bytes) -> None:
        self.inner.write_at(self._in(path), offset, data)

    def _truncate(self, path: str, size: int) -> None:
        self.inner.truncate(self._in(path), size)

    def _read_range(self, path: str, start: int, length: int) -> bytes:
        return self.inner.read_range(self._in(path), start, length)

    def _initiate_upload(self, path: str) -> str:
        return self.inner.initiate_upload(self._in(path))

    def _upload_part(self, path: str, upload_id: str, number: int, data: bytes) -> str:
        return self.inner.upload_part(self._in(path), upload_id, number, data)

    def _complete_upload(self, path: str, upload_id: str, etags: list[str]) -> str:
        return self.inner.complete_upload(self._in(path), upload_id, etags)

    def _abort_upload(self, path: str, upload_id: str) -> bool:
        return self.inner.abort_upload(self._in(path), upload_id)

    def _upload_completed(self, path: str, upload_id: str, etags: list[str]) -> bool:
        return self.inner.upload_completed(self._in(path), upload_id, etags)

    def _list_uploads(self, path: str) -> list[PendingUpload]:
        return [
            replace(u, path=paths.relative_to(u.path, self.prefix))
            for u in self.inner.list_uploads(self._in(path))
        ]

    def open_write(self, path: str, overwrite: bool = True) -> BinaryIO:
        return self.inner.open_write(self._in(paths.normalize(path)), overwrite)

    def open_read(self, path: str) -> BinaryIO:
        return self.inner.open_read(self._in(paths.normalize(path)))

    def full_url(self, path: str = "") -> str:
        return self.inner.full_url(self._in(path))

    def relative_path(self, url: str) -> str:
        return paths.relative_to(self.inner.relative_path(url), self.prefix)
