"""The write stream of stores that publish a file whole: bytes are buffered and become the
file, all at once, when the stream closes (as an object store's PUT does).

The stream knows nothing of stores: it is handed the one call that publishes its bytes, so it
sits below the store base rather than beside it."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any


class WriteOnClose(io.BytesIO):
    """Buffer writes and hand the whole file to `publish` on close, as object stores do."""

    def __init__(self, publish: Callable[[bytes], object]) -> None:
        super().__init__()
        self._publish = publish
        self._published = False

    def close(self) -> None:
        if not self._published and not self.closed:
            self._published = True
            self._publish(self.getvalue())
        super().close()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:  # a failed writer publishes nothing
            self._published = True
        self.close()
