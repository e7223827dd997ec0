"""Write markers: a record, made before a data file is written, that the file is being written.

With markers a job can find every file its attempts created without listing the table: to
delete partial files and speculative duplicates before commit, and to roll back a failed job.
Names follow Hudi: `<partition>/<data file>.marker.<CREATE|MERGE|APPEND>`.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from enum import StrEnum

from ..errors import DataferryError
from ..store import paths

MARKER_EXTN = ".marker"
MARKERS_ROOT = "_dataferry/markers"
# every directory under which a committer keeps its jobs' marker directories: the direct
# committer's, the Delta and Iceberg committers' (in the table's hidden `_dataferry`), and
# Hudi's own `.hoodie/.temp/<instant>`; the marker service writes nowhere else
MARKER_ROOTS = (
    MARKERS_ROOT,
    "_dataferry/delta-markers",
    "_dataferry/iceberg-markers",
    ".hoodie/.temp",
)


class IOType(StrEnum):
    CREATE = "CREATE"
    MERGE = "MERGE"
    APPEND = "APPEND"


class BadMarker(DataferryError, ValueError):
    """A marker name that no writer makes: refused by the service, reported by a job commit."""


# <segment>/.../<data file>.marker.<TYPE>, as a whole string: no trailing newline, no control
# characters, no backslash, no empty, "." or ".." segment
_MARKER = re.compile(r"(?P<path>[^\x00-\x1f\x7f\\]+)\.marker\.(?P<type>[A-Z]+)")
MAX_MARKER_BYTES = 4096


def check_marker_name(name: object) -> str:
    """`name` if it is a marker name a writer could have made, else BadMarker saying why.

    The data file must be a visible file (not `.x` or `_x`: those are the commit's own files,
    such as `_SUCCESS`), and the type one of the known ones."""
    if not isinstance(name, str):
        raise BadMarker(f"a marker name must be a string, not {type(name).__name__}")
    m = _MARKER.fullmatch(name)
    if m is None or len(name.encode("utf-8", "surrogatepass")) > MAX_MARKER_BYTES:
        raise BadMarker(f"not a marker name: {name[:200]!r}")
    if m["type"] not in IOType.__members__:
        raise BadMarker(f"unknown marker type {m['type']!r} in {name[:200]!r}")
    segments = m["path"].split("/")
    if any(s in ("", ".", "..") for s in segments):
        raise BadMarker(f"marker name with an empty, '.' or '..' part: {name[:200]!r}")
    if segments[-1][0] in "._":
        raise BadMarker(f"marker for a hidden or reserved file: {name[:200]!r}")
    return name


def marker_name(partition: str, file_name: str, io_type: IOType = IOType.CREATE) -> str:
    name = f"{file_name}{MARKER_EXTN}.{IOType(io_type).value}"
    return paths.join(partition, name) if partition else name


def data_path(marker: str) -> str:
    """The data file a marker stands for (relative to the table); BadMarker if not a marker."""
    check_marker_name(marker)
    return marker[: marker.rindex(MARKER_EXTN + ".")]


def io_type_of(marker: str) -> IOType:
    check_marker_name(marker)
    return IOType(marker.rsplit(".", 1)[-1])


def marker_dir(job_uuid: str) -> str:
    return f"{MARKERS_ROOT}/{job_uuid}"


class WriteMarkers(ABC):
    """The markers of one job (one marker directory)."""

    directory: str
    batches = False  # True where create_many costs fewer requests than one create per marker

    @abstractmethod
    def create(self, partition: str, file_name: str, io_type: IOType = IOType.CREATE) -> bool:
        """Record a marker; True if it was new, False if it already existed."""

    def create_if_absent(
        self, partition: str, file_name: str, io_type: IOType = IOType.CREATE
    ) -> bool:
        return self.create(partition, file_name, io_type)

    def create_many(
        self, files: Sequence[tuple[str, str]], io_type: IOType = IOType.CREATE
    ) -> list[bool]:
        """Markers for several (partition, file name) at once, for a task that knows the files
        it is about to write: kinds that can do it in fewer requests override this."""
        return [self.create(partition, name, io_type) for partition, name in files]

    @abstractmethod
    def all(self) -> set[str]:
        """Every marker name of the job."""

    @abstractmethod
    def delete_all(self) -> None:
        """Remove the job's markers (after commit or rollback)."""

    def data_paths(self, include_append: bool = False) -> set[str]:
        """Data files the markers stand for (CREATE and MERGE; APPEND ones on request)."""
        return {
            data_path(m) for m in self.all() if include_append or io_type_of(m) != IOType.APPEND
        }
