"""The Delta commit as dataferry writes it (`delta/entry.py`): one `_delta_log/N.json`
created only if version N is free, holding all of a job's actions, its `commitInfo` in
deltalake's words; read by deltalake (current version, history, time travel), polars and,
where its extension is installed, DuckDB."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import dataferry
from dataferry.errors import DataferryError
from dataferry.store import open_store

deltalake = pytest.importorskip("deltalake")
pl = pytest.importorskip("polars")


def data(start: int = 0, parts: str = "ab") -> pa.Table:
    n = 2 * len(parts)
    return pa.table(
        {"x": pa.array(range(start, start + n), pa.int64()), "p": [c for c in parts for _ in "12"]}
    )


def entry(t: Path, version: int) -> list[dict]:
    return [json.loads(line) for line in (t / "_delta_log" / f"{version:020d}.json").open()]


def info(t: Path, version: int) -> dict:
    return next(a["commitInfo"] for a in entry(t, version) if "commitInfo" in a)


def kinds(t: Path, version: int) -> list[str]:
    return sorted({k for a in entry(t, version) for k in a})


def xs(t: Path) -> list[int]:
    return sorted(pl.read_delta(str(t))["x"].to_list())


def duckdb_rows(t: Path) -> int | None:
    """The table's row count through DuckDB's delta_scan (None: its extension is absent)."""
    duckdb = pytest.importorskip("duckdb")
    try:
        con = duckdb.connect()
        con.execute("LOAD delta")
    except Exception:
        return None
    return con.execute(f"SELECT count(*) FROM delta_scan('{t}')").fetchone()[0]


def test_schema_merge_is_one_version_with_the_new_columns_and_the_files(tmp_path):
    """`schema_mode="merge"` commits metaData (the new columns, nullable), the adds, the
    job's txn and commitInfo in ONE version, as deltalake's own write does. Broken (a
    metadata commit first), the table gets two versions, and a reader of the version in
    between sees the new schema without the rows."""
    t = tmp_path / "t"
    dataferry.write_deltalake(str(t), data(), partition_by=["p"])
    more = data(10).append_column("ts", pa.array([1, 2, 3, 4], pa.timestamp("us")))
    dataferry.write_deltalake(str(t), more, mode="append", schema_mode="merge")
    dt = deltalake.DeltaTable(str(t))
    assert dt.version() == 1
    assert kinds(t, 1) == ["add", "commitInfo", "metaData", "protocol", "txn"]
    assert dt.protocol().reader_features == ["timestampNtz"]  # the new type's feature
    got = dt.to_pyarrow_table().sort_by("x")
    assert got.column("x").to_pylist() == [0, 1, 2, 3, 10, 11, 12, 13]
    assert got.column("ts").null_count == 4
    assert deltalake.DeltaTable(str(t), version=0).to_pyarrow_table().num_rows == 4
    assert pl.read_delta(str(t)).columns == ["x", "p", "ts"]
    assert [h["version"] for h in dt.history()] == [1, 0]


def test_engine_info_names_dataferry(tmp_path):
    """Broken (delta-rs' transaction API writing the commit), engineInfo says
    `delta-rs:py-...`: the log misnames who wrote the version."""
    t = tmp_path / "t"
    dataferry.write_deltalake(str(t), data())
    dataferry.write_dataset(data(9), str(t), committer="delta", mode="append")
    for version in (0, 1):
        assert info(t, version)["engineInfo"].startswith("dataferry/")
        assert info(t, version)["clientVersion"].startswith("dataferry")
    assert deltalake.DeltaTable(str(t)).history(1)[0]["engineInfo"].startswith("dataferry/")
    assert info(t, 1)["clientVersion"] == f"dataferry-{dataferry.__version__}"  # the package's


def test_a_replace_where_logs_its_predicate(tmp_path):
    """operationParameters {mode: Overwrite, partitionBy, predicate} as deltalake's replace
    where logs it. Broken, the predicate is missing: the history cannot say which rows the
    version replaced."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for t in (ours, theirs):
        deltalake.write_deltalake(str(t), data(parts="abc"), partition_by=["p"])
    new = data(100, parts="a")
    dataferry.write_deltalake(str(ours), new, mode="overwrite", predicate="p = 'a'")
    deltalake.write_deltalake(str(theirs), new, mode="overwrite", predicate="p = 'a'")
    assert info(ours, 1)["operationParameters"] == info(theirs, 1)["operationParameters"]
    assert info(ours, 1)["operationParameters"]["predicate"] == "p = 'a'"
    assert xs(ours) == xs(theirs)


def _dataferry(t: Path, table: pa.Table, mode: str, **kw) -> None:
    dataferry.write_deltalake(str(t), table, mode=mode, **kw)


def _deltalake(t: Path, table: pa.Table, mode: str, **kw) -> None:
    deltalake.write_deltalake(str(t), table, mode=mode, **kw)


# (first write's mode, second write's mode, second write's options): each kind of write
WRITES = {
    "create-error": ("error", None, {}),
    "create-append": ("append", None, {}),
    "create-overwrite": ("overwrite", None, {}),
    "append": ("error", "append", {}),
    "overwrite": ("error", "overwrite", {}),
    "replace-where": ("error", "overwrite", {"predicate": "p = 'a'"}),
}


@pytest.mark.parametrize("kind", list(WRITES))
def test_operation_and_parameters_per_kind_of_write_are_deltalakes(tmp_path, kind):
    """Each kind of write is logged with deltalake's operation and operationParameters
    (mode, partitionBy, predicate) and operationMetrics keys. Broken, a created table says
    CREATE TABLE or mode Append, an overwrite Append, a replace where no predicate."""
    first, second, options = WRITES[kind]
    logs = {}
    for name, write in (("ours", _dataferry), ("theirs", _deltalake)):
        t = tmp_path / name
        write(t, data(), first, partition_by=["p"])
        if second is not None:
            new = data(10, parts="a") if options else data(10)
            write(t, new, second, **options)
        logs[name] = info(t, 1 if second else 0)
    ours, theirs = logs["ours"], logs["theirs"]
    assert ours["operation"] == theirs["operation"] == "WRITE"
    assert ours["operationParameters"] == theirs["operationParameters"]
    assert set(ours["operationMetrics"]) == set(theirs["operationMetrics"])
    for key in ("num_added_rows", "num_removed_files"):
        assert ours["operationMetrics"][key] == theirs["operationMetrics"][key], key


def test_a_partition_overwrite_logs_mode_overwrite_and_the_partitions_it_replaced(tmp_path):
    """dataferry's overwrite-partitions is logged as deltalake logs a replace where of the
    same partitions. Broken, the log says Append, or nothing says which partitions went."""
    t = tmp_path / "t"
    dataferry.write_dataset(data(parts="abc"), str(t), committer="delta", partition_by=["p"])
    dataferry.write_dataset(
        data(100, parts="ab"),
        str(t),
        committer="delta",
        partition_by=["p"],
        mode="overwrite-partitions",
    )
    params = info(t, 1)["operationParameters"]
    assert params == {
        "mode": "Overwrite",
        "partitionBy": '["p"]',
        "predicate": "p = 'a' OR p = 'b'",
    }
    assert xs(t) == [4, 5, 100, 101, 102, 103]


def test_every_reader_reads_the_type_zoo_at_every_version(tmp_path):
    """The type zoo created, appended and overwritten by dataferry's own commit files: read
    by deltalake (current version, time travel, history), polars and DuckDB. Broken (an
    action shape a reader does not take), one of them raises or loses rows."""
    from dataferry.verify.type_zoo import type_zoo

    zoo = type_zoo()
    t = tmp_path / "t"
    dataferry.write_deltalake(str(t), zoo, partition_by=["part"])
    dataferry.write_deltalake(str(t), zoo, mode="append")
    dataferry.write_deltalake(str(t), zoo.slice(0, 3), mode="overwrite")
    dt = deltalake.DeltaTable(str(t))
    assert dt.version() == 2
    assert dt.to_pyarrow_table().num_rows == 3
    assert deltalake.DeltaTable(str(t), version=1).to_pyarrow_table().num_rows == 2 * len(zoo)
    assert [h["operationParameters"]["mode"] for h in dt.history()] == [
        "Overwrite",
        "Append",
        "ErrorIfExists",
    ]
    assert pl.read_delta(str(t)).height == 3
    assert pl.read_delta(str(t), version=0).height == len(zoo)
    assert duckdb_rows(t) in (None, 3)


def concurrent(monkeypatch, other_write) -> list[int]:
    """Make `other_write()` run once between dataferry's read of the table and its commit
    file's creation (a single commit's or a group's); the versions dataferry tried to create,
    in order."""
    from dataferry.commit.table.delta import committer, entry, group

    tried: list[int] = []

    def before(real):
        def put(store, *args):
            if not tried:
                other_write()
            real_create = store.create_if_absent

            def create(path, data=b""):
                if path.startswith("_delta_log/"):
                    tried.append(int(path.rsplit("/", 1)[1][:20]))
                return real_create(path, data)

            monkeypatch.setattr(store, "create_if_absent", create)
            return real(store, *args)

        return put

    monkeypatch.setattr(committer, "put_commit", before(entry.put_commit))
    monkeypatch.setattr(group, "lead", before(group.lead))
    return tried


@pytest.mark.parametrize(
    "custom, tried_versions, retries",
    [({"k": "v"}, [1, 2], 1), (None, [2], 0)],
    ids=["single", "group"],
)
def test_an_append_racing_deltalakes_append_is_rebased_on_top_of_it(
    tmp_path, monkeypatch, custom, tried_versions, retries
):
    """deltalake appends between dataferry's read and its commit: a single commit's create of
    that version fails, the winner is read (only adds), and the job's actions go in the
    next version, with num_retries 1 (a group commit, with no custom metadata of its own,
    walks the log first and creates the next version at once). Broken (no put-if-absent),
    deltalake's commit is overwritten and its rows vanish; broken otherwise, the job commits
    twice."""
    from deltalake import CommitProperties

    t = tmp_path / "t"
    dataferry.write_deltalake(str(t), data())
    tried = concurrent(
        monkeypatch, lambda: deltalake.write_deltalake(str(t), data(50), mode="append")
    )
    properties = CommitProperties(custom_metadata=custom) if custom else None
    result = dataferry.write_deltalake(
        str(t), data(100), mode="append", commit_properties=properties
    )
    assert tried == tried_versions
    assert info(t, 1)["engineInfo"].startswith("delta-rs")  # deltalake's, untouched
    assert info(t, 2)["operationMetrics"]["num_retries"] == retries
    assert xs(t) == [0, 1, 2, 3, 50, 51, 52, 53, 100, 101, 102, 103]
    uuid = result.run.job.job_uuid
    dt = deltalake.DeltaTable(str(t))
    assert sum(1 for h in dt.history() if h.get("dataferry.job_uuid") == uuid) == 1
    assert dt.transaction_version(f"dataferry-{uuid}") == 1


def test_an_overwrite_racing_an_append_is_a_conflict_that_commits_nothing(tmp_path, monkeypatch):
    """An overwrite read the files it removes: a commit since then makes it a conflict
    (as delta-rs' own overwrite). Broken (rebased), the rows deltalake appended meanwhile
    would be kept beside the overwrite's, or removed without being read."""
    t = tmp_path / "t"
    dataferry.write_deltalake(str(t), data())
    concurrent(monkeypatch, lambda: deltalake.write_deltalake(str(t), data(50), mode="append"))
    with pytest.raises(DataferryError, match="conflicts with a commit made since"):
        dataferry.write_deltalake(str(t), data(100), mode="overwrite")
    assert deltalake.DeltaTable(str(t)).version() == 1
    assert xs(t) == [0, 1, 2, 3, 50, 51, 52, 53]
    live = set(pa.table(deltalake.DeltaTable(str(t)).get_add_actions()).column("path").to_pylist())
    assert {p.relative_to(t).as_posix() for p in t.rglob("*.parquet")} == live  # job's undone


def test_an_existing_commit_file_is_never_overwritten(tmp_path, monkeypatch):
    """A commit file of the version dataferry meant to write is already there (another
    writer's, here written by hand between the read and the commit): its bytes are kept and
    the job's version comes after it. Broken (a plain write), the other commit is replaced
    and what it committed is lost."""
    t = tmp_path / "t"
    dataferry.write_deltalake(str(t), data())
    theirs = (
        json.dumps({"commitInfo": {"operation": "WRITE", "timestamp": 1}})
        + "\n"
        + json.dumps({"txn": {"appId": "someone", "version": 7, "lastUpdated": 1}})
        + "\n"
    ).encode()
    path = t / "_delta_log" / f"{1:020d}.json"
    concurrent(monkeypatch, lambda: path.write_bytes(theirs))
    dataferry.write_deltalake(str(t), data(100), mode="append")
    assert path.read_bytes() == theirs
    dt = deltalake.DeltaTable(str(t))
    assert dt.version() == 2 and dt.transaction_version("someone") == 7
    assert xs(t) == [0, 1, 2, 3, 100, 101, 102, 103]


def test_put_commit_rebases_over_adds_but_not_over_a_schema_change(tmp_path):
    """The race's rules, on the store alone: a version taken by adds is passed (a rebase,
    counted); a winner holding the job's own txn is the job's commit (found, nothing written
    again); a winner changing metaData, or no rebase left, is a conflict; a taken file is
    never rewritten. Broken, a job rebases over a schema it never checked, or commits
    twice, or overwrites a version."""
    from dataferry.commit.table.delta.entry import VersionTaken, encode, entry_path, put_commit

    store = open_store(str(tmp_path))

    def put(version: int, rebases: int = 3, app: str = "me"):
        mine = [{"txn": {"appId": app, "version": 1, "lastUpdated": 1}}]
        return put_commit(store, version, lambda _: mine, app, rebases)

    store.write_bytes(entry_path(0), encode([{"add": {"path": "f", "size": 1}}]))
    first = put(0)
    assert (first.version, first.rebases, first.found) == (1, 1, False)
    again = put(0)  # the same job once more (its answer lost): found at 1, not made again
    assert (again.version, again.found) == (1, True)
    assert not store.exists(entry_path(2))
    with pytest.raises(VersionTaken, match="no rebase left"):
        put(0, rebases=0, app="other")
    store.write_bytes(entry_path(2), encode([{"metaData": {"id": "x"}}]))
    before = store.read_bytes(entry_path(2))
    with pytest.raises(VersionTaken, match="metaData"):
        put(2, app="other")
    assert store.read_bytes(entry_path(2)) == before and not store.exists(entry_path(3))


def test_table_properties_dataferry_cannot_keep_are_refused_before_any_write(tmp_path):
    """A property deltalake refuses, or one whose feature dataferry's commits would break
    (column mapping, deletion vectors), is refused naming it, before any file is written.
    Broken, the table is created claiming a feature its files do not honour."""
    from dataferry.errors import ConfigError

    t = tmp_path / "t"
    for key in ("delta.columnMapping.mode", "delta.enableDeletionVectors", "my.key"):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            dataferry.write_deltalake(str(t), data(), configuration={key: "name"})
    assert not t.exists() or not any(t.rglob("*.parquet"))
    dataferry.write_deltalake(str(t), data(), configuration={"delta.enableChangeDataFeed": "true"})
    assert deltalake.DeltaTable(str(t)).protocol().min_writer_version == 4  # as deltalake's


def test_a_table_whose_writers_must_keep_a_feature_dataferry_does_not_is_refused(tmp_path):
    """A table deltalake created with column mapping: dataferry's files carry logical
    names, so it refuses before writing. Broken, the commit lands files every reader
    reads as nulls."""
    from dataferry.errors import ConfigError

    t = tmp_path / "t"
    deltalake.write_deltalake(str(t), data(), configuration={"delta.columnMapping.mode": "name"})
    with pytest.raises(ConfigError, match="columnMapping"):
        dataferry.write_deltalake(str(t), data(10), mode="append")
    assert deltalake.DeltaTable(str(t)).version() == 0


def test_a_checkpoint_is_made_by_deltalake_after_the_commit(tmp_path):
    """At the table's checkpoint interval deltalake checkpoints the version dataferry
    committed, and readers start from it. Broken, no checkpoint: reading a long-lived
    table replays every commit file."""
    t = tmp_path / "t"
    dataferry.write_deltalake(str(t), data(), configuration={"delta.checkpointInterval": "2"})
    dataferry.write_deltalake(str(t), data(10), mode="append")
    assert (t / "_delta_log" / f"{1:020d}.checkpoint.parquet").exists()
    assert xs(t) == [0, 1, 2, 3, 10, 11, 12, 13]
    assert pc.sum(deltalake.DeltaTable(str(t)).to_pyarrow_table().column("x")).as_py() == 52


def test_deletion_vectors_take_appends_and_refuse_removes(tmp_path):
    """A table with deletion vectors (deltalake's): an append lands, an overwrite (whose
    removes would have to name each file's vector) is refused naming the feature, and an
    append-only table refuses an overwrite. Broken, dataferry removes files a vector still
    names, or files an append-only table must keep."""
    from dataferry.errors import ConfigError

    dv, ao = tmp_path / "dv", tmp_path / "ao"
    deltalake.write_deltalake(
        str(dv), data(), configuration={"delta.enableDeletionVectors": "true"}
    )
    dataferry.write_deltalake(str(dv), data(10), mode="append")
    assert xs(dv) == [0, 1, 2, 3, 10, 11, 12, 13]
    with pytest.raises(ConfigError, match="deletionVectors"):
        dataferry.write_deltalake(str(dv), data(20), mode="overwrite")
    dataferry.write_deltalake(str(ao), data(), configuration={"delta.appendOnly": "true"})
    with pytest.raises(ConfigError, match="append-only"):
        dataferry.write_deltalake(str(ao), data(20), mode="overwrite")
    assert deltalake.DeltaTable(str(dv)).version() == 1 and xs(ao) == [0, 1, 2, 3]


@pytest.mark.parametrize("committer", ["delta", "iceberg", "hudi"])
def test_the_files_a_table_references_are_named_as_the_store_names_them(tmp_path, committer):
    """Delta logs `p=a b%/` as `p=a%20b%2525/`. Compared with store listings and markers in
    that form, a committed file reads as one no version references: a zombie's or a forged
    marker's rollback would delete it, and the format's own reader could not open it."""
    from dataferry.commit.factory import make_committer

    table = pa.table({"p": ["a b%", "x/y", "é", "q?#"], "v": [1, 2, 3, 4]})
    dest = tmp_path / committer
    options = {"record_key": "v"} if committer == "hudi" else {}
    dataferry.write_dataset(
        table, str(dest), partition_by=["p"], committer=committer, committer_options=options
    )
    store = open_store(str(dest))
    on_disk = {
        str(f.relative_to(dest)) for f in dest.rglob("*.parquet") if "metadata" not in f.parts
    }
    c = make_committer(committer, store, **options)
    assert c.referenced_files() == on_disk
    assert set(c.table_files()) == on_disk
    assert sorted(c.read_rows().column("v").to_pylist()) == [1, 2, 3, 4]
