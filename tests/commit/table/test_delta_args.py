"""`dataferry.write_deltalake` takes deltalake 1.x's arguments as deltalake means them
(predicate, writer_properties, commit_properties, post_commithook_properties, schema_mode
"overwrite", partition_by taken from the table), and its log entries say what deltalake's
say (operation parameters' mode, operationMetrics), checked against deltalake writing the same
frames."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dataferry
from dataferry.errors import ConfigError, DataferryError

deltalake = pytest.importorskip("deltalake")
pl = pytest.importorskip("polars")


def data(start: int = 0, parts: str = "ab") -> pa.Table:
    n = 2 * len(parts)
    return pa.table(
        {"x": pa.array(range(start, start + n), pa.int64()), "p": [c for c in parts for _ in "12"]}
    )


def commit_info(t: Path, version: int) -> dict:
    for line in (t / "_delta_log" / f"{version:020d}.json").open():
        action = json.loads(line)
        if "commitInfo" in action:
            return action["commitInfo"]
    raise AssertionError("no commitInfo")


def rows(t: Path) -> list[tuple[int, str]]:
    got = pl.read_delta(str(t)).sort("x")
    return list(zip(got["x"].to_list(), got["p"].to_list(), strict=True))


def test_commit_properties_are_kept_beside_the_jobs_own(tmp_path):
    """Custom metadata lands in the commit's commitInfo (and the table's history), the app
    transaction in the table beside the job's, max_commit_retries as the committer's retries.
    Broken, deltalake's CommitProperties is refused ("did you mean 'encryption_properties'?")."""
    from deltalake import CommitProperties
    from deltalake.transaction import Transaction

    t = tmp_path / "t"
    props = CommitProperties(
        custom_metadata={"pipeline": "nightly", "run": 7},
        max_commit_retries=4,
        app_transactions=[Transaction("my-app", 5)],
    )
    result = dataferry.write_deltalake(str(t), data(), commit_properties=props)
    info = commit_info(t, 0)
    assert info["pipeline"] == "nightly" and info["run"] == 7
    assert info["dataferry.job_uuid"] == result.run.job.job_uuid
    table = deltalake.DeltaTable(str(t))
    assert table.transaction_version("my-app") == 5
    assert table.history(1)[0]["pipeline"] == "nightly"
    assert result.run.job.config.commit_retries == 4


def test_a_custom_key_the_commit_sets_itself_is_refused_before_anything_is_written(tmp_path):
    """The commit sets engineInfo itself: at commit time the key would clash after the job's
    commit was decided."""
    from deltalake import CommitProperties

    t = tmp_path / "t"
    with pytest.raises(ConfigError, match="'engineInfo' is set by dataferry"):
        dataferry.write_deltalake(
            str(t), data(), commit_properties=CommitProperties(custom_metadata={"engineInfo": 1})
        )
    assert not t.exists() or not any(t.rglob("*.parquet"))


def test_writer_properties_reach_the_parquet_files(tmp_path):
    """Compression with its level and the row group size, as deltalake's WriterProperties
    say them. Broken, the files are snappy with one row group."""
    from deltalake import WriterProperties

    t = tmp_path / "t"
    props = WriterProperties(compression="ZSTD", compression_level=3, max_row_group_size=1)
    dataferry.write_deltalake(str(t), data(parts="a"), writer_properties=props)
    meta = pq.ParquetFile(next(t.glob("*.parquet"))).metadata
    assert meta.num_row_groups == 2
    assert meta.row_group(0).column(0).compression == "ZSTD"


def test_post_commit_hooks_are_deltalakes(tmp_path):
    """With a checkpoint every version, deltalake's create_checkpoint=False makes none and
    the default makes one."""
    from deltalake import PostCommitHookProperties

    every = {"delta.checkpointInterval": "1"}
    off = PostCommitHookProperties(create_checkpoint=False)
    dataferry.write_deltalake(
        str(tmp_path / "off"), data(), configuration=every, post_commithook_properties=off
    )
    dataferry.write_deltalake(str(tmp_path / "on"), data(), configuration=every)
    dataferry.write_deltalake(
        str(tmp_path / "off"), data(9), mode="append", post_commithook_properties=off
    )
    dataferry.write_deltalake(str(tmp_path / "on"), data(9), mode="append")
    assert not list((tmp_path / "off" / "_delta_log").glob("*.checkpoint*.parquet"))
    assert list((tmp_path / "on" / "_delta_log").glob("*.checkpoint*.parquet"))


def test_an_append_without_partition_by_takes_the_tables_partitioning(tmp_path):
    """As deltalake does. Broken: "partitioned by ['p']; the write gives partition_by=[]"."""
    t = tmp_path / "t"
    deltalake.write_deltalake(str(t), data(), partition_by=["p"])
    dataferry.write_deltalake(str(t), data(10), mode="append")
    assert deltalake.DeltaTable(str(t)).metadata().partition_columns == ["p"]
    assert len(rows(t)) == 8
    assert all(p.parent.name.startswith("p=") for p in t.rglob("*.parquet"))


def test_schema_mode_overwrite_replaces_the_schema_as_deltalake_does(tmp_path):
    """Only with mode="overwrite"; an overwrite without it refuses another schema, as
    deltalake's does ("Field z not found in schema")."""
    t = tmp_path / "t"
    dataferry.write_deltalake(str(t), data(), partition_by=["p"])
    other = pa.table({"z": ["q", "r"], "p": ["a", "b"]})
    with pytest.raises(ConfigError, match="schema_mode='overwrite'"):
        dataferry.write_deltalake(str(t), other, mode="overwrite")
    with pytest.raises(ConfigError, match="only mode='overwrite'"):
        dataferry.write_deltalake(str(t), other, mode="append", schema_mode="overwrite")
    dataferry.write_deltalake(str(t), other, mode="overwrite", schema_mode="overwrite")
    table = deltalake.DeltaTable(str(t))
    assert pa.schema(table.schema().to_arrow()).names == ["z", "p"]
    assert table.metadata().partition_columns == ["p"]  # kept, as deltalake keeps it
    assert sorted(pl.read_delta(str(t))["z"].to_list()) == ["q", "r"]


def test_a_predicate_replaces_only_the_partitions_it_selects_as_deltalakes_does(tmp_path):
    """Replace where, on a partition column: the same rows as deltalake's, in one version
    logged as an overwrite. Broken: "unknown parquet writer option 'predicate'"."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for t in (ours, theirs):
        deltalake.write_deltalake(str(t), data(parts="abc"), partition_by=["p"])
    new = data(100, parts="a")
    dataferry.write_deltalake(str(ours), new, mode="overwrite", predicate="p = 'a'")
    deltalake.write_deltalake(str(theirs), new, mode="overwrite", predicate="p = 'a'")
    assert rows(ours) == rows(theirs)
    assert [p for _, p in rows(ours)].count("b") == 2
    assert deltalake.DeltaTable(str(ours)).version() == 1
    assert commit_info(ours, 1)["operationParameters"]["mode"] == "Overwrite"
    assert commit_info(ours, 1)["operationMetrics"]["num_removed_files"] == 1


def test_rows_outside_the_predicate_are_refused_and_nothing_is_committed(tmp_path):
    t = tmp_path / "t"
    deltalake.write_deltalake(str(t), data(), partition_by=["p"])
    before = rows(t)
    with pytest.raises(DataferryError, match="do not match predicate"):
        dataferry.write_deltalake(str(t), data(50), mode="overwrite", predicate="p IN ('a')")
    assert rows(t) == before and deltalake.DeltaTable(str(t)).version() == 0
    assert len(list(t.rglob("*.parquet"))) == 2  # the job's files are gone


@pytest.mark.parametrize(
    ("predicate", "match"),
    [("x > 3", "only = and IN"), ("x = 1", "not a partition column"), ("p = 'a' OR", "not AND")],
)
def test_a_predicate_dataferry_cannot_honour_is_refused_naming_it(tmp_path, predicate, match):
    t = tmp_path / "t"
    deltalake.write_deltalake(str(t), data(), partition_by=["p"])
    with pytest.raises(ConfigError, match=match):
        dataferry.write_deltalake(str(t), data(parts="a"), mode="overwrite", predicate=predicate)
    with pytest.raises(ConfigError, match="only mode='overwrite'"):
        dataferry.write_deltalake(str(t), data(parts="a"), mode="append", predicate="p = 'a'")


@pytest.mark.parametrize("mode", ["error", "overwrite"])
def test_the_log_says_what_deltalakes_says(tmp_path, mode):
    """Creation logged with the write's mode (ErrorIfExists, Overwrite) and an overwrite as
    Overwrite; operationMetrics with deltalake's names and counts; clientVersion naming
    dataferry. Broken, creation says mode Append and no operationMetrics."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    dataferry.write_deltalake(str(ours), data(), partition_by=["p"], mode=mode)
    deltalake.write_deltalake(str(theirs), data(), partition_by=["p"], mode=mode)
    dataferry.write_deltalake(str(ours), data(10), partition_by=["p"], mode="overwrite")
    deltalake.write_deltalake(str(theirs), data(10), partition_by=["p"], mode="overwrite")
    for version in (0, 1):
        a, b = commit_info(ours, version), commit_info(theirs, version)
        assert a["operationParameters"]["mode"] == b["operationParameters"]["mode"]
        assert set(a["operationMetrics"]) == set(b["operationMetrics"])
        for key in ("num_added_files", "num_removed_files", "num_added_rows"):
            assert a["operationMetrics"][key] == b["operationMetrics"][key], key
        assert a["clientVersion"].startswith("dataferry")


@pytest.mark.parametrize("parts", [[], ["z"]])
def test_schema_mode_overwrite_with_partition_by_replaces_the_partitioning(tmp_path, parts):
    """As deltalake's: the table is partitioned as the write says, and every value reads
    back. Broken, the log keeps ['p'] while the files hold p: p reads back as null."""
    t = tmp_path / "t"
    dataferry.write_deltalake(str(t), data(), partition_by=["p"], name="kept")
    other = pa.table({"z": ["q", "r"], "p": ["a", "b"]})
    dataferry.write_deltalake(
        str(t), other, mode="overwrite", schema_mode="overwrite", partition_by=parts
    )
    table = deltalake.DeltaTable(str(t))
    assert table.metadata().partition_columns == parts
    assert table.metadata().name == "kept"
    got = pl.read_delta(str(t)).sort("z")
    assert got["p"].to_list() == ["a", "b"] and got["z"].to_list() == ["q", "r"]
    assert deltalake.DeltaTable(str(t), version=0).to_pyarrow_table().num_rows == 4


def test_a_partition_overwrite_is_logged_as_an_overwrite(tmp_path):
    """dataferry's overwrite-partitions is deltalake's overwrite of the partitions written:
    logged with mode Overwrite (broken: mode Append, as if rows were only added), the other
    partitions kept."""
    t = tmp_path / "t"
    dataferry.write_dataset(data(parts="abc"), str(t), committer="delta", partition_by=["p"])
    dataferry.write_dataset(
        data(100, parts="ab"),
        str(t),
        committer="delta",
        partition_by=["p"],
        mode="overwrite-partitions",
    )
    info = commit_info(t, 1)
    assert info["operationParameters"]["mode"] == "Overwrite"
    assert info["operationMetrics"]["num_removed_files"] == 2
    assert rows(t) == [(4, "c"), (5, "c"), (100, "a"), (101, "a"), (102, "b"), (103, "b")]


def test_a_partition_overwrite_of_some_combinations_replaces_only_those(tmp_path):
    """Partitions (x,1) and (y,2) of a table by (a, b): `a IN (x,y) AND b IN (1,2)` would
    also take (x,2) and (y,1), so those are removed file by file instead. Broken, a
    partition the job did not write loses its rows."""
    t = tmp_path / "t"
    grid = pa.table({"v": [1, 2, 3, 4], "a": ["x", "x", "y", "y"], "b": [1, 2, 1, 2]})
    dataferry.write_dataset(grid, str(t), committer="delta", partition_by=["a", "b"])
    new = pa.table({"v": [10, 40], "a": ["x", "y"], "b": [1, 2]})
    dataferry.write_dataset(
        new, str(t), committer="delta", partition_by=["a", "b"], mode="overwrite-partitions"
    )
    got = pl.read_delta(str(t)).sort("v")
    assert got["v"].to_list() == [2, 3, 10, 40]


def test_a_predicate_on_the_empty_partition_replaces_only_it(tmp_path):
    """deltalake's partition filters read '' as null: the '' partition is removed file by
    file instead. Broken, the null partition goes too, or the old '' rows stay."""
    t = tmp_path / "t"
    schema = pa.schema([("x", pa.int64()), ("p", pa.string())])
    first = pa.table({"x": [0, 1, 2], "p": ["", None, "a"]}, schema=schema)
    dataferry.write_deltalake(str(t), first, partition_by=["p"])
    new = pa.table({"x": [10], "p": [""]}, schema=schema)
    dataferry.write_deltalake(str(t), new, mode="overwrite", predicate="p = ''")
    assert rows(t) == [(1, None), (2, "a"), (10, "")]
