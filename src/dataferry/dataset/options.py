"""The options of a write, in the names pyarrow and Dask users already know.

`WriteOptions` holds how files are cut (rows per file and per row group, a target size, open
files), how they are named (`basename_template`), how much input may be in memory at once, and
the file format's own options (Parquet writer options are passed through to pyarrow). Every
value is checked here, once, on the driver, with an error that names the option at fault.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
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
    "delete_matching": "overwrite",
}
MODES = ("error", "append", "overwrite", "overwrite-table")


def _parquet_option_names() -> frozenset[str]:
    """The keyword arguments pyarrow's ParquetWriter takes (this pyarrow's, not a copy)."""
    import pyarrow.parquet as pq

    names = set(inspect.signature(pq.ParquetWriter.__init__).parameters)
    names -= {"self", "where", "schema", "filesystem", "options"}
    return frozenset(names | {"data_page_size"})


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
    max_memory: bytes of input a streamed write holds at once (its retry buffer
        included); the producer waits when it is reached.
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


def partition_columns(
    columns: str | Sequence[str] | None, alias: str | Sequence[str] | None, names: str
) -> tuple[str, ...]:
    """The partition columns, given under one name or its alias (`names`: "partition_by or
    partitioning"), not both; a single column may be a string."""
    if alias is not None:
        if columns is not None:
            raise ConfigError(f"give {names}, not both")
        columns = alias
    if columns is None:
        return ()
    return (columns,) if isinstance(columns, str) else tuple(columns)


def mode_of_flags(append: bool, overwrite: bool) -> str:
    """The write mode of Dask's `append`/`overwrite` flags (neither: refuse existing data)."""
    if append and overwrite:
        raise ConfigError("give append or overwrite, not both")
    if overwrite:
        return "overwrite"
    return "append" if append else "error"


def resolve_mode(mode: str | None, existing_data_behavior: str | None) -> str:
    """dataferry's write mode from `mode` or pyarrow's `existing_data_behavior` (not both)."""
    if existing_data_behavior is not None:
        if mode is not None:
            raise ConfigError("give mode or existing_data_behavior, not both")
        try:
            return EXISTING_DATA_BEHAVIOR[existing_data_behavior]
        except KeyError:
            raise ConfigError(
                f"unknown existing_data_behavior {existing_data_behavior!r}; use one of "
                f"{', '.join(EXISTING_DATA_BEHAVIOR)}"
            ) from None
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
        if sizes.get("max_rows_per_group") not in (None, rows):
            raise ConfigError("give row_group_size or max_rows_per_group, not both")
        sizes["max_rows_per_group"] = rows
    given = {k: v for k, v in sizes.items() if v is not None}
    return replace(WriteOptions(format=format, format_options=merged), **given)
