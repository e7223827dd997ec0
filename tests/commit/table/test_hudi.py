"""The Hudi committer: copy-on-write instants on a timeline dataferry writes, read back by
hudi-rs (the `hudi` package) row for row; failed and crashed jobs leave no rows, no files of
their instant and no pending instant; overwrites are replacecommits whose replaced file groups
hudi-rs hides (and time travel still reads)."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pytest

import dataferry
from dataferry.commit.job.cleanup import CLAIM_PATH as CLAIM
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.table.hudi import HudiCommitter, HudiConfig
from dataferry.commit.table.hudi.avro_meta import read_avro_file
from dataferry.commit.table.hudi.timeline import (
    next_instant,
    parse_base_file_name,
    parse_properties,
)
from dataferry.errors import ConfigError, InjectedCrash, TableCommitConflict
from dataferry.store import open_store
from dataferry.store.faults import FaultRule, Op

hudi = pytest.importorskip("hudi")

OPTIONS = {"table_name": "t", "record_key": "x"}
TOKEN = "t0ken"
COMPLETED = (".commit", ".replacecommit")


def rows(n: int, start: int = 0) -> pa.Table:
    return pa.table(
        {
            "x": list(range(start, start + n)),
            "day": [f"2024-01-0{1 + i % 3}" for i in range(start, start + n)],
            "v": [i * 0.5 for i in range(start, start + n)],
        }
    )


def read_hudi(path, as_of: str = "") -> pa.Table:
    options = hudi.HudiReadOptions().with_as_of_timestamp(as_of) if as_of else None
    batches = hudi.HudiTableBuilder.from_base_uri(str(path)).build().read(options)
    if not batches:
        return pa.table({"x": pa.array([], pa.int64())})
    return pa.Table.from_batches(batches).sort_by("x")


def write(data: pa.Table, dest, partition_by=("day",), **kw):
    options = {**OPTIONS, **kw.pop("committer_options", {})}
    return dataferry.write_dataset(
        data,
        dest,
        partition_by=list(partition_by),
        committer="hudi",
        committer_options=options,
        mode=kw.pop("mode", "append"),
        **kw,
    )


def data_files(path) -> set[str]:
    return {
        p.relative_to(path).as_posix()
        for p in path.rglob("*.parquet")
        if ".hoodie" not in p.relative_to(path).parts
    }


def timeline(path) -> list[str]:
    return sorted(p.name for p in (path / ".hoodie").iterdir() if p.is_file())


def assert_no_orphans(path) -> None:
    """Every data file on disk is a base file of a completed instant, and no marker is left."""
    completed = {n.split(".")[0] for n in timeline(path) if n.endswith(COMPLETED)}
    for f in data_files(path):
        parsed = parse_base_file_name(f.rsplit("/", 1)[-1])
        assert parsed is not None and parsed[2] in completed, f
    assert not list((path / ".hoodie").glob(".temp/*"))


def test_two_appends_read_back_by_hudi_rs_row_for_row(tmp_path):
    path = tmp_path / "t"
    write(rows(10), str(path))
    write(rows(7, start=10), str(path))
    got = read_hudi(path)
    want = pa.concat_tables([rows(10), rows(7, start=10)]).sort_by("x")
    assert got.select(["x", "day", "v"]).to_pylist() == want.to_pylist()
    names = timeline(path)
    assert sum(n.endswith(".commit") for n in names) == 2
    assert sum(n.endswith(".inflight") for n in names) == 2
    props = parse_properties((path / ".hoodie" / "hoodie.properties").read_bytes())
    assert props["hoodie.table.name"] == "t"
    assert props["hoodie.table.partition.fields"] == "day"
    assert props["hoodie.table.recordkey.fields"] == "x"
    assert props["hoodie.table.version"] == "6"
    assert props["hoodie.timeline.layout.version"] == "1"
    instants = [n.split(".")[0] for n in names if n.endswith(".commit")]
    meta = json.loads((path / ".hoodie" / f"{instants[0]}.commit").read_bytes())
    stats = [s for ss in meta["partitionToWriteStats"].values() for s in ss]
    assert sum(s["numInserts"] for s in stats) == 10
    assert all(s["path"].startswith(s["partitionPath"] + "/") for s in stats)
    assert json.loads(meta["extraMetadata"]["schema"])["type"] == "record"
    assert meta["operationType"] == "UPSERT"  # Hudi's default write operation
    for f in data_files(path):
        fid, _token, instant = parse_base_file_name(f.rsplit("/", 1)[-1])
        assert "_" not in fid and fid.endswith("-0") and instant in instants
    assert_no_orphans(path)


def test_unpartitioned_table(tmp_path):
    path = tmp_path / "flat"
    write(rows(5), str(path), partition_by=())
    write(rows(5, start=5), str(path), partition_by=())
    assert read_hudi(path).column("x").to_pylist() == list(range(10))
    props = parse_properties((path / ".hoodie" / "hoodie.properties").read_bytes())
    assert props["hoodie.table.partition.fields"] == ""
    assert "Nonpartitioned" in props["hoodie.table.keygenerator.class"]


def test_a_failed_job_is_rolled_back(tmp_path):
    path = tmp_path / "t"
    write(rows(6), str(path))
    before = data_files(path)

    def fail(job):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        write(rows(6, start=100), str(path), before_job_commit=fail)
    assert read_hudi(path).column("x").to_pylist() == list(range(6))
    assert data_files(path) == before  # no file of the failed instant
    names = timeline(path)
    assert sum(n.endswith(".commit") for n in names) == 1
    assert sum(n.endswith(".inflight") for n in names) == 1  # the completed instant's only
    rollbacks = [n for n in names if n.endswith(".rollback")]
    assert len(rollbacks) == 1
    meta = read_avro_file((path / ".hoodie" / rollbacks[0]).read_bytes())
    assert meta["totalFilesDeleted"] >= 1
    assert_no_orphans(path)


def test_mismatched_partitions_and_versions_are_refused(tmp_path):
    path = tmp_path / "t"
    write(rows(3), str(path))
    with pytest.raises(ConfigError, match=r"partitioned by \['day'\]"):
        write(rows(3), str(path), partition_by=())
    with pytest.raises(ConfigError, match="table_version"):
        write(rows(3), str(path), committer_options={"table_version": 8})
    assert read_hudi(path).num_rows == 3
    assert_no_orphans(path)


def test_a_crash_before_the_intent_is_rolled_back_by_the_next_job(tmp_path):
    path = tmp_path / "t"
    write(rows(4), str(path))
    crash = FaultRule(
        action="crash", when="before", kinds=frozenset({Op.WRITE}), path_glob="*_commit_intent*"
    )
    with pytest.raises(InjectedCrash):
        write(rows(5, start=50), open_store(str(path), faults=[crash]))
    assert read_hudi(path).num_rows == 4  # the dead instant's files are hidden
    write(rows(2, start=90), str(path))  # its setup recovers the dead job first
    assert read_hudi(path).column("x").to_pylist() == [*range(4), 90, 91]
    assert any(n.endswith(".rollback") for n in timeline(path))
    assert_no_orphans(path)


def test_marker_service(tmp_path):
    from dataferry.markers.process import MarkerServiceProcess

    path = tmp_path / "t"
    with MarkerServiceProcess(str(path), token=TOKEN, batch_interval_ms=20) as svc:
        options = {"markers": "service", "service_url": svc.url, "service_token": TOKEN}
        write(rows(8), str(path), committer_options=options)

        def fail(job):
            raise RuntimeError("boom")

        with pytest.raises(RuntimeError):
            write(rows(3, start=20), str(path), committer_options=options, before_job_commit=fail)
    assert read_hudi(path).column("x").to_pylist() == list(range(8))
    assert_no_orphans(path)


def test_instants_are_strictly_increasing():
    assert next_instant(["20991231235959999"]) == "21000101000000000"
    assert next_instant(["20240101000000"]) > "20240101000000000"


def test_mode_error_creates_the_table_then_refuses_it(tmp_path):
    path = tmp_path / "e"
    write(rows(3), str(path), mode="error")
    assert read_hudi(path).num_rows == 3
    with pytest.raises(Exception, match=r"already exists|not empty"):
        write(rows(3, start=10), str(path), mode="error")
    assert read_hudi(path).num_rows == 3
    assert_no_orphans(path)


# --- overwrites: replacecommits ---------------------------------------------------------------


def committer(path) -> HudiCommitter:
    return HudiCommitter(open_store(str(path)), HudiConfig())


def instants(path, action: str) -> list[str]:
    return [n.split(".")[0] for n in timeline(path) if n.endswith(f".{action}")]


def replacecommit(path, instant: str) -> dict:
    return json.loads((path / ".hoodie" / f"{instant}.replacecommit").read_bytes())


def test_overwrite_partitions_replaces_the_partitions_written(tmp_path):
    path = tmp_path / "t"
    write(rows(9), str(path))  # days 01, 02, 03
    first = instants(path, "commit")[0]
    old = data_files(path)
    new = pa.table({"x": [100, 101], "day": ["2024-01-02"] * 2, "v": [1.0, 2.0]})
    write(new, str(path), mode="overwrite-partitions")
    got = read_hudi(path).select(["x", "day", "v"])
    kept = [r for r in rows(9).to_pylist() if r["day"] != "2024-01-02"]
    assert got.to_pylist() == sorted([*kept, *new.to_pylist()], key=lambda r: r["x"])
    (t,) = instants(path, "replacecommit")
    names = timeline(path)
    assert f"{t}.replacecommit.requested" in names and f"{t}.replacecommit.inflight" in names
    meta = replacecommit(path, t)
    assert meta["operationType"] == "INSERT_OVERWRITE"
    old_ids = {f.split("/")[0]: parse_base_file_name(f.rsplit("/", 1)[-1])[0] for f in sorted(old)}
    assert meta["partitionToReplaceFileIds"] == {"day=2024-01-02": [old_ids["day=2024-01-02"]]}
    assert old <= data_files(path)  # the replaced slice stays until Hudi's cleaner runs
    assert read_hudi(path, as_of=first).select(["x", "day", "v"]).to_pylist() == (
        rows(9).to_pylist()
    )
    c = committer(path)
    assert c.referenced_files() == data_files(path)
    assert set(c.table_files()) == data_files(path) - {
        f for f in old if f.startswith("day=2024-01-02/")
    }
    assert_no_orphans(path)


def test_overwrite_replaces_the_whole_table_and_time_travel_sees_the_old_rows(tmp_path):
    path = tmp_path / "t"
    write(rows(6), str(path))
    write(rows(3, start=6), str(path))
    before = instants(path, "commit")[-1]
    write(rows(2, start=50), str(path), mode="overwrite")
    assert read_hudi(path).column("x").to_pylist() == [50, 51]
    assert read_hudi(path, as_of=before).column("x").to_pylist() == list(range(9))
    (t,) = instants(path, "replacecommit")
    meta = replacecommit(path, t)
    assert meta["operationType"] == "INSERT_OVERWRITE_TABLE"
    replaced = meta["partitionToReplaceFileIds"]
    assert sorted(replaced) == ["day=2024-01-01", "day=2024-01-02", "day=2024-01-03"]
    assert sum(len(ids) for ids in replaced.values()) == 6  # both commits' file groups
    c = committer(path)
    assert c.read_rows().sort_by("x").column("x").to_pylist() == [50, 51]
    assert len(c.table_files()) == 2 and c.referenced_files() == data_files(path)
    write(rows(2, start=70), str(path))  # an append after the overwrite adds to it
    assert read_hudi(path).column("x").to_pylist() == [50, 51, 70, 71]
    assert_no_orphans(path)


def test_a_failed_overwrite_is_rolled_back(tmp_path):
    path = tmp_path / "t"
    write(rows(6), str(path))
    before = data_files(path)

    def fail(job):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        write(rows(2, start=100), str(path), mode="overwrite", before_job_commit=fail)
    assert read_hudi(path).column("x").to_pylist() == list(range(6))
    assert data_files(path) == before
    assert not [n for n in timeline(path) if "replacecommit" in n]
    (rollback,) = [n for n in timeline(path) if n.endswith(".rollback")]
    meta = read_avro_file((path / ".hoodie" / rollback).read_bytes())
    assert meta["instantsRollback"][0]["action"] == "replacecommit"
    assert_no_orphans(path)


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_crashed_overwrite_is_rolled_forward_once(tmp_path, when):
    path = tmp_path / "t"
    write(rows(4), str(path))
    crash = FaultRule(action="crash", when=when, kinds=frozenset({Op.TABLE_COMMIT}))
    with pytest.raises(InjectedCrash):
        write(rows(3, start=50), open_store(str(path), faults=[crash]), mode="overwrite")
    cleanup_destination(open_store(str(path)))
    assert read_hudi(path).column("x").to_pylist() == [50, 51, 52]
    (t,) = instants(path, "replacecommit")
    uuid = replacecommit(path, t)["extraMetadata"]["dataferry.job-uuid"]
    assert committer(path).commits_of_job(uuid) == 1
    assert_no_orphans(path)


def test_an_overwrite_conflicts_with_a_commit_made_since_its_plan(tmp_path):
    path = tmp_path / "t"
    write(rows(3), str(path))
    (first,) = instants(path, "commit")

    def another_writer(index, op, p):  # a commit lands between the plan and the commit
        meta = json.loads((path / ".hoodie" / f"{first}.commit").read_bytes())
        stats = meta["partitionToWriteStats"]["day=2024-01-01"]
        t = next_instant([first, *instants(path, "inflight")])
        src = stats[0]["path"]
        fid = "0a0a0a0a-0000-0000-0000-000000000000-0"
        dst = f"day=2024-01-01/{fid}_0-0-0_{t}.parquet"
        shutil.copy(path / src, path / dst)
        meta["partitionToWriteStats"] = {
            "day=2024-01-01": [{**stats[0], "fileId": fid, "path": dst}]
        }
        meta["extraMetadata"] = {}
        (path / ".hoodie" / f"{t}.commit").write_text(json.dumps(meta))

    hook = FaultRule(action="callback", kinds=frozenset({Op.TABLE_COMMIT}), callback=another_writer)
    with pytest.raises(TableCommitConflict, match="changed since"):
        write(rows(2, start=50), open_store(str(path), faults=[hook]), mode="overwrite")
    assert read_hudi(path).column("x").to_pylist() == [0, 0, 1, 2]  # nothing replaced
    assert not instants(path, "replacecommit")
    assert_no_orphans(path)


def test_the_referee_hooks(tmp_path):
    path = tmp_path / "t"
    c = committer(path)
    assert c.read_rows() is None and c.referenced_files() == set()
    write(rows(5), str(path))
    (t,) = instants(path, "commit")
    meta = json.loads((path / ".hoodie" / f"{t}.commit").read_bytes())
    uuid = meta["extraMetadata"]["dataferry.job-uuid"]
    assert c.read_rows().sort_by("x").select(["x", "day", "v"]).to_pylist() == rows(5).to_pylist()
    assert c.referenced_files() == data_files(path)
    assert c.commits_of_job(uuid) == 1 and c.commits_of_job("someone-else") == 0
    # the same job's metadata under a second instant: applied twice
    t2 = next_instant([t])
    (path / ".hoodie" / f"{t2}.commit").write_text(
        json.dumps({**meta, "partitionToWriteStats": {}})
    )
    assert c.commits_of_job(uuid) == 2


def test_a_late_attempt_of_a_completed_instant_writes_nothing(tmp_path):
    """hudi-rs shows every file of a completed instant, listed by its commit or not: an
    attempt that marks a file after its job committed (a zombie) is refused, and the table
    reads as the job committed it."""
    from dataferry.commit.lookup import committer_for
    from dataferry.errors import CommitError

    result = write(rows(40), tmp_path / "t")
    job = result.run.job
    late = job.task(0, 9)
    with pytest.raises(CommitError, match="has completed: this attempt is late"):
        committer_for(late).write_file(late, "day=2024-01-01/late.parquet", b"PAR1")
    assert read_hudi(tmp_path / "t").num_rows == 40
    cleanup_destination(open_store(str(tmp_path / "t")), older_than_s=0)  # its marker
    assert read_hudi(tmp_path / "t").num_rows == 40
    assert_no_orphans(tmp_path / "t")


def test_a_late_attempt_after_an_overwrites_replacecommit_writes_nothing(tmp_path):
    """An overwrite completes as a `replacecommit`, not a `commit`. Were only `.commit` taken
    as completed, a zombie attempt of the overwrite would add a base file of the completed
    instant, which hudi-rs shows: the table would read 20 rows where the overwrite wrote 10."""
    from dataferry.commit.lookup import committer_for
    from dataferry.errors import CommitError

    path = tmp_path / "t"
    write(rows(10, start=100), str(path))
    result = write(rows(10), str(path), mode="overwrite")
    assert any(n.endswith(".replacecommit") for n in timeline(path))
    late = result.run.job.task(0, 9)
    with pytest.raises(CommitError, match="has completed: this attempt is late"):
        committer_for(late).write_file(late, "day=2024-01-01/late.parquet", b"PAR1")
    assert read_hudi(path).column("x").to_pylist() == list(range(10))


def test_stray_files_are_deleted_before_the_instant_completes(tmp_path):
    """A failed attempt's file (marked, in no task commit) is deleted before `<instant>.commit`
    is created: hudi-rs shows every base file of a completed instant, listed by its commit or
    not. Were strays deleted after, a driver killed between the two would leave the table
    reading the failed attempt's rows too: 6 rows where 3 were written."""
    import io

    import pyarrow.parquet as pq

    from dataferry import make_committer

    def parquet_of(xs: list[int]) -> bytes:
        buf = io.BytesIO()
        pq.write_table(pa.table({"x": pa.array(xs, pa.int64()), "v": [x * 0.5 for x in xs]}), buf)
        return buf.getvalue()

    path = tmp_path / "t"
    crash = FaultRule(action="crash", when="after", kinds=frozenset({Op.TABLE_COMMIT}))
    c = make_committer("hudi", open_store(str(path), faults=[crash]), **OPTIONS)
    job = c.new_job()
    c.setup_job(job)
    failed = job.task(0, 0)  # wrote its file, then failed (no task commit, no abort)
    c.setup_task(failed)
    c.write_file(failed, "day=1/part-0.parquet", parquet_of([1, 2, 3]))
    retry = job.task(0, 1)
    c.setup_task(retry)
    c.write_file(retry, "day=1/part-0.parquet", parquet_of([1, 2, 3]))
    with pytest.raises(InjectedCrash):  # killed right after the instant completed
        c.commit_job(job, [c.commit_task(retry)])
    assert any(n.endswith(".commit") for n in timeline(path))
    assert read_hudi(path).column("x").to_pylist() == [1, 2, 3]
    assert len(data_files(path)) == 1


@pytest.mark.parametrize("death", ["crash", "failure"])
def test_instants_stay_ordered_across_a_recovery_with_a_stopped_clock(tmp_path, monkeypatch, death):
    """A committed instant, a dead job's instant, the `.rollback` the next job's recovery
    writes, then that next job's commit: each strictly later than the one before, even with a
    clock that does not move (every instant from the +1 ms rule). Broken, the rollback
    collides with or sorts after the commit that followed it (Hudi's timeline then reads the
    commit as rolled back, or refuses two actions at one instant)."""
    import datetime as dt

    from dataferry.commit.table.hudi import committer as hudi_committer
    from dataferry.commit.table.hudi import timeline as hudi_timeline

    stopped = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
    monkeypatch.setattr(hudi_timeline, "utc_now", lambda: stopped)
    rolled_back, roll_back = [], hudi_committer.roll_back_instant

    def spy(store, instant, *args):
        rolled_back.append(instant)
        return roll_back(store, instant, *args)

    monkeypatch.setattr(hudi_committer, "roll_back_instant", spy)
    path = tmp_path / "t"
    write(rows(2), str(path))
    (first,) = instants(path, "commit")
    if death == "crash":
        crash = FaultRule(
            action="crash", when="before", kinds=frozenset({Op.CREATE_IF_ABSENT}), path_glob=CLAIM
        )
        with pytest.raises(InjectedCrash):
            write(rows(2, start=50), open_store(str(path), faults=[crash]))
    else:

        def fail(job):
            raise RuntimeError("boom")

        with pytest.raises(RuntimeError, match="boom"):
            write(rows(2, start=50), str(path), before_job_commit=fail)
    write(rows(2, start=90), str(path))
    (dead,) = rolled_back
    (rollback,) = instants(path, "rollback")
    (last,) = [i for i in instants(path, "commit") if i != first]
    assert first < dead < rollback < last, (first, dead, rollback, last)
    assert read_hudi(path).column("x").to_pylist() == [0, 1, 90, 91]


def test_a_rollback_is_avro_hoodie_rollback_metadata(tmp_path):
    """Hudi 0.x (table version 6) writes a `.rollback` as an Avro object container file of
    HoodieRollbackMetadata; Java Hudi decodes it whenever it loads the timeline (a write, a
    clean, an archive). Broken (JSON, or another record), every Java writer of the table
    fails on "Not an Avro data file" (tests/interop/test_spark_hudi_java.py)."""
    import io

    import fastavro

    from dataferry.commit.table.hudi.avro_meta import ROLLBACK_SCHEMA

    path = tmp_path / "t"
    write(rows(4), str(path))

    def fail(job):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        write(rows(4, start=10), str(path), before_job_commit=fail)
    (rollback,) = (path / ".hoodie").glob("*.rollback")
    data = rollback.read_bytes()
    assert data[:4] == b"Obj\x01"
    reader = fastavro.reader(io.BytesIO(data), reader_schema=fastavro.parse_schema(ROLLBACK_SCHEMA))
    assert reader.writer_schema["name"] == "org.apache.hudi.avro.model.HoodieRollbackMetadata"
    (meta,) = list(reader)
    assert meta["startRollbackTime"] == rollback.name.split(".")[0]
    failed = meta["commitsRollback"][0]
    assert meta["instantsRollback"] == [{"commitTime": failed, "action": "commit"}]
    deleted = [f for p in meta["partitionMetadata"].values() for f in p["successDeleteFiles"]]
    assert len(deleted) == meta["totalFilesDeleted"] > 0
    assert all(failed in f for f in deleted)
