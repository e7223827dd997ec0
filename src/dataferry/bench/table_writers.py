"""The in-process writers of `dataferry bench write` (dataferry, pyarrow, polars, DuckDB, Delta
Lake) and the codecs they are told to write: each writer's own default, or one codec (and
level) all of them use, so that writers are compared, not codecs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..errors import ConfigError
from .writers import DEFAULT_CODEC, FERRY_MODULES, Group, Write, Writer, _group, delta_rows

CODECS = ("snappy", "zstd", "lz4", "gzip", "none")


@dataclass(frozen=True)
class Codec:
    """A Parquet codec every writer is told to use (`name`, and `level` if given), or each
    writer's own default (`name` "default")."""

    name: str
    level: int | None = None

    @property
    def label(self) -> str:
        return self.name if self.level is None else f"{self.name}-{self.level}"

    @property
    def default(self) -> bool:
        return self.name == DEFAULT_CODEC


def parse_codec(text: str) -> Codec:
    """`default`, a codec (`snappy`), or a codec and its level (`zstd-3`)."""
    name, _, level = text.strip().lower().partition("-")
    if name == DEFAULT_CODEC and not level:
        return Codec(name)
    if name not in CODECS or (level and not level.isdigit()) or (level and name == "none"):
        raise ConfigError(
            f"codec {text!r}: give 'default' (each writer's own), or one of "
            f"{', '.join(CODECS)} with an optional level (zstd-3)"
        )
    return Codec(name, int(level) if level else None)


# what each writer writes when told nothing (stated beside the results)
DEFAULT_CODECS = {
    "dataferry": "snappy (pyarrow's default)",
    "dataferry manifest": "snappy (pyarrow's default)",
    "pyarrow": "snappy",
    "polars": "zstd (level 3, polars' default)",
    "duckdb": "snappy",
    "deltalake": "snappy",
}


def table_group(
    table: pa.Table,
    partition_by: tuple[str, ...],
    tasks: int | None = None,
    only: tuple[str, ...] = (),
    codecs: tuple[Codec, ...] = (Codec(DEFAULT_CODEC),),
) -> Group:
    """dataferry (its defaults; and the manifest committer), pyarrow, polars, DuckDB and Delta
    Lake, each writing the in-memory table in this process, once for each of `codecs` (each
    writer's own default, or one codec all are told to use; the manifest committer only at
    the defaults, where it is the only difference)."""
    group = Group("table", "dataferry", [])
    group.data = table
    for codec in codecs:
        found = _group("table", "dataferry", _table_writers(partition_by, tasks, codec), only)
        group.writers += found.writers
        for s in found.skipped:
            if s not in group.skipped:
                group.skipped.append(s)
    return group


def _table_writers(
    partition_by: tuple[str, ...], tasks: int | None, codec: Codec
) -> list[tuple[tuple[str, ...], Writer]]:
    """The table writers told to write `codec` (nothing, for the default)."""
    cols = list(partition_by)
    name, level = codec.name, codec.level
    leveled = {} if level is None else {"compression_level": level}
    arrow = {} if codec.default else {"compression": name, **leveled}

    def dataferry(committer: str | None) -> Write:
        def write(table: pa.Table, dest: str) -> str:
            from ..dataset.write import write_dataset

            extra: dict[str, Any] = {"committer": committer} if committer else {}
            if tasks is not None:
                extra["tasks"] = tasks
            done = write_dataset(table, dest, partition_by=cols, **extra, **arrow)
            return f"committer {done.committer}"

        return write

    def pyarrow_write(table: pa.Table, dest: str) -> None:
        import pyarrow.dataset as pads

        pads.write_dataset(
            table,
            dest,
            format="parquet",
            partitioning=cols,
            partitioning_flavor="hive",
            existing_data_behavior="overwrite_or_ignore",
            file_options=pads.ParquetFileFormat().make_write_options(**arrow) if arrow else None,
        )

    def polars_prepare(table: pa.Table) -> Any:
        import polars as pl

        return pl.from_arrow(table)

    def polars_write(df: Any, dest: str) -> None:
        told = {} if codec.default else {"compression": _polars_codec(name), **leveled}
        df.write_parquet(dest, partition_by=cols, **told)

    def duckdb_prepare(table: pa.Table) -> Any:
        import duckdb

        con = duckdb.connect()
        con.register("tbl", table)
        return con

    def duckdb_write(con: Any, dest: str) -> None:
        con.execute(duckdb_copy("tbl", dest, partition_by, codec))

    def delta_write(table: pa.Table, dest: str) -> None:
        from deltalake import WriterProperties, write_deltalake

        told: dict[str, Any] = {}
        if not codec.default:
            # pyarrow's "lz4" is Parquet's LZ4_RAW (its LZ4 is Hadoop's deprecated framing)
            upper = {"none": "UNCOMPRESSED", "lz4": "LZ4_RAW"}.get(name, name.upper())
            told["writer_properties"] = WriterProperties(compression=upper, **leveled)  # type: ignore[arg-type]
        write_deltalake(dest, table, partition_by=cols, **told)

    label = codec.label
    writers = [
        ((), Writer("dataferry", dataferry(None), warm=FERRY_MODULES, codec=label)),
        ((), Writer("pyarrow", pyarrow_write, warm=("pyarrow.dataset",), codec=label)),
        (("polars",), Writer("polars", polars_write, prepare=polars_prepare, codec=label)),
        (
            ("duckdb",),
            Writer(
                "duckdb",
                duckdb_write,
                prepare=duckdb_prepare,
                close=lambda c: c.close(),
                codec=label,
            ),
        ),
        (
            ("deltalake",),
            Writer("deltalake", delta_write, rows=delta_rows, warm=("deltalake",), codec=label),
        ),
    ]
    if codec.default:
        manifest = Writer("dataferry manifest", dataferry("manifest"), warm=FERRY_MODULES)
        writers.insert(1, ((), manifest))
    return writers


def _polars_codec(name: str) -> str:
    return "uncompressed" if name == "none" else name


def duckdb_copy(
    relation: str, dest: str, partition_by: tuple[str, ...], codec: Codec | None = None
) -> str:
    quoted = dest.replace("'", "''")
    cols = ", ".join('"' + c.replace('"', '""') + '"' for c in partition_by)
    told = ""
    if codec is not None and not codec.default:
        told = f", COMPRESSION {'uncompressed' if codec.name == 'none' else codec.name}"
        if codec.level is not None:
            told += f", COMPRESSION_LEVEL {codec.level}"
    return f"COPY {relation} TO '{quoted}' (FORMAT parquet, PARTITION_BY ({cols}){told})"
