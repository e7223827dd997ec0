"""The write stream of stores that publish a file whole: bytes are buffered and become the
file, all at once, when the stream closes (as an object store's PUT does)."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import Store


class WriteOnClose(io.BytesIO):
    """Buffer writes and publish the whole file on close, as object stores do."""

    def __init__(self, store: Store, path: str, overwrite: bool) -> None:
        super().__init__()
        self._store, self._path, self._overwrite = store, path, overwrite
        self._published = False

    def close(self) -> None:
        if not self._published and not self.closed:
            self._published = True
            self._store.write_bytes(self._path, self.getvalue(), self._overwrite)
        super().close()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:  # a failed writer publishes nothing
            self._published = True
        self.close()
