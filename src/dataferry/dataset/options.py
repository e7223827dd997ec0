"""The options of a write, in the names pyarrow and Dask users already know.

`WriteOptions` holds how files are cut (rows per file and per row group, a target size, open
files), how they are named (`basename_template`), how much input may be in memory at once, and
the file format's own options (Parquet writer options are passed through to pyarrow). Every
value is checked here, once, on the driver, with an error that names the option at fault.
"""

from __future__ import annotations

import difflib
import functools
import inspect
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..errors import ConfigError

MiB = 1 << 20
DEFAULT_TARGET_FILE_SIZE = 128 * MiB
DEFAULT_MAX_MEMORY = 256 * MiB
DEFAULT_MAX_ROWS_PER_GROUP = 1 << 20  # pyarrow's default
DEFAULT_MAX_OPEN_FILES = 1024  # pyarrow's default

# pyarrow's `existing_data_behavior` names for dataferry's write modes
EXISTING_DATA_BEHAVIOR = {
    "error": "error",
    "overwrite_or_ignore": "append",
    "delete_matching": "overwrite-partitions",
}
MODES = ("error", "append", "overwrite", "overwrite-partitions", "overwrite-table")


@functools.cache  # asked on every write (and by the typo check): pyarrow's signature is fixed
def _parquet_option_names() -> frozenset[str]:
    """The keyword arguments pyarrow's ParquetWriter takes (this pyarrow's, not a copy)."""
    import pyarrow.parquet as pq

    names = set(inspect.signature(pq.ParquetWriter.__init__).parameters)
    names -= {"self", "where", "schema", "filesystem", "options"}
    return frozenset(names | {"data_page_size"})


@functools.cache
def _csv_option_names() -> frozenset[str]:
    import pyarrow.csv as pacsv

    return frozenset(
        n
        for n in dir(pacsv.WriteOptions)
        if not n.startswith("_") and not callable(getattr(pacsv.WriteOptions, n))
    )


FORMAT_OPTION_NAMES = {
    "parquet": _parquet_option_names,
    "csv": _csv_option_names,
    "json": lambda: frozenset(),
}


@dataclass(frozen=True)
class WriteOptions:
    """How a write cuts, names and encodes its files.

    format: `parquet`, `csv` or `json` (newline-delimited).
    format_options: the format writer's own options (for Parquet, pyarrow's ParquetWriter
        keywords: compression, compression_level, use_dictionary, write_statistics, ...).
    max_rows_per_file: roll to a new file after this many rows (0: no limit).
    min_rows_per_group: buffer a partition's rows until a row group has this many (0: write
        each piece as it comes, as pyarrow does).
    max_rows_per_group: largest row group (Parquet's row_group_size).
    max_open_files: files a task keeps open at once; the least recently written one is
        closed when a new one would pass it.
    basename_template: file names, with `{i}` replaced by a number unique in the job; None
        for `part-<task>-<job uuid>.c<NNN>.<ext>` (Spark's names, unique across jobs).
    target_file_size: bytes of a file (as written) after which it is closed and the next
        rows go to a new one; also the size tasks are planned for.
    max_memory: bytes of input a streamed write holds at once; the producer waits when
        the writers are half of it behind (rows go straight through, or are spilled to
        local disk where attempts repeat).
    keep_partition_columns: data files hold their partition columns as well as the
        `col=value` directories (set from the committer: Iceberg and Hudi tables need them).
    keep_empty_partition_values: an empty string partition value gets a `col=` directory of
        its own instead of Hive's null directory (set from the committer: Delta keeps ''
        apart from null, as deltalake does).
    """

    format: str = "parquet"
    format_options: dict[str, Any] = field(default_factory=dict)
    max_rows_per_file: int = 0
    min_rows_per_group: int = 0
    max_rows_per_group: int = DEFAULT_MAX_ROWS_PER_GROUP
    max_open_files: int = DEFAULT_MAX_OPEN_FILES
    basename_template: str | None = None
    target_file_size: int = DEFAULT_TARGET_FILE_SIZE
    max_memory: int = DEFAULT_MAX_MEMORY
    keep_partition_columns: bool = False
    keep_empty_partition_values: bool = False

    def __post_init__(self) -> None:
        if self.format not in FORMAT_OPTION_NAMES:
            raise ConfigError(
                f"unknown format {self.format!r}; use one of {', '.join(sorted(FORMAT_OPTION_NAMES))}"
            )
        known = FORMAT_OPTION_NAMES[self.format]()
        for name in self.format_options:
            if name not in known:
                raise ConfigError(
                    f"unknown {self.format} writer option {name!r}; "
                    f"known: {', '.join(sorted(known)) or 'none'}"
                )
        for name in ("max_rows_per_file", "min_rows_per_group"):
            _check_int(name, getattr(self, name), minimum=0)
        for name in ("max_rows_per_group", "max_open_files", "target_file_size", "max_memory"):
            _check_int(name, getattr(self, name), minimum=1)
        if self.min_rows_per_group > self.max_rows_per_group:
            raise ConfigError(
                f"min_rows_per_group ({self.min_rows_per_group}) is larger than "
                f"max_rows_per_group ({self.max_rows_per_group})"
            )
        if self.max_rows_per_file and self.max_rows_per_group > self.max_rows_per_file:
            # as pyarrow does: a row group never spans two files
            object.__setattr__(self, "max_rows_per_group", self.max_rows_per_file)
            if self.min_rows_per_group > self.max_rows_per_file:
                object.__setattr__(self, "min_rows_per_group", self.max_rows_per_file)
        if self.basename_template is not None:
            t = self.basename_template
            if "{i}" not in t:
                raise ConfigError(f"basename_template {t!r} must contain '{{i}}'")
            if "/" in t or not t.replace("{i}", ""):
                raise ConfigError(f"basename_template {t!r} must be a file name, not a path")

    @property
    def extension(self) -> str:
        return self.format

    def file_name(self, task_index: int, job_uuid: str, n: int) -> str:
        """The name of a task's n-th file (unique in the job, and across jobs by default)."""
        if self.basename_template is None:
            return f"part-{task_index:05d}-{job_uuid}.c{n:03d}.{self.extension}"
        return self.basename_template.replace("{i}", f"{task_index:05d}{n:03d}")


def _check_int(name: str, value: Any, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")


def check_mode(mode: str | None) -> str:
    """dataferry's write mode (None: ``error``, refuse existing data)."""
    if mode is None:
        return "error"
    if mode not in MODES:
        raise ConfigError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    return mode


def build_options(
    format: str,
    format_options: dict[str, Any] | None,
    writer_options: dict[str, Any],
    **sizes: Any,
) -> WriteOptions:
    """WriteOptions from the keywords of a public entry point: `format_options` and loose
    writer options (`compression=...`) are merged, and Parquet's `row_group_size` is taken
    as `max_rows_per_group`."""
    merged = dict(format_options or {})
    for name, value in writer_options.items():
        if name in merged:
            raise ConfigError(f"writer option {name!r} given twice (also in format_options)")
        merged[name] = value
    if "row_group_size" in merged:
        rows = merged.pop("row_group_size")
        _check_int("row_group_size", rows, minimum=1)  # its own name in the error
        if sizes.get("max_rows_per_group") not in (None, rows):
            raise ConfigError("give row_group_size or max_rows_per_group, not both")
        sizes["max_rows_per_group"] = rows
    given = {k: v for k, v in sizes.items() if v is not None}
    return replace(WriteOptions(format=format, format_options=merged), **given)


# --- the one definition of a write, and each entry point's names for it ------------------------

# WriteOptions' sizes, as every entry point names them
SIZE_OPTIONS = tuple(
    f.name for f in fields(WriteOptions) if f.name not in ("format", "format_options")
)
# the sizes Dask's `to_parquet` takes among its loose keywords (max_memory bounds a stream)
KEYWORD_SIZES = tuple(n for n in SIZE_OPTIONS if n != "max_memory")


@dataclass(frozen=True)
class WriteRequest:
    """A write as the library takes it, whichever entry point it came through: where it goes,
    how its files are cut and encoded, which committer writes it and in which mode.

    Every entry point (`dataferry.write_dataset`, `dataferry.dask`, `dataferry.ray`)
    translates its own arguments onto this through `translate`, by its row in `ENTRY_POINTS`.

    mode_words: how the entry point asks for each write mode (Dask: ``overwrite=True``), so
        that an error can tell its caller what to write in the caller's own words.
    replace_same_names: pyarrow's ``overwrite_or_ignore``: a file the job writes under the
        name of one already there replaces it (the committers that would refuse the name,
        `manifest`, are told to delete the target first).
    schema_mode: None or ``"merge"``: whether a write that keeps a plain data set's files
        may add or leave out columns (`existing.py`); a table committer's own schema_mode.
    """

    dest: Any
    partition_by: tuple[str, ...] = ()
    options: WriteOptions = field(default_factory=WriteOptions)
    committer: str = "auto"
    mode: str = "error"
    committer_options: dict[str, Any] = field(default_factory=dict)
    allow_unsafe_rename: bool = False
    filesystem: Any = None
    storage_options: dict[str, Any] | None = None
    mode_words: tuple[tuple[str, str], ...] = ()
    replace_same_names: bool = False
    schema_mode: str | None = None


def in_callers_words(mode_words: tuple[tuple[str, str], ...], message: str) -> str:
    """`message` with dataferry's ``mode='append'`` in an entry point's own words."""
    for mode, words in mode_words:
        message = message.replace(f"mode={mode!r}", words)
    return message


@dataclass(frozen=True)
class Flag:
    """A boolean argument that, when true, asks for a value (Dask's ``overwrite=True``)."""

    to: str
    value: Any


@dataclass(frozen=True)
class Choice:
    """An argument whose values are names for another's (pyarrow's existing_data_behavior)."""

    to: str
    values: dict[str, Any]


@dataclass(frozen=True)
class WriterOption:
    """One format-writer option an entry point names itself (Dask's ``compression``)."""

    name: str


@dataclass(frozen=True)
class Loose:
    """The loose keywords: the writer's options, and those of `sizes` taken as sizes."""

    sizes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Refused:
    """An argument accepted only when `allowed(value)`; otherwise ConfigError(reason)."""

    allowed: Any
    reason: str
    show_value: bool = False


class _Kept:
    """Not a write option: how the entry point runs the job (its data, engine, graph, hooks),
    or an argument it accepts for compatibility only."""

    def __repr__(self) -> str:
        return "RUN"


RUN = _Kept()

# the names users bring for the partition columns: dataferry's, pyarrow's, Dask's and Ray's;
# every entry point takes each of them (its own by name, the others as keywords)
PARTITION_NAMES = ("partition_by", "partitioning", "partition_on", "partition_cols")

# fields of the write that entry points without an argument of that name take as keywords
# (Dask's `to_parquet(..., schema_mode="merge")`)
REQUEST_KEYWORDS = ("schema_mode",)

# the arguments every entry point spells as dataferry does
_SAME = {
    **{n: n for n in ("dest", "partition_by", "format", "committer", "mode", "filesystem")},
    **{n: n for n in ("storage_options", "format_options", "committer_options")},
    "allow_unsafe_rename": "allow_unsafe_rename",
    "schema_mode": "schema_mode",
    "partitioning": "partition_by",  # pyarrow's name
    "existing_data_behavior": Choice("mode", EXISTING_DATA_BEHAVIOR),  # pyarrow's
    "writer_options": Loose(),
    **{n: n for n in SIZE_OPTIONS},
}
_DRIVER = {n: RUN for n in ("on_event", "before_job_commit")}
_FRAME = {n: RUN for n in ("write_index", "schema")}  # a Dask frame's rows: dask/write.py

# Each entry point's arguments onto the one definition: a name is a field of the write (or a
# size of WriteOptions); the rest is translated as its entry says. `translate` refuses an
# argument its entry point's row does not place.
ENTRY_POINTS: dict[str, dict[str, Any]] = {
    "write_dataset": {
        **_SAME,
        **_DRIVER,
        **{n: RUN for n in ("data", "tasks", "engine", "schema", "index", "preserve_index")},
        "progress": RUN,
    },
    "dask.write_dataset": {
        **_SAME,
        **_DRIVER,
        **_FRAME,
        **{n: RUN for n in ("ddf", "client", "max_attempts", "speculation", "window")},
    },
    "dask.to_parquet": {
        **_FRAME,
        # ignore_divisions: accepted for Dask's sake, no effect (divisions are not kept)
        **{n: RUN for n in ("df", "compute", "compute_kwargs", "ignore_divisions")},
        "engine": Refused(
            lambda v: v in (None, "auto", "pyarrow"),
            "engine must be 'pyarrow' (or 'auto')",
            show_value=True,
        ),
        "path": "dest",
        "partition_on": "partition_by",
        "compression": WriterOption("compression"),
        "append": Flag("mode", "append"),
        "overwrite": Flag("mode", "overwrite"),
        "storage_options": "storage_options",
        "filesystem": "filesystem",
        "committer": "committer",
        "committer_options": "committer_options",
        "allow_unsafe_rename": "allow_unsafe_rename",
        "custom_metadata": Refused(
            lambda v: not v,
            "custom_metadata is not supported: dataferry's Parquet writer does not write "
            "key/value footer metadata",
        ),
        "write_metadata_file": Refused(
            lambda v: not v,
            "write_metadata_file=True is not supported: dataferry writes no _metadata file "
            "(its commit record is _SUCCESS)",
        ),
        "name_function": Refused(
            lambda v: v is None,
            "name_function is not supported: file names must differ per task attempt and per "
            "rolled file; use basename_template='data-{i}.parquet' ({i} is unique in the job)",
        ),
        "kwargs": Loose(KEYWORD_SIZES),
    },
    "ray.CommitDatasink": {
        **{k: v for k, v in _SAME.items() if k not in ("dest", "max_memory", "partitioning")},
        "self": RUN,
        "min_rows_per_write": RUN,
        "path": "dest",
        "partition_cols": "partition_by",  # Ray's name; partition_by is dataferry's
    },
    "daft.CommitSink": {
        **{k: v for k, v in _SAME.items() if k != "max_memory"},
        **{n: RUN for n in ("self", "schema", "before_job_commit")},
        "partition_cols": "partition_by",  # Daft's name (write_parquet's)
    },
}
_FIELDS = {f.name for f in fields(WriteRequest)} - {"options", "mode_words"} | {"format"}


def check_loose_names(row: dict[str, Any], fmt: Any, loose: dict[str, Any]) -> None:
    """A loose keyword that is no writer option of the format but close to a name the entry
    point or the writer knows is a typo: the error says which name was meant ("unknown option
    'partiton_by'; did you mean 'partition_by'?"). Others are left to the writer's own check,
    which lists its options."""
    if fmt not in FORMAT_OPTION_NAMES:
        return
    writer = FORMAT_OPTION_NAMES[fmt]() | {"row_group_size"}
    names = sorted(
        {n for n, target in row.items() if target is not RUN and not isinstance(target, Loose)}
        | set(writer)
        | set(SIZE_OPTIONS)
    )
    for key in loose:
        if key in writer:
            continue
        close = difflib.get_close_matches(str(key), names, n=1)
        if close:
            raise ConfigError(f"unknown option {key!r}; did you mean {close[0]!r}?")


def translate(entry_point: str, arguments: dict[str, Any]) -> WriteRequest:
    """The write an entry point's arguments ask for (its `locals()` on entry), by its row in
    `ENTRY_POINTS`; each error names the entry point's own arguments."""
    row = ENTRY_POINTS[entry_point]
    given: dict[str, tuple[str, Any]] = {}  # field -> (the argument that set it, value)
    sizes: dict[str, Any] = {}
    format_options: dict[str, Any] = {}
    loose: dict[str, Any] = {}
    words = {t.value: f"{n}=True" for n, t in row.items() if isinstance(t, Flag)}

    def put(to: str, name: str, value: Any) -> None:
        if to in given:
            raise ConfigError(f"give {given[to][0]} or {name}, not both")
        given[to] = (name, value)

    for name, value in arguments.items():
        target = row[name]  # KeyError: the entry point's row misses an argument (a bug)
        if target is RUN:
            continue
        if isinstance(target, Refused):
            if not target.allowed(value):
                got = f", got {value!r}" if target.show_value else ""
                raise ConfigError(target.reason + got)
        elif isinstance(target, WriterOption):
            format_options[target.name] = value
        elif isinstance(target, Loose):
            for key, v in value.items():
                if key in PARTITION_NAMES:  # another library's name for it: an alias
                    if v is not None:
                        put("partition_by", key, v)
                    continue
                if key in REQUEST_KEYWORDS:  # the write's, for entry points without it
                    if v is not None:
                        put(key, key, v)
                    continue
                (sizes if key in target.sizes else loose)[key] = v
        elif isinstance(target, Flag):
            if value:
                put(target.to, words[target.value], target.value)
        elif isinstance(target, Choice):
            if value is not None:
                if value not in target.values:
                    raise ConfigError(
                        f"unknown {name} {value!r}; use one of {', '.join(target.values)}"
                    )
                put(target.to, name, target.values[value])
        elif target in SIZE_OPTIONS:
            sizes[target] = value
        elif target == "format_options":
            format_options.update(value or {})
        elif value is not None:
            put(target, name, value)
    values = {k: v for k, (_, v) in given.items()}
    assert set(values) <= _FIELDS, set(values) - _FIELDS
    check_loose_names(row, values.get("format", "parquet"), loose)
    parts = values.pop("partition_by", ())
    return WriteRequest(
        options=build_options(values.pop("format", "parquet"), format_options, loose, **sizes),
        partition_by=(parts,) if isinstance(parts, str) else tuple(parts),
        mode=check_mode(values.pop("mode", None)),
        committer_options=dict(values.pop("committer_options", None) or {}),
        mode_words=tuple(sorted(words.items())),
        replace_same_names=arguments.get("existing_data_behavior") == "overwrite_or_ignore",
        **values,
    )
