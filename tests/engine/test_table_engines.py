"""Delta tables written from Dask (`to_parquet`, `write_dataset`, `write_deltalake`, on a real
LocalCluster and on threads) and from Ray (`CommitDatasink(committer="delta")`,
`DeltaDatasink`), read back row for row by deltalake and polars: each engine tells the
committer the data's schema before any task runs (`prepare_input`) and writes its files as the
committer needs them (`committer_write_options`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

deltalake = pytest.importorskip("deltalake")
pl = pytest.importorskip("polars")
dd = pytest.importorskip("dask.dataframe")

import dask  # noqa: E402

import dataferry.dask as fdask  # noqa: E402
from dataferry.commit.table.delta import DeltaCommitter  # noqa: E402
from dataferry.errors import ConfigError  # noqa: E402

THREADS = {"scheduler": "threads"}


def frame(n=600, offset=0, parts=3) -> tuple[pd.DataFrame, dd.DataFrame]:
    ids = np.arange(offset, offset + n)
    pdf = pd.DataFrame({"id": ids, "day": [f"d{i % 3}" for i in ids], "v": ids * 0.5})
    return pdf, dd.from_pandas(pdf, npartitions=parts)


def rows(pdf: pd.DataFrame) -> list[tuple]:
    return sorted(zip(pdf["id"].tolist(), pdf["day"].tolist(), pdf["v"].tolist(), strict=True))


def delta_rows(path) -> list[tuple]:
    """The table's rows as deltalake reads them, and the same as polars reads them."""
    t = deltalake.DeltaTable(str(path)).to_pyarrow_table()
    by_delta = sorted(
        zip(
            t.column("id").to_pylist(),
            t.column("day").cast(pa.string()).to_pylist(),
            t.column("v").to_pylist(),
            strict=True,
        )
    )
    df = pl.read_delta(str(path))
    by_polars = sorted(zip(df["id"].to_list(), df["day"].to_list(), df["v"].to_list(), strict=True))
    assert by_delta == by_polars
    return by_delta


def parquet_files(path) -> list[Path]:
    return sorted(p for p in Path(path).rglob("*.parquet") if "_delta_log" not in p.parts)


def live_files(path) -> set[str]:
    return set(deltalake.DeltaTable(str(path)).file_uris())


def assert_no_orphans(path) -> None:
    """Every data file in the directory is one a table version references."""
    dt = deltalake.DeltaTable(str(path))
    referenced = set()
    for version in range(dt.version() + 1):
        old = deltalake.DeltaTable(str(path), version=version)
        referenced |= {Path(u.removeprefix("file://")).resolve() for u in old.file_uris()}
    assert {p.resolve() for p in parquet_files(path)} <= referenced


def keep_partition_columns(monkeypatch):
    """The Delta committer asks for its partition columns in the files (as Iceberg's and
    Hudi's do): the engines must write them there."""
    monkeypatch.setattr(DeltaCommitter, "keeps_partition_columns", True)


# --- Dask -------------------------------------------------------------------------------------


def test_to_parquet_on_a_cluster_appends_then_overwrites_a_delta_table(client, tmp_path):
    out = tmp_path / "sales"
    first, d1 = frame()
    second, d2 = frame(offset=1000)
    third, d3 = frame(n=90, offset=5000)
    fdask.to_parquet(d1, out, partition_on=["day"], committer="delta", append=True)
    assert delta_rows(out) == rows(first)
    fdask.to_parquet(d2, out, partition_on=["day"], committer="delta", append=True)
    assert delta_rows(out) == rows(pd.concat([first, second]))
    result = fdask.to_parquet(d3, out, partition_on=["day"], committer="delta", overwrite=True)
    assert result.committer == "delta" and result.rows == 90
    assert delta_rows(out) == rows(third)
    assert deltalake.DeltaTable(str(out)).version() == 2
    assert deltalake.DeltaTable(str(out)).metadata().partition_columns == ["day"]
    assert_no_orphans(out)


def test_write_dataset_on_a_cluster_appends_then_overwrites_a_delta_table(client, tmp_path):
    out = tmp_path / "sales"
    first, d1 = frame()
    second, d2 = frame(offset=1000)
    fdask.write_dataset(d1, out, partition_by=["day"], committer="delta", client=client)
    fdask.write_dataset(
        d2, out, partition_by=["day"], committer="delta", mode="append", client=client
    )
    assert delta_rows(out) == rows(pd.concat([first, second]))
    fdask.write_dataset(
        d1, out, partition_by=["day"], committer="delta", mode="overwrite", client=client
    )
    assert delta_rows(out) == rows(first)
    assert_no_orphans(out)


def test_write_deltalake_on_a_cluster(client, tmp_path):
    out = tmp_path / "sales"
    first, d1 = frame()
    second, d2 = frame(offset=1000)
    fdask.write_deltalake(d1, out, partition_by=["day"], name="sales")
    fdask.write_deltalake(d2, deltalake.DeltaTable(str(out)), mode="append", partition_by="day")
    assert delta_rows(out) == rows(pd.concat([first, second]))
    assert fdask.write_deltalake(d2, out, mode="ignore", partition_by=["day"]) is None
    assert deltalake.DeltaTable(str(out)).version() == 1
    fdask.write_deltalake(d2, out, mode="overwrite", partition_by=["day"])
    assert delta_rows(out) == rows(second)
    assert deltalake.DeltaTable(str(out)).metadata().name == "sales"


@pytest.mark.parametrize("form", ["to_parquet", "write_deltalake"])
def test_dask_checks_the_frame_against_the_table_before_any_task(tmp_path, form):
    out = tmp_path / "sales"
    _, d1 = frame()
    with dask.config.set(THREADS):
        fdask.to_parquet(d1, out, partition_on=["day"], committer="delta", append=True)
    before = set(parquet_files(out))
    other = d1.assign(extra=1)  # a column the table does not have
    computed = []

    def counted(pdf):
        computed.append(len(pdf))
        return pdf

    other = other.map_partitions(counted, meta=other._meta)
    with dask.config.set(THREADS), pytest.raises(ConfigError, match="extra"):
        if form == "to_parquet":
            fdask.to_parquet(other, out, partition_on=["day"], committer="delta", append=True)
        else:
            fdask.write_deltalake(other, out, partition_by=["day"], mode="append")
    assert computed == []  # refused on the driver, from the frame's meta
    assert set(parquet_files(out)) == before


def test_dask_tells_a_table_of_the_frames_schema(tmp_path):
    """The table is created with the frame's schema (the meta's, not a file's guess)."""
    pdf = pd.DataFrame({"id": [1, 2, 3], "day": ["a", "b", "a"], "v": [0.5, None, 2.0]})
    ddf = dd.from_pandas(pdf, npartitions=1)
    with dask.config.set(THREADS):
        fdask.to_parquet(ddf, tmp_path / "t", partition_on=["day"], committer="delta")
    schema = deltalake.DeltaTable(str(tmp_path / "t")).schema().to_arrow()
    assert [f.name for f in schema] == ["id", "day", "v"]


@pytest.mark.parametrize("driver", ["graph", "driver"])
def test_dask_writes_the_partition_columns_a_committer_keeps(client, tmp_path, monkeypatch, driver):
    keep_partition_columns(monkeypatch)
    out = tmp_path / "sales"
    first, d1 = frame()
    if driver == "graph":
        fdask.to_parquet(d1, out, partition_on=["day"], committer="delta")
    else:
        fdask.write_dataset(d1, out, partition_by=["day"], committer="delta", client=client)
    files = parquet_files(out)
    assert files and all("day" in pq.read_schema(f).names for f in files)
    assert delta_rows(out) == rows(first)


def test_dask_files_leave_the_partition_columns_out_by_default(tmp_path):
    out = tmp_path / "sales"
    _, d1 = frame()
    with dask.config.set(THREADS):
        fdask.to_parquet(d1, out, partition_on=["day"], committer="delta")
    files = parquet_files(out)
    assert files and not any("day" in pq.read_schema(f).names for f in files)


# --- Ray --------------------------------------------------------------------------------------


def ray_dataset(ray, pdf: pd.DataFrame, blocks: int = 3, batch_format: str = "pyarrow"):
    ds = ray.data.from_arrow(pa.Table.from_pandas(pdf, preserve_index=False)).repartition(blocks)
    return ds.map_batches(lambda b: b, batch_format=batch_format)


@pytest.mark.parametrize("batch_format", ["pyarrow", "pandas"])
def test_ray_commit_datasink_appends_then_overwrites_a_delta_table(
    local_ray, tmp_path, batch_format
):
    from dataferry.ray import CommitDatasink

    out = tmp_path / "sales"
    first, _ = frame()
    second, _ = frame(offset=1000)
    for pdf, mode in ((first, "append"), (second, "append")):
        sink = CommitDatasink(out, partition_cols=["day"], committer="delta", mode=mode)
        ray_dataset(local_ray, pdf, batch_format=batch_format).write_datasink(sink)
        assert sink.result is not None and sink.result.committer == "delta"
    assert delta_rows(out) == rows(pd.concat([first, second]))
    sink = CommitDatasink(out, partition_cols=["day"], committer="delta", mode="overwrite")
    ray_dataset(local_ray, first, batch_format=batch_format).write_datasink(sink)
    assert delta_rows(out) == rows(first)
    assert deltalake.DeltaTable(str(out)).version() == 2
    assert_no_orphans(out)


def test_ray_delta_datasink_modes(local_ray, tmp_path):
    from dataferry.ray import DeltaDatasink

    out = tmp_path / "sales"
    first, _ = frame()
    second, _ = frame(offset=1000)
    ray_dataset(local_ray, first).write_datasink(
        DeltaDatasink(out, partition_cols=["day"], description="from ray")
    )
    sink = DeltaDatasink(deltalake.DeltaTable(str(out)), partition_cols=["day"], mode="append")
    ray_dataset(local_ray, second).write_datasink(sink)
    assert sink.result.rows == len(second)
    assert delta_rows(out) == rows(pd.concat([first, second]))
    ignored = DeltaDatasink(out, partition_cols=["day"], mode="ignore")
    ray_dataset(local_ray, second).write_datasink(ignored)
    assert ignored.ignored and ignored.result is None
    assert deltalake.DeltaTable(str(out)).version() == 1
    ray_dataset(local_ray, second).write_datasink(
        DeltaDatasink(out, partition_by=["day"], mode="overwrite")
    )
    assert delta_rows(out) == rows(second)
    assert deltalake.DeltaTable(str(out)).metadata().description == "from ray"
    with pytest.raises(Exception, match=r"already exists|not empty"):
        ray_dataset(local_ray, second).write_datasink(DeltaDatasink(out, partition_cols=["day"]))
    assert delta_rows(out) == rows(second)
    assert_no_orphans(out)


def test_ray_checks_a_known_schema_against_the_table(local_ray, tmp_path):
    from dataferry.ray import CommitDatasink

    out = tmp_path / "sales"
    first, _ = frame()
    sink = CommitDatasink(out, partition_cols=["day"], committer="delta", mode="append")
    ray_dataset(local_ray, first).write_datasink(sink)
    before = set(parquet_files(out))
    other = first.assign(extra=1)
    sink = CommitDatasink(out, partition_cols=["day"], committer="delta", mode="append")
    with pytest.raises(Exception, match="extra"):
        ray_dataset(local_ray, other).write_datasink(sink)
    assert set(parquet_files(out)) == before
    assert delta_rows(out) == rows(first)


def test_ray_writes_the_partition_columns_a_committer_keeps(local_ray, tmp_path, monkeypatch):
    from dataferry.ray import CommitDatasink

    keep_partition_columns(monkeypatch)
    out = tmp_path / "sales"
    first, _ = frame()
    sink = CommitDatasink(out, partition_cols=["day"], committer="delta")
    ray_dataset(local_ray, first).write_datasink(sink)
    files = parquet_files(out)
    assert files and all("day" in pq.read_schema(f).names for f in files)
    assert delta_rows(out) == rows(first)


# --- Iceberg and Hudi from the engines: the same calls, read by pyiceberg and hudi-rs -----------

OPTIONS = {"iceberg": {}, "hudi": {"table_name": "sales", "record_key": "id"}}


def table_rows(name: str, path) -> list[tuple]:
    """The table's rows as its format's own reader (pyiceberg, hudi-rs) reads them."""
    from dataferry import make_committer

    t = make_committer(name, str(path)).read_rows()
    return sorted(
        zip(
            t.column("id").to_pylist(),
            t.column("day").cast(pa.string()).to_pylist(),
            t.column("v").to_pylist(),
            strict=True,
        )
    )


@pytest.mark.parametrize("name", ["iceberg", "hudi"])
def test_dask_appends_then_overwrites_an_iceberg_or_hudi_table(client, tmp_path, name):
    out = tmp_path / "sales"
    first, d1 = frame()
    second, d2 = frame(offset=1000)
    kw = {"partition_by": ["day"], "committer": name, "committer_options": OPTIONS[name]}
    fdask.write_dataset(d1, out, client=client, **kw)
    fdask.to_parquet(
        d2, out, partition_on=["day"], committer=name, committer_options=OPTIONS[name], append=True
    )
    assert table_rows(name, out) == rows(pd.concat([first, second]))
    fdask.write_dataset(d1, out, mode="overwrite", client=client, **kw)
    assert table_rows(name, out) == rows(first)


@pytest.mark.parametrize("name", ["iceberg", "hudi"])
def test_ray_appends_then_overwrites_an_iceberg_or_hudi_table(local_ray, tmp_path, name):
    from dataferry.ray import CommitDatasink

    out = tmp_path / "sales"
    first, _ = frame()
    second, _ = frame(offset=1000)
    for pdf, mode in ((first, "append"), (second, "append"), (first, "overwrite")):
        sink = CommitDatasink(
            out,
            partition_cols=["day"],
            committer=name,
            committer_options=OPTIONS[name],
            mode=mode,
        )
        ray_dataset(local_ray, pdf).write_datasink(sink)
        assert sink.result is not None and sink.result.committer == name
        if mode == "append" and pdf is second:
            assert table_rows(name, out) == rows(pd.concat([first, second]))
    assert table_rows(name, out) == rows(first)


def files_lie_in_one_bucket(path, buckets: int) -> int:
    """Assert each data file of the Iceberg table at `path` holds the ids of the one bucket
    its manifest entry names; the number of files."""
    from pyiceberg.transforms import BucketTransform
    from pyiceberg.types import LongType

    from dataferry import make_committer

    bucket = BucketTransform(buckets).transform(LongType())
    tasks = list(make_committer("iceberg", str(path)).table().scan().plan_files())
    for task in tasks:
        ids = pq.read_table(task.file.file_path.removeprefix("file://"))["id"].to_pylist()
        assert {bucket(i) for i in ids} == {task.file.partition[0]}
    return len(tasks)


@pytest.mark.parametrize("engine", ["dask", "ray"])
def test_engines_split_an_iceberg_table_by_its_spec(request, tmp_path, engine):
    """Dask's write on a cluster and Ray's datasink add the committer's key columns before
    their tasks split the rows: without them a task's file would hold ids of several
    buckets, and the commit would refuse it."""
    pytest.importorskip("pyiceberg_core")
    out = tmp_path / "sales"
    first, d1 = frame(n=60)
    options = {"partition_spec": ["bucket[4](id)"]}
    if engine == "dask":
        client = request.getfixturevalue("client")
        fdask.write_dataset(d1, out, client=client, committer="iceberg", committer_options=options)
    else:
        from dataferry.ray import CommitDatasink

        ray = request.getfixturevalue("local_ray")
        sink = CommitDatasink(out, committer="iceberg", committer_options=options)
        ray_dataset(ray, first).write_datasink(sink)
    assert table_rows("iceberg", out) == rows(first)
    assert files_lie_in_one_bucket(out, 4) >= 4
