"""The write parameters, declared once: name, default, type, doc and the faces that take them.

A face is a public way to write (`dataferry.write_dataset`, `dataferry.dask.to_parquet`, the
Ray and Daft sinks, the `write_deltalake` forms, ...). Each keeps an explicit signature (IDEs
and `inspect.signature` read it); `write_params(face)` adds the declared documentation of the
shared parameters it takes to its docstring, and tests/dataset/test_write_params.py checks
its signature against `PARAMS` (names, defaults, types) and `FACES` (its own parameters), so
the faces cannot drift apart. Two vocabularies are declared: dataferry's (a data set written
through any committer) and deltalake's (the `write_deltalake` forms), where `mode`,
`partition_by` and `storage_options` mean what deltalake means by them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from .docstrings import add_parameters, indent

T = TypeVar("T")

REQUIRED = inspect.Parameter.empty  # the default of a parameter without one

# the faces of each vocabulary
DATASET_FACES = frozenset(
    {"write_dataset", "dask.write_dataset", "ray.CommitDatasink", "daft.CommitSink"}
)
DELTA_FACES = frozenset(
    {"write_deltalake", "dask.write_deltalake", "ray.DeltaDatasink", "daft.write_deltalake"}
)

# Each face's own parameters (engine-specific, or another library's name for something),
# documented by hand in the face. Every other parameter of a face must be declared in PARAMS.
FACES: dict[str, tuple[str, ...]] = {
    "write_dataset": ("data", "tasks", "engine", "schema", "index", "preserve_index"),
    "dask.write_dataset": ("ddf", "write_index", "schema", "client", "window"),
    "dask.to_parquet": (
        *("df", "path", "compression", "write_index", "append", "overwrite"),
        *("ignore_divisions", "partition_on", "custom_metadata", "write_metadata_file"),
        *("compute", "compute_kwargs", "schema", "name_function", "engine", "kwargs"),
    ),
    "dask.write_deltalake": ("ddf", "write_index", "schema", "compute_kwargs", "options"),
    "ray.CommitDatasink": ("self", "path", "min_rows_per_write"),
    "ray.DeltaDatasink": (
        *("self", "table_uri", "partition_cols", "min_rows_per_write", "writer_options"),
    ),
    "daft.write_dataset": ("df", "options"),
    "daft.CommitSink": ("self", "schema"),
    "daft.write_deltalake": ("df", "options"),
    "write_deltalake": ("data", "engine", "options"),
}


@dataclass(frozen=True)
class Param:
    """One shared write parameter.

    type: its annotation as the faces spell it (they use ``from __future__ import
        annotations``, so the signature holds this text).
    faces: the faces that take it.
    var_keyword: it is a face's ``**name``.
    """

    name: str
    default: Any
    type: str
    doc: str
    faces: frozenset[str]
    var_keyword: bool = False

    def render(self) -> str:
        """Its numpydoc entry."""
        head = f"**{self.name}" if self.var_keyword else f"{self.name} : {self.type}"
        if self.default is not REQUIRED and not self.var_keyword:
            head += f", default {self.default!r}"
        return head + "\n" + indent(self.doc)


def _p(
    name: str,
    default: Any,
    type: str,
    doc: str,
    faces: frozenset[str] | set[str],
    *,
    var_keyword: bool = False,
) -> Param:
    return Param(name, default, type, " ".join(doc.split()), frozenset(faces), var_keyword)


_ALL = DATASET_FACES
_SIZES = DATASET_FACES  # every data-set face cuts files by the same sizes
_RUN = {"write_dataset", "dask.write_dataset"}  # the faces run by dataferry's own driver
_DEST = {"write_dataset", "dask.write_dataset", "daft.write_dataset", "daft.CommitSink"}
_TOP = _ALL | {"daft.write_dataset"}  # the faces that take the main choices by name
_STORE = _ALL | {"dask.to_parquet"}  # the faces that take the committer's options
_DELTA_EXTRA = DELTA_FACES - {"dask.write_deltalake"}  # Dask's takes these as keywords

PARAMS: tuple[Param, ...] = (
    # --- dataferry's vocabulary: a data set (or a table) through any committer --------------
    _p(
        "dest",
        REQUIRED,
        "str | os.PathLike[str] | Store",
        """A path or URL (``s3://``, ``gs://``, ``abfs://``, ``hdfs://``, ``memory://``,
        ``file://``), a path inside ``filesystem``, or an open dataferry Store. Tasks that
        run elsewhere (Dask, Ray or Daft workers) must reach it.""",
        _DEST,
    ),
    _p(
        "partition_by",
        None,
        "Sequence[str] | None",
        """Columns to partition by, as Hive directories ``col=value/``. Each face also
        takes the other libraries' names for them (pyarrow's ``partitioning``, Dask's
        ``partition_on``, Ray's and Daft's ``partition_cols``); give one of them.""",
        _TOP,
    ),
    _p(
        "partitioning",
        None,
        "Sequence[str] | None",
        "pyarrow's name for ``partition_by``.",
        {"write_dataset", "dask.write_dataset", "daft.CommitSink"},
    ),
    _p(
        "partition_cols",
        None,
        "Sequence[str] | None",
        "Ray's and Daft's name for ``partition_by``.",
        {"ray.CommitDatasink", "daft.CommitSink"},
    ),
    _p(
        "format",
        "parquet",
        "str",
        "``parquet`` (default), ``csv`` or ``json`` (newline-delimited).",
        _TOP,
    ),
    _p(
        "committer",
        "auto",
        "str",
        """The commit protocol (``v1``, ``v2``, ``manifest``, ``magic``, ``directory``,
        ``partitioned``, ``hive``, ``direct``; a table: ``delta``, ``iceberg``, ``hudi``, see
        docs/tables.md), or ``auto`` to choose from the store.""",
        _TOP | {"dask.to_parquet"},
    ),
    _p(
        "mode",
        None,
        "str | None",
        """``error`` (None, the default: refuse a non-empty destination), ``append``,
        ``overwrite`` (everything visible) or ``overwrite-partitions`` (each partition the
        job writes into, the others kept); with ``committer="hive"``, ``overwrite``
        replaces the partitions written and ``overwrite-table`` the table.""",
        _TOP,
    ),
    _p(
        "existing_data_behavior",
        None,
        "str | None",
        """pyarrow's name for the mode: ``error``, ``overwrite_or_ignore`` (append) or
        ``delete_matching`` (overwrite-partitions, as pyarrow: the partitions written).""",
        {"write_dataset", "dask.write_dataset", "daft.CommitSink"},
    ),
    _p(
        "filesystem",
        None,
        "Any",
        """An fsspec ``AbstractFileSystem`` or a ``pyarrow.fs.FileSystem`` to write through
        (pickled into the tasks that run elsewhere).""",
        _STORE,
    ),
    _p(
        "storage_options",
        None,
        "dict[str, Any] | None",
        """Options of the file system, as fsspec and Dask take them (for ``s3://``: ``key``,
        ``secret``, ``endpoint_url``, ``client_kwargs``, ...).""",
        _STORE | {"daft.write_dataset"},
    ),
    _p(
        "format_options",
        None,
        "dict[str, Any] | None",
        """Options of the format's writer (Parquet: pyarrow's ParquetWriter keywords). They
        may also be given as keywords: ``compression="zstd"``, ``row_group_size=...``.
        Parquet's ``compression`` is ``"snappy"`` unless given (pyarrow's default; polars
        writes zstd), and ``compression_level`` the codec's own default in Arrow unless
        given (zstd: 1; polars and DuckDB write zstd at 3).""",
        _ALL,
    ),
    _p(
        "max_rows_per_file",
        None,
        "int | None",
        """Roll to a new file after this many rows (default: no limit), per task, as in
        ``pyarrow.dataset.write_dataset``.""",
        _SIZES,
    ),
    _p(
        "min_rows_per_group",
        None,
        "int | None",
        """Buffer a partition's rows until a row group has this many (default 0: write each
        piece as it comes), as in ``pyarrow.dataset.write_dataset``.""",
        _SIZES,
    ),
    _p(
        "max_rows_per_group",
        None,
        "int | None",
        """The largest row group (Parquet's ``row_group_size``; default pyarrow's, 1Mi
        rows), as in ``pyarrow.dataset.write_dataset``.""",
        _SIZES,
    ),
    _p(
        "max_open_files",
        None,
        "int | None",
        """Files a task keeps open at once (default 1024); the least recently written one
        is closed when a new one would pass it, as in ``pyarrow.dataset.write_dataset``.""",
        _SIZES,
    ),
    _p(
        "basename_template",
        None,
        "str | None",
        """File names, with ``{i}`` replaced by a number unique in the job (default: Spark's
        ``part-<task>-<job uuid>.c<NNN>.<ext>``, unique across jobs too).""",
        _SIZES,
    ),
    _p(
        "target_file_size",
        None,
        "int | None",
        """Bytes after which a file is closed and a new one begun (default 128 MiB), and the
        size in-memory data is planned for.""",
        _SIZES,
    ),
    _p(
        "max_memory",
        None,
        "int | None",
        """Bytes of a streamed input held in memory at once (default 256 MiB); retries read
        the rows again from the local spill.""",
        {"write_dataset"},
    ),
    _p(
        "committer_options",
        None,
        "dict[str, Any] | None",
        "Options of the committer (see ``dataferry.make_committer``).",
        _STORE,
    ),
    _p(
        "allow_unsafe_rename",
        False,
        "bool",
        "Let a rename-based committer run on a store whose rename is not atomic.",
        _STORE,
    ),
    _p(
        "schema_mode",
        None,
        "str | None",
        """For a write that keeps a plain data set's files (``append``,
        ``overwrite-partitions``): None (default) refuses data whose partition columns,
        columns or column types differ from the data set's, naming the column; ``"merge"``
        also takes new and missing columns (types must still match). With a table's
        committer, the committer's own ``schema_mode`` (Delta: deltalake's).""",
        {"write_dataset", "daft.CommitSink"},
    ),
    _p(
        "max_attempts",
        4,
        "int",
        "Attempts per task before the job fails (Spark's ``spark.task.maxFailures``).",
        {"dask.write_dataset"},
    ),
    _p(
        "speculation",
        False,
        "bool",
        "Launch duplicates of slow tasks (``spark.speculation``).",
        {"dask.write_dataset"},
    ),
    _p(
        "on_event",
        None,
        "EventHook | None",
        "A hook for progress and tests, called as ``on_event(event, task, attempt)``.",
        _RUN,
    ),
    _p(
        "before_job_commit",
        None,
        "Callable[[Any], None] | None",
        "A call with the job just before its commit (tests, progress).",
        _RUN | {"daft.CommitSink"},
    ),
    _p(
        "progress",
        True,
        "bool | Any",
        """A bar of the tasks committed, on stderr while the write runs, drawn only when
        stderr is a terminal (never in a pipe, a log or a notebook's captured output);
        False: none; a ``rich.console.Console``: on that console, when it is a terminal.""",
        {"write_dataset"},
    ),
    _p(
        "writer_options",
        REQUIRED,
        "Any",
        "The format writer's options given as keywords (see ``format_options``).",
        _ALL,
        var_keyword=True,
    ),
    # --- deltalake's vocabulary: the write_deltalake forms ---------------------------------
    _p(
        "table_or_uri",
        REQUIRED,
        "Any",
        "A path or URL (local or ``s3://``), or a ``deltalake.DeltaTable``.",
        DELTA_FACES - {"ray.DeltaDatasink"},
    ),
    _p(
        "partition_by",
        None,
        "str | Sequence[str] | None",
        """The table's partition columns when the job creates it; None takes an existing
        table's (as deltalake), others must be the table's (or replace them with
        ``schema_mode="overwrite"``).""",
        DELTA_FACES,
    ),
    _p(
        "mode",
        "error",
        "str",
        """``"error"`` (default: refuse a table that exists), ``"append"``, ``"overwrite"``
        (one transaction removing every live file, adding the job's), ``"ignore"`` (write
        nothing if the table exists).""",
        DELTA_FACES,
    ),
    _p(
        "storage_options",
        None,
        "dict[str, str] | None",
        """deltalake's (object_store's) options, for an ``s3://`` table also given to
        dataferry's store in s3fs's names.""",
        DELTA_FACES,
    ),
    _p("name", None, "str | None", "The table's name when the job creates it.", DELTA_FACES),
    _p(
        "description",
        None,
        "str | None",
        "The table's description when the job creates it.",
        DELTA_FACES,
    ),
    _p(
        "configuration",
        None,
        "dict[str, str | None] | None",
        "The table's configuration (``delta.*`` properties) when the job creates it.",
        DELTA_FACES,
    ),
    _p(
        "schema_mode",
        None,
        "str | None",
        """None (refuse data whose schema differs from the table's), ``"merge"`` (add new
        columns) or ``"overwrite"`` (with ``mode="overwrite"``: replace the schema).""",
        DELTA_FACES,
    ),
    _p(
        "committer_options",
        None,
        "dict[str, Any] | None",
        """Options of the ``delta`` committer (see ``dataferry.make_committer``), such as
        ``commit_retries``.""",
        DELTA_FACES - {"write_deltalake"},
    ),
    _p(
        "predicate",
        None,
        "str | None",
        """With ``mode="overwrite"``: replace only the rows it selects (deltalake's replace
        where), a conjunction of ``col = literal`` / ``col IN (...)`` on partition columns;
        every row written must match it.""",
        _DELTA_EXTRA,
    ),
    _p(
        "writer_properties",
        None,
        "Any",
        "deltalake's ``WriterProperties``: the Parquet writer's options.",
        _DELTA_EXTRA,
    ),
    _p(
        "commit_properties",
        None,
        "Any",
        """deltalake's ``CommitProperties``: custom metadata kept in the commit's
        ``commitInfo``, ``max_commit_retries``, application transactions kept beside the
        job's own.""",
        _DELTA_EXTRA,
    ),
    _p(
        "post_commithook_properties",
        None,
        "Any",
        "deltalake's ``PostCommitHookProperties``: the post-commit hooks (checkpoints, log "
        "cleanup).",
        _DELTA_EXTRA,
    ),
)


def params_of(face: str) -> dict[str, Param]:
    """The shared parameters `face` takes, by name."""
    return {p.name: p for p in PARAMS if face in p.faces}


# each face's docstring as written by hand, before `write_params` added the shared parameters
HAND_DOCS: dict[str, str] = {}


def write_params(face: str) -> Callable[[T], T]:
    """Add the declared documentation of the shared parameters `face`'s signature takes to
    its docstring (a function, or a class: its ``__init__``), in the signature's order among
    the parameters the face documents itself."""

    def decorate(obj: T) -> T:
        target = obj.__init__ if isinstance(obj, type) else obj  # type: ignore[misc]
        hand = inspect.cleandoc(obj.__doc__ or "")
        HAND_DOCS[face] = hand
        order = [n for n in inspect.signature(target).parameters if n != "self"]
        shared = params_of(face)
        entries = [shared[n].render() for n in order if n in shared]
        obj.__doc__ = add_parameters(hand, entries, order)
        return obj

    return decorate


__all__ = ["FACES", "PARAMS", "Param", "params_of", "write_params"]
