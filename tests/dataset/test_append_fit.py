"""A plain-directory write that keeps the data set's files (append, overwrite-partitions) is
refused on the driver, before any task writes, when its files would not fit the data set's:
another partition layout, another type for a column, a new or missing column (unless
schema_mode="merge"). Each refusal names the column; the data set stays as it was."""

from __future__ import annotations

import dataclasses

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as pads
import pytest

import dataferry
from dataferry.commit.factory import config_type
from dataferry.errors import ConfigError

FIRST = pa.table({"k": ["a", "b"], "v": [1, 2], "s": ["x", "y"]})


def everything(path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def read_all(path) -> dict[str, int]:
    glob = f"{path}/**/*.parquet"
    sql = f"select count(*) from read_parquet('{glob}', hive_partitioning=true)"
    return {
        "pyarrow": pads.dataset(str(path), format="parquet", partitioning="hive").count_rows(),
        "pandas": len(pd.read_parquet(str(path))),
        "polars": pl.read_parquet(glob, hive_partitioning=True).height,
        "duckdb": duckdb.sql(sql).fetchall()[0][0],
    }


@pytest.fixture
def data_set(tmp_path):
    out = tmp_path / "out"
    dataferry.write_dataset(FIRST, str(out), partition_by=["k"])
    return out


REFUSED = {
    "unpartitioned": (FIRST, None, "is partitioned by 'k' .* but the write is not partitioned"),
    "other_partition": (
        FIRST,
        ["s"],
        "is partitioned by 'k' .* but the write is partitioned by 's'",
    ),
    "other_type": (
        FIRST.set_column(1, "v", pa.array(["1", "2"])),
        ["k"],
        "column 'v' is string in the data but int64 in the data set",
    ),
    "narrower_int": (
        FIRST.set_column(1, "v", pa.array([1, 2], pa.int32())),
        ["k"],
        "column 'v' is int32 in the data but int64",
    ),
    "categorical": (
        FIRST.set_column(2, "s", pa.array(["x", "y"]).dictionary_encode()),
        ["k"],
        "column 's' is dictionary<values=string, indices=int32, ordered=0> in the data but string",
    ),
    "new_column": (FIRST.append_column("w", pa.array([1, 2])), ["k"], "column 'w' is not in"),
    "missing_column": (FIRST.drop_columns(["s"]), ["k"], "the data has no column 's'"),
}


WRITES = [
    ("auto", "append"),
    ("v1", "overwrite-partitions"),
    ("v2", "append"),
    ("manifest", "overwrite-partitions"),
    ("direct", "append"),
]


@pytest.mark.parametrize(("committer", "mode"), WRITES)
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_write_that_does_not_fit_the_data_set_is_refused_before_any_task(
    data_set, case, committer, mode
):
    """Each mismatch is one ConfigError naming the column, raised before any task runs: not
    a file, not a job directory is added. Without the check, the job would commit files
    polars and DuckDB (and for a type, pyarrow) then fail to read beside the others."""
    data, parts, match = REFUSED[case]
    before = everything(data_set)
    started = []
    with pytest.raises(ConfigError, match=match):
        dataferry.write_dataset(
            data,
            str(data_set),
            partition_by=parts,
            committer=committer,
            mode=mode,
            on_event=lambda *e: started.append(e),
        )
    assert started == [] and everything(data_set) == before
    assert read_all(data_set) == dict.fromkeys(("pyarrow", "pandas", "polars", "duckdb"), 2)


@pytest.mark.parametrize("committer", ["auto", "v2", "direct"])
def test_an_append_that_fits_is_read_by_every_reader(data_set, committer):
    """Same layout and types (string widths are one type to every reader: pandas 3 and
    polars write large strings) append, and every reader reads all rows."""
    more = FIRST.set_column(2, "s", FIRST.column("s").cast(pa.large_string()))
    dataferry.write_dataset(
        more, str(data_set), partition_by=["k"], mode="append", committer=committer
    )
    assert read_all(data_set) == dict.fromkeys(("pyarrow", "pandas", "polars", "duckdb"), 4)


def test_schema_mode_merge_adds_and_drops_columns_pyarrow_reads(data_set):
    """schema_mode='merge' lets new and missing columns in (types must still match), and
    pyarrow.dataset reads every file, the missing values as nulls."""
    wider = FIRST.append_column("w", pa.array([7, 8]))
    dataferry.write_dataset(
        wider, str(data_set), partition_by=["k"], mode="append", schema_mode="merge"
    )
    narrower = FIRST.drop_columns(["s"])
    dataferry.write_dataset(
        narrower, str(data_set), partition_by=["k"], mode="append", schema_mode="merge"
    )
    # as the first file's columns
    assert pads.dataset(str(data_set), partitioning="hive").count_rows() == 6
    fragments = pads.dataset(str(data_set), partitioning="hive").get_fragments()
    schema = pa.unify_schemas([f.physical_schema for f in fragments])
    schema = schema.append(pa.field("k", pa.string()))
    rows = pads.dataset(str(data_set), schema=schema, partitioning="hive").to_table()
    assert (
        rows.num_rows == 6 and sorted(rows.column("w").to_pylist(), key=str) == [7, 8] + [None] * 4
    )
    with pytest.raises(ConfigError, match="column 'v' is string"):
        dataferry.write_dataset(
            FIRST.set_column(1, "v", pa.array(["1", "2"])),
            str(data_set),
            partition_by=["k"],
            mode="append",
            schema_mode="merge",
        )
    with pytest.raises(ConfigError, match="unknown schema_mode 'nope'"):
        dataferry.write_dataset(
            FIRST, str(data_set), partition_by=["k"], mode="append", schema_mode="nope"
        )


def test_a_data_set_pandas_wrote_takes_a_fitting_append(tmp_path):
    """A data set of pandas' to_parquet (its own names, its own layout) is read as it is:
    the same frame appends; a frame partitioned otherwise is refused."""
    out = tmp_path / "out"
    FIRST.to_pandas().to_parquet(str(out), partition_cols=["k"])
    dataferry.write_dataset(FIRST.to_pandas(), str(out), partition_by=["k"], mode="append")
    assert read_all(out)["duckdb"] == 4
    with pytest.raises(ConfigError, match="is partitioned by 'k'"):
        dataferry.write_dataset(FIRST.to_pandas(), str(out), mode="append")


def test_an_empty_partitioned_data_set_is_not_partitioned_for_an_append(tmp_path):
    """An empty write's schema file lies at the root: a partitioned append to it would make
    a layout polars and DuckDB refuse, so it is refused, with the way out named."""
    out = tmp_path / "out"
    dataferry.write_dataset(FIRST.slice(0, 0), str(out), partition_by=["k"])
    with pytest.raises(ConfigError, match=r"is not partitioned .* or with mode='overwrite'"):
        dataferry.write_dataset(FIRST, str(out), partition_by=["k"], mode="append")
    dataferry.write_dataset(FIRST, str(out), partition_by=["k"], mode="overwrite")
    assert read_all(out)["polars"] == 2


def test_an_overwrite_is_not_checked(data_set):
    """mode='overwrite' replaces the data set: any layout and types are taken."""
    other = pa.table({"z": ["q"]})
    dataferry.write_dataset(other, str(data_set), mode="overwrite")
    assert pads.dataset(str(data_set)).to_table().to_pydict() == {"z": ["q"]}


def test_dask_appends_are_checked_in_dasks_words(data_set):
    """Dask's to_parquet runs the same check on the driver (write_dataset's Dask form shares
    `prepare_write` with dataferry.write_dataset); the way out is said as Dask says it
    (overwrite=True), and schema_mode='merge' is taken among its keywords."""
    dd = pytest.importorskip("dask.dataframe")
    import dataferry.dask as dfdask

    ddf = dd.from_pandas(FIRST.to_pandas(), npartitions=1)
    before = everything(data_set)
    with pytest.raises(ConfigError, match=r"is partitioned by 'k'.*overwrite=True"):
        dfdask.to_parquet(ddf, str(data_set), append=True, compute_kwargs={"scheduler": "sync"})
    assert everything(data_set) == before
    typed = dd.from_pandas(FIRST.to_pandas().astype({"v": "int32"}), npartitions=1)
    with pytest.raises(ConfigError, match="column 'v' is int32"):
        dfdask.to_parquet(
            typed,
            str(data_set),
            partition_on=["k"],
            append=True,
            compute_kwargs={"scheduler": "sync"},
        )
    wider = dd.from_pandas(FIRST.to_pandas().assign(w=[7, 8]), npartitions=1)
    dfdask.to_parquet(
        wider,
        str(data_set),
        partition_on=["k"],
        append=True,
        schema_mode="merge",
        compute_kwargs={"scheduler": "sync"},
    )
    assert pads.dataset(str(data_set), partitioning="hive").count_rows() == 4


def test_schema_mode_reaches_a_tables_own_committer(tmp_path):
    """With a table's committer, schema_mode= is the committer's own (Delta's merge adds the
    column in the table's log); a committer without one refuses it by name."""
    deltalake = pytest.importorskip("deltalake")
    out = tmp_path / "delta"
    dataferry.write_dataset(FIRST, str(out), committer="delta")
    wider = FIRST.append_column("w", pa.array([7, 8]))
    dataferry.write_dataset(wider, str(out), committer="delta", mode="append", schema_mode="merge")
    assert deltalake.DeltaTable(str(out)).to_pyarrow_table().column_names == ["k", "v", "s", "w"]
    lacking = [
        name
        for name in ("hudi", "iceberg")
        if "schema_mode" not in {f.name for f in dataclasses.fields(config_type(name))}
    ]
    for name in lacking:  # (each format's helper may give its committer one)
        with pytest.raises(ConfigError, match=f"committer '{name}' takes no schema_mode"):
            dataferry.write_dataset(
                FIRST, str(tmp_path / name), committer=name, schema_mode="merge"
            )


def test_files_of_other_kinds_are_not_the_data_sets_layout(data_set):
    """A README or a checksum beside the data is not a data file: it neither makes a
    partitioned data set look unpartitioned nor is its footer read."""
    (data_set / "README.txt").write_text("clicks by day\n")
    (data_set / "k=a" / "notes.md").write_text("a\n")
    dataferry.write_dataset(FIRST, str(data_set), partition_by=["k"], mode="append")
    assert (
        pads.dataset(
            str(data_set / "k=a"), format="parquet", exclude_invalid_files=True
        ).count_rows()
        == 2
    )


def test_the_way_out_is_the_committers_whole_overwrite(tmp_path):
    """Hive's `overwrite` replaces only the partitions written (and would keep the misfit
    files): the error names its `overwrite-table`, which replaces the data set."""
    out = tmp_path / "hive"
    write = dict(committer="hive", partition_by=["k"], committer_options={"catalog": ""})
    dataferry.write_dataset(FIRST, str(out), **write)
    with pytest.raises(ConfigError, match=r"column 'v' is string .* mode='overwrite-table'"):
        dataferry.write_dataset(
            FIRST.set_column(1, "v", pa.array(["1", "2"])), str(out), mode="overwrite", **write
        )


def test_an_object_store_append_is_checked_too(tmp_path):
    """On a store without directories (S3's model, the magic committer) the layout is read
    from key prefixes and the footer by ranged reads, with the same refusal."""
    dest = f"sim:s3:{tmp_path / 's3'}"
    dataferry.write_dataset(FIRST, dest, partition_by=["k"], committer="magic")
    with pytest.raises(ConfigError, match="column 'v' is string in the data but int64"):
        dataferry.write_dataset(
            FIRST.set_column(1, "v", pa.array(["1", "2"])),
            dest,
            partition_by=["k"],
            committer="magic",
            mode="append",
        )
    dataferry.write_dataset(FIRST, dest, partition_by=["k"], committer="magic", mode="append")
    # (pyarrow only: the simulator keeps its uploads' parts in a hidden directory a glob finds)
    assert pads.dataset(str(tmp_path / "s3"), partitioning="hive").count_rows() == 4
