"""The referee on table committers (registry rows with `family="table"`): the reference job
writes small real Parquet files, and every check reads the destination through the table
format's own reader, never by listing files.

A table version is seen as the reference job's files would be: the rows the format's reader
returns (`TableCommitter.read_rows`) are grouped by (partition, job, task, file, attempt) into
one "virtual" reference file each, under the name and with the bytes the file committers'
reference job writes (`reference.file_path`, `reference.file_bytes`). A file whose rows are
not exactly its lines once each (a transaction applied twice, a file half there) gets bytes
no attempt writes, so the file checks of `invariants.py` (exclusive and complete output, the
earlier data kept, the write modes, nothing of a failed job) hold for tables unchanged. A
committed table version stands for `_SUCCESS`. A table the reader cannot read (its log names
a data file that is gone) is a corrupt file of its own.

No orphan: every `.parquet` file in the table's storage outside hidden directories must be a
data file some version of the table references (`TableCommitter.referenced_files`: the current
version's, and what an overwrite removed that earlier versions keep for time travel); checked
with the leftovers, after every job and recovery.

Which committer reads the destination is process-wide (`reading`), set by `verify_crash` and
in its worker processes; nothing here knows a format by name: a table committer joins by its
registry row and its two hooks.
"""

from __future__ import annotations

import functools
import io
from collections import defaultdict
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..store import Store, paths
from .job_files import file_bytes, job_tag
from .zoo_files import IDENTITY, VALUES_DIFFER, differences, reference_rows

PARTITION_COLUMN = "part"
_ACTIVE: tuple[str, dict[str, Any]] | None = None
_CACHE: dict[tuple[str, tuple], TableView] = {}


def is_table(committer: str) -> bool:
    """Whether `committer` is of the table family (by its registry row)."""
    from ..commit.registry import spec

    s = spec(committer)
    return s is not None and s.family == "table"


def writes_tables(committer: Any) -> bool:
    """Whether a committer instance commits into a table (it has the table readers' hooks)."""
    return callable(getattr(committer, "read_rows", None)) and callable(
        getattr(committer, "referenced_files", None)
    )


def reading(committer: str | None, options: dict[str, Any] | None = None) -> None:
    """From now on, in this process, destinations are read as `committer`'s tables if it is
    a table committer (else as directories of files, the default)."""
    global _ACTIVE
    _ACTIVE = (committer, dict(options or {})) if committer and is_table(committer) else None
    _CACHE.clear()


def active() -> tuple[str, dict[str, Any]] | None:
    return _ACTIVE


@contextmanager
def read_as(committer: str | None, options: dict[str, Any] | None = None) -> Iterator[None]:
    """Within the block, destinations are read as `committer`'s tables (`reading`); after
    it, as they were read before it (a switch left set made the next test's plain
    destinations look like empty tables)."""
    was = _ACTIVE
    reading(committer, options)
    try:
        yield
    finally:
        reading(*was) if was else reading(None)


# --- the reference job's files -------------------------------------------------------------


def table_file_name(task: int, file: int, attempt: int, tag: str, partitions: int) -> str:
    suffix = f"-j{tag}" if tag else ""
    return f"{PARTITION_COLUMN}=p{file % partitions}/t{task}-f{file}-a{attempt}{suffix}.parquet"


def table_file_bytes(
    task: int,
    file: int,
    attempt: int,
    job_uuid: str,
    partition: str,
    keep_partition: bool,
    convert: Callable[[pa.Table], pa.Table] | None = None,
) -> bytes:
    """A small Parquet file: one row per line of the reference file (1 + file of them), each
    with the type zoo's columns (`zoo_files.reference_rows`); `convert`: the committer's own
    conversion of a file's rows to the format's types (`file_columns`), as a user's write
    through `write_dataset` has it."""
    import pyarrow.parquet as pq

    rows = reference_rows(task, file, attempt, job_uuid, partition if keep_partition else None)
    if convert is not None:
        rows = convert(rows)
    buf = io.BytesIO()
    pq.write_table(rows, buf)
    return buf.getvalue()


def parse_table_file(data: bytes) -> tuple[int, int, int, str] | None:
    """(task, file, attempt, job) of a reference table file's bytes (`table_file_bytes`), if
    they are one, whole: 1 + file rows, its lines in order; None for anything else."""
    if not data.startswith(b"PAR1"):
        return None
    import pyarrow.parquet as pq

    try:
        t = pq.read_table(pa.BufferReader(data), columns=["job", "task", "file", "attempt", "line"])
    except Exception:
        return None
    rows = t.to_pylist()
    if not rows:
        return None
    first = rows[0]
    key = (first["task"], first["file"], first["attempt"], first["job"])
    same = all((r["task"], r["file"], r["attempt"], r["job"]) == key for r in rows)
    if not same or [r["line"] for r in rows] != list(range(1 + first["file"])):
        return None
    return key


def write_table_file(
    out: Any, task: int, file: int, tag: str, partitions: int, committer: Any
) -> None:
    """Write one reference file of a table job through the committer (`out.write`), its rows
    converted by the committer's `file_columns` (the format's type policy, Hudi's meta
    columns) as the dataset writer converts a user's rows."""
    attempt = out.attempt_number
    name = table_file_name(task, file, attempt, tag, partitions)
    keep = bool(getattr(committer, "keeps_partition_columns", False))
    schema = reference_rows(task, file, attempt, out.job_uuid, "p0" if keep else None).schema
    extra = committer.file_columns(out.ctx, name, schema)
    convert = None if extra is None else functools.partial(_first_rows, extra.prepend)
    out.write(
        name,
        table_file_bytes(task, file, attempt, out.job_uuid, f"p{file % partitions}", keep, convert),
    )


def _first_rows(prepend: Callable[[pa.Table, int], pa.Table], rows: pa.Table) -> pa.Table:
    return prepend(rows, 0)


# --- the reader's view of a destination ----------------------------------------------------


@dataclass
class TableView:
    """What the format's reader sees: the reference files its rows make up, whether a
    version exists, and the data files the version references."""

    files: dict[str, bytes] = field(default_factory=dict)
    exists: bool = False
    referenced: set[str] = field(default_factory=set)


def view(store: Store) -> TableView | None:
    """The table view of `store` (None where destinations are read as files)."""
    if _ACTIVE is None:
        return None
    try:
        listing = tuple(sorted((s.path, s.size) for s in store.walk("")))
    except FileNotFoundError:
        listing = ()
    key = (store.full_url(), listing)
    found = _CACHE.get(key)
    if found is None:
        if len(_CACHE) > 16:
            _CACHE.clear()
        found = _CACHE[key] = read_view(store, *_ACTIVE)
    return found


def read_view(store: Store, committer: str, options: dict[str, Any]) -> TableView:
    from ..commit.factory import make_committer

    reader = make_committer(committer, store, allow_unsafe_rename=True, **options)
    out = TableView()
    try:
        out.referenced = {paths.normalize(p) for p in reader.referenced_files()}
    except Exception as e:
        out.files[f"<the table's files cannot be listed: {type(e).__name__}: {e}>"] = b""
        out.exists = True
        return out
    try:
        rows = reader.read_rows()
    except Exception as e:
        missing = sorted(p for p in out.referenced if not store.exists(p))
        detail = (
            f"{len(missing)} referenced data files missing, e.g. {missing[0]}" if missing else ""
        )
        out.files[f"<the table cannot be read: {type(e).__name__}: {detail or e}>"] = b""
        out.exists = True
        return out
    if rows is None:
        return out
    out.exists = True
    groups: dict[tuple, list[tuple[int, int]]] = defaultdict(list)  # (line, row) of each file
    for i, r in enumerate(rows.select([PARTITION_COLUMN, *IDENTITY]).to_pylist()):
        key = (r[PARTITION_COLUMN], r["job"], r["task"], r["file"], r["attempt"])
        groups[key].append((r["line"], i))
    made = getattr(reader, "commits_of_job", None)  # optional hook: a job's versions
    for job in sorted({k[1] for k in groups}) if callable(made) else ():
        n = made(job)
        if n > 1:
            out.files[f"<job {job}'s transaction made {n} table versions>"] = b""
    for (part, job, task, file, attempt), found in groups.items():
        path = f"{PARTITION_COLUMN}={part}/t{task}-f{file}-a{attempt}-j{job_tag(job)}.dat"
        lines = [line for line, _ in found]
        if sorted(lines) == list(range(file + 1)):
            data = file_bytes(task, file, attempt, job)
            wrong = differences(rows.take([i for _, i in sorted(found)]), task, file)
            if wrong:  # every row there, but not the values the attempt wrote
                data += f"{VALUES_DIFFER}{wrong}\n".encode()
        else:  # not what any attempt wrote: duplicated or missing rows
            data = f"task={task} file={file} attempt={attempt} job={job} lines={sorted(lines)}\n"
            data = data.encode()
        out.files[path] = data
    return out


def orphans(store: Store, table: TableView, skip: Collection[str] = ()) -> list[str]:
    """Data files (`.parquet` outside hidden directories) no version of the table
    references."""
    try:
        listed = [s.path for s in store.walk("")]
    except FileNotFoundError:
        return []
    return sorted(
        p
        for p in listed
        if p.endswith(".parquet")
        and not paths.is_hidden(p)
        and paths.normalize(p) not in table.referenced
        and p not in skip
    )
