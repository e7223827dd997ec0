"""The exception tree. Every error names the path, field or value at fault.

`InjectedCrash` derives from BaseException on purpose: it models the process dying, so an
ordinary `except Exception` in committer or engine code cannot swallow it.
"""

from __future__ import annotations


class DataferryError(Exception):
    """Base of every error dataferry raises on purpose."""


class ConfigError(DataferryError, ValueError):
    """An unknown name or an option value out of range."""


# --- storage -------------------------------------------------------------------------------


class StoreError(DataferryError, OSError):
    """A store operation failed. `path` is the store-relative path at fault."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path

    def __str__(self) -> str:  # OSError's own __str__ would print errno tuples
        return self.args[0] if self.args else ""


class NotFound(StoreError, FileNotFoundError):
    pass


class AlreadyExists(StoreError, FileExistsError):
    pass


class PreconditionFailed(StoreError):
    """A conditional request named a version of an object that is not there any more (it
    changed, or is gone): S3's 412 to If-Match / x-amz-copy-source-if-match, and moto's 404 to
    the same request on an absent key."""


class NotADirectory(StoreError, NotADirectoryError):
    pass


class IsADirectory(StoreError, IsADirectoryError):
    pass


class AccessDenied(StoreError, PermissionError):
    pass


class LinkRefused(StoreError):
    """A path below a store's root goes through a symbolic link, which stores never follow (so
    nothing outside the store is read, written, moved or deleted). `path` is the link's
    store-relative path; the message names its full URL."""


class RecordTooLarge(StoreError):
    """A file is larger than the cap its reader set (`read_bytes(path, max_bytes=...)`)."""

    def __init__(self, message: str, path: str = "", size: int = 0, max_bytes: int = 0) -> None:
        super().__init__(message, path)
        self.size = size
        self.max_bytes = max_bytes


class AmbiguousOutcome(StoreError):
    """The request may or may not have taken effect (timeout, connection reset)."""


class Throttled(StoreError):
    """The store refused the request for now (HTTP 503 Slow Down and the like)."""


class InjectedFault(StoreError):
    """A failure injected on purpose by the fault-injection store."""


class InjectedCrash(BaseException):
    """The process "died" at an injected crash point. Not an Exception on purpose."""

    def __init__(self, message: str, index: int = -1) -> None:
        super().__init__(message)
        self.index = index


# --- commit ----------------------------------------------------------------------------------


class CommitError(DataferryError):
    """A commit protocol step failed or was called out of order."""


class DestinationError(CommitError):
    """The destination cannot be written: it is a file, is not writable, or is not empty."""


class TableDamaged(DestinationError):
    """A table's own metadata (a log entry, a checkpoint, a properties file) cannot be read
    whole: nothing is written on top of it. `path` is the damaged file, store-relative."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class TaskCommitError(CommitError):
    pass


class JobCommitError(CommitError):
    pass


class CommitUndone(JobCommitError):
    """A decided commit that its committer took back, having changed nothing a reader sees
    (its intent record is gone): the job is undecided again, and its abort rolls it back."""


class TableCommitConflict(CommitUndone):
    """A table transaction another writer's commit makes invalid (an overwrite racing an
    append, by the format's rules): nothing of the job is committed."""


class TableCommitRefused(CommitUndone):
    """A table transaction the table or its catalog refuses for good (a schema it cannot
    take, a file it cannot place) before any of it is in the table: nothing of the job is
    committed, and the job is rolled back rather than left to be finished."""


class ClaimLost(JobCommitError):
    """The job no longer holds its destination's claim (another job took it over, judging this
    one dead): it must stop before it changes anything more that readers see."""


class ValidationError(CommitError, ValueError):
    """A commit record (manifest, _SUCCESS, pending set) failed validation."""

    def __init__(self, message: str, source: str = "", field: str = "") -> None:
        where = source + (f" field {field!r}" if field else "")
        super().__init__(f"{where}: {message}" if where else message)
        self.source = source
        self.field = field


class ShuffleError(DataferryError):
    """A shuffle could not be written, merged or read."""


class CorruptShuffleData(ShuffleError):
    """A shuffle block or index failed its checks (magic, length, order or checksum)."""


class ShuffleServiceUnavailable(ShuffleError, ConnectionError):
    """A shuffle service could not be reached or dropped the connection."""


class EngineError(DataferryError):
    """A job could not be run to completion by an engine."""


class TaskFailed(EngineError):
    """A task used up its attempts; `causes` holds each attempt's error text."""

    def __init__(self, message: str, causes: list[str] | None = None) -> None:
        super().__init__(message)
        self.causes = causes or []


class DestinationClaimed(DestinationError):
    """Another live job holds the destination's claim (its commit is in progress)."""
