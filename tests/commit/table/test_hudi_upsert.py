"""Hudi's write operations: `upsert` (the default) replaces the stored row of each record key
by copy-on-write, a new slice of the file group holding it, read back by hudi-rs with one
row per key; the precombine field decides between two versions of a key; `insert` and
`bulk_insert` add rows as they are; a write without a record key is refused unless keyless;
a failed or killed upsert leaves the previous table as it was."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pytest

import dataferry
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.table.hudi import HudiCommitter, HudiConfig
from dataferry.commit.table.hudi.timeline import instant_of_name, next_instant, parse_base_file_name
from dataferry.errors import ConfigError, InjectedCrash, TableCommitConflict
from dataferry.store import open_store
from dataferry.store.faults import FaultRule, Op

hudi = pytest.importorskip("hudi")

COMPLETED = (".commit", ".replacecommit")


def frame(xs, vs, day=None, ts=None) -> pa.Table:
    columns = {"x": pa.array(xs, pa.int64()), "v": pa.array(vs, pa.string())}
    if day is not None:
        columns["day"] = pa.array(day if isinstance(day, list) else [day] * len(xs))
    if ts is not None:
        columns["ts"] = pa.array(ts, pa.int64())
    return pa.table(columns)


def write(data, dest, partition_by=(), mode="append", **options):
    kw = {k: options.pop(k) for k in ("before_job_commit", "tasks") if k in options}
    return dataferry.write_dataset(
        data,
        dest,
        partition_by=list(partition_by),
        committer="hudi",
        committer_options={"table_name": "t", "record_key": "x", **options},
        mode=mode,
        **kw,
    )


def read(path, as_of: str = "") -> list[dict]:
    options = hudi.HudiReadOptions().with_as_of_timestamp(as_of) if as_of else None
    batches = hudi.HudiTableBuilder.from_base_uri(str(path)).build().read(options)
    if not batches:
        return []
    table = pa.Table.from_batches(batches)
    names = [n for n in ("x", "v", "day", "ts") if n in table.column_names]
    return table.select(names).sort_by([(n, "ascending") for n in names]).to_pylist()


def xv(path, as_of: str = "") -> list[tuple]:
    return [(r["x"], r["v"]) for r in read(path, as_of)]


def timeline(path) -> list[str]:
    return sorted(p.name for p in (path / ".hoodie").iterdir() if p.is_file())


def commits(path) -> list[dict]:
    return [
        json.loads((path / ".hoodie" / n).read_text())
        for n in timeline(path)
        if n.endswith(".commit")
    ]


def data_files(path) -> set[str]:
    return {
        p.relative_to(path).as_posix()
        for p in path.rglob("*.parquet")
        if ".hoodie" not in p.relative_to(path).parts
    }


def assert_no_orphans(path) -> None:
    """Every data file is a base file of a completed instant, and no marker is left."""
    done = {n.split(".")[0] for n in timeline(path) if n.endswith(COMPLETED)}
    for f in data_files(path):
        parsed = parse_base_file_name(f.rsplit("/", 1)[-1])
        assert parsed is not None and parsed[2] in done, f
    assert not list((path / ".hoodie").glob(".temp/*"))


# --- upsert -----------------------------------------------------------------------------------


def test_an_append_of_existing_keys_replaces_their_rows(tmp_path):
    """Appending rows whose keys exist replaces them (Hudi's default upsert): broken, hudi-rs
    reads x=[1,3,3,4,4], the old and the new version of each updated key."""
    path = tmp_path / "t"
    write(frame([1, 3, 4], ["a", "b", "c"]), str(path))
    write(frame([3, 4, 5], ["B", "C", "E"]), str(path))
    assert xv(path) == [(1, "a"), (3, "B"), (4, "C"), (5, "E")]
    first, second = commits(path)
    assert first["operationType"] == second["operationType"] == "UPSERT"
    (old,) = [s for ss in first["partitionToWriteStats"].values() for s in ss]
    stats = [s for ss in second["partitionToWriteStats"].values() for s in ss]
    (updated,) = [s for s in stats if s["prevCommit"] != "null"]
    (inserted,) = [s for s in stats if s["prevCommit"] == "null"]
    # the file group holding 3 and 4 has a new slice: its untouched row and the new versions
    assert updated["fileId"] == old["fileId"]
    assert updated["prevCommit"] == parse_base_file_name(old["path"])[2]
    assert updated["prevBaseFile"] == old["path"]
    assert (updated["numWrites"], updated["numUpdateWrites"], updated["numInserts"]) == (3, 2, 0)
    assert (inserted["numWrites"], inserted["numInserts"]) == (1, 1)  # 5: a new file group
    # time travel still reads the first version; its slice stays, referenced by its instant
    t1 = parse_base_file_name(old["path"])[2]
    assert xv(path, as_of=t1) == [(1, "a"), (3, "b"), (4, "c")]
    c = HudiCommitter(open_store(str(path)), HudiConfig())
    assert c.referenced_files() == data_files(path)
    assert set(c.table_files()) == {updated["path"], inserted["path"]}
    assert_no_orphans(path)


def test_upsert_in_partitions_looks_keys_up_in_their_own_partition(tmp_path):
    """Keys are looked up in their partition (Hudi's default, non-global index); an update
    rewrites only the file group holding the key: broken, rows double or other partitions'
    groups are rewritten."""
    path = tmp_path / "t"
    write(frame([1, 2, 3, 4], list("abcd"), day=["d1", "d1", "d2", "d2"]), str(path), ["day"])
    write(frame([2, 3], ["B", "C"], day=["d1", "d3"]), str(path), ["day"])
    assert read(path) == [
        {"x": 1, "v": "a", "day": "d1"},
        {"x": 2, "v": "B", "day": "d1"},
        {"x": 3, "v": "C", "day": "d3"},  # another partition: a new key there
        {"x": 3, "v": "c", "day": "d2"},
        {"x": 4, "v": "d", "day": "d2"},
    ]
    stats = [s for ss in commits(path)[1]["partitionToWriteStats"].values() for s in ss]
    assert sorted((s["partitionPath"], s["prevCommit"] != "null") for s in stats) == [
        ("day=d1", True),
        ("day=d3", False),
    ]
    assert_no_orphans(path)


def test_duplicate_keys_in_the_input_are_combined(tmp_path):
    """Of an input's rows with one key the last one is kept (Hudi's preCombine; no precombine
    field); broken, a new table holds a key twice."""
    path = tmp_path / "t"
    write(frame([1, 2, 1, 1], ["a", "b", "a2", "a3"]), str(path), tasks=1)
    assert xv(path) == [(1, "a3"), (2, "b")]
    assert_no_orphans(path)


def test_the_precombine_field_picks_the_version(tmp_path):
    """The larger precombine value wins, in the input and against the stored row (Hudi's
    DefaultHoodieRecordPayload): broken, an older event overwrites a newer one."""
    path = tmp_path / "t"
    opts = {"precombine_field": "ts"}
    write(frame([1, 1, 2], ["new", "old", "b"], ts=[5, 1, 5]), str(path), **opts)
    assert xv(path) == [(1, "new"), (2, "b")]
    # an older version of 1 is ignored, a newer one of 2 replaces it; equal values: the input
    write(frame([1, 2, 3], ["older", "newer", "c"], ts=[4, 6, 0]), str(path), **opts)
    assert xv(path) == [(1, "new"), (2, "newer"), (3, "c")]
    write(frame([3], ["same"], ts=[0]), str(path))  # the table's precombine field
    assert xv(path) == [(1, "new"), (2, "newer"), (3, "same")]


def test_insert_and_bulk_insert_keep_duplicates(tmp_path):
    """`insert` and `bulk_insert` add rows as Hudi's do, without a key lookup (duplicates
    stay); broken, they would look keys up or be recorded as upserts."""
    path = tmp_path / "t"
    write(frame([1, 3, 4], ["a", "b", "c"]), str(path), operation="insert")
    write(frame([3, 4], ["B", "C"]), str(path), operation="insert")
    assert [x for x, _ in xv(path)] == [1, 3, 3, 4, 4]
    write(frame([4], ["D"]), str(path), operation="bulk_insert")
    assert [x for x, _ in xv(path)] == [1, 3, 3, 4, 4, 4]
    assert [c["operationType"] for c in commits(path)] == ["INSERT", "INSERT", "BULK_INSERT"]
    write(frame([3], ["Z"]), str(path))  # an upsert replaces every stored copy of a key
    assert [v for x, v in xv(path) if x == 3] == ["Z"]


def test_a_write_without_a_record_key_is_refused_unless_keyless(tmp_path):
    """No record key and no `keyless`: refused before anything is written (a keyless
    table cannot take upserts); broken, a table is silently created without keys."""
    path = tmp_path / "t"
    data = frame([1, 2], ["a", "b"])
    with pytest.raises(ConfigError, match="no record key: give record_key"):
        dataferry.write_dataset(data, str(path), committer="hudi", mode="append")
    assert not path.exists() or not any(path.rglob("*"))
    with pytest.raises(ConfigError, match="keyless=True writes rows without record keys"):
        HudiConfig(keyless=True, operation="upsert")
    keyless = {"committer": "hudi", "committer_options": {"keyless": True}, "mode": "append"}
    dataferry.write_dataset(data, str(path), **keyless)
    dataferry.write_dataset(data, str(path), **keyless)
    assert [x for x, _ in xv(path)] == [1, 1, 2, 2]
    assert [c["operationType"] for c in commits(path)] == ["INSERT", "INSERT"]
    with pytest.raises(ConfigError, match="no record key"):  # the table has none either
        dataferry.write_dataset(data, str(path), committer="hudi", mode="append")
    with pytest.raises(ConfigError, match="not a column"):
        write(data, str(tmp_path / "u"), precombine_field="ts")


# --- failures ---------------------------------------------------------------------------------


def test_a_failed_upsert_leaves_the_previous_table(tmp_path):
    """An upsert that fails after its merge wrote the new slices: the table reads as before
    and the new slices are gone; broken, a half-made slice would show or stay as an orphan."""
    path = tmp_path / "t"
    write(frame([1, 3, 4], ["a", "b", "c"]), str(path))
    before = data_files(path)

    def fail(job):
        raise RuntimeError("boom")

    merges, marked = [], []
    # the merge's files are written after their MERGE markers (Hudi's marker of a new slice)
    spy = FaultRule(action="callback", kinds=frozenset({Op.WRITE}), path_glob="*-m_*", times=-1,
                    callback=lambda i, op, p: merges.append(p))  # fmt: skip
    marks = FaultRule(action="callback", path_glob="*.marker.MERGE", times=-1,
                      callback=lambda i, op, p: marked.append(p))  # fmt: skip
    # then the intent record fails: the job aborts
    fault = FaultRule(action="fail", path_glob=".hoodie/.temp/*/_commit_intent*")
    with pytest.raises(Exception):  # noqa: B017 (the injected failure, whatever its class)
        write(frame([3, 5], ["B", "E"]), open_store(str(path), faults=[spy, marks, fault]))
    assert merges and marked  # the merge marked and wrote its slice before the failure
    assert xv(path) == [(1, "a"), (3, "b"), (4, "c")]
    assert data_files(path) == before
    with pytest.raises(RuntimeError, match="boom"):
        write(frame([3], ["B"]), str(path), before_job_commit=fail)
    assert xv(path) == [(1, "a"), (3, "b"), (4, "c")]
    assert data_files(path) == before
    assert_no_orphans(path)
    write(frame([3], ["B"]), str(path))
    assert xv(path) == [(1, "a"), (3, "B"), (4, "c")]


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_killed_upsert_is_finished_once_by_cleanup(tmp_path, when):
    """Killed at its commit after the intent: cleanup completes the same merge, one row per
    key; broken, a key doubles or the update is lost."""
    path = tmp_path / "t"
    write(frame([1, 3, 4], ["a", "b", "c"]), str(path))
    crash = FaultRule(action="crash", when=when, kinds=frozenset({Op.TABLE_COMMIT}))
    with pytest.raises(InjectedCrash):
        write(frame([3, 5], ["B", "E"]), open_store(str(path), faults=[crash]))
    assert xv(path) == [(1, "a"), (3, "b"), (4, "c")] or when == "after"
    cleanup_destination(open_store(str(path)))
    assert xv(path) == [(1, "a"), (3, "B"), (4, "c"), (5, "E")]
    assert_no_orphans(path)


def test_an_upsert_killed_before_its_intent_is_rolled_back(tmp_path):
    """Killed before its intent record (after the merge): the next job rolls it back, the
    previous version reads on; broken, the dead job's slices linger or show."""
    path = tmp_path / "t"
    write(frame([1, 3, 4], ["a", "b", "c"]), str(path))
    # killed as it saves its intent: the merge wrote its files
    crash = FaultRule(action="crash", when="before", path_glob="*/_commit_intent.json")
    with pytest.raises(InjectedCrash):
        write(frame([3, 5], ["B", "E"]), open_store(str(path), faults=[crash]))
    assert list(path.glob("*-m_*.parquet"))  # the merge's files, invisible
    assert xv(path) == [(1, "a"), (3, "b"), (4, "c")]
    report = cleanup_destination(open_store(str(path)))
    assert report.rolled_back, report
    assert not list(path.glob("*-m_*.parquet"))
    write(frame([4], ["C"]), str(path))
    assert xv(path) == [(1, "a"), (3, "b"), (4, "C")]
    assert_no_orphans(path)


def test_an_upsert_conflicts_with_a_newer_slice_of_its_file_group(tmp_path):
    """Another commit wrote a newer slice of a group the upsert merged, between its plan and
    its commit: a conflict, nothing committed; broken, that commit's rows are lost."""
    path = tmp_path / "t"
    write(frame([1, 3, 4], ["a", "b", "c"]), str(path))
    (first,) = commits(path)

    def another_writer(index, op, p):
        (stat,) = [s for ss in first["partitionToWriteStats"].values() for s in ss]
        pending = [d.name for d in (path / ".hoodie" / ".temp").iterdir()]
        t = next_instant([*filter(None, map(instant_of_name, timeline(path))), *pending])
        fid, token, _ = parse_base_file_name(stat["path"])
        dst = f"{fid}_{token}_{t}.parquet"
        (path / dst).write_bytes((path / stat["path"]).read_bytes())
        meta = {**first, "partitionToWriteStats": {"": [{**stat, "path": dst}]}}
        (path / ".hoodie" / f"{t}.commit").write_text(json.dumps({**meta, "extraMetadata": {}}))

    hook = FaultRule(action="callback", kinds=frozenset({Op.TABLE_COMMIT}), callback=another_writer)
    with pytest.raises(TableCommitConflict, match="newer slice"):
        write(frame([3], ["B"]), open_store(str(path), faults=[hook]))
    assert xv(path) == [(1, "a"), (3, "b"), (4, "c")]
    assert_no_orphans(path)


def test_an_upsert_killed_anywhere_in_its_commit_reads_old_or_new(tmp_path):
    """Killed before any store operation of its job commit (the merge, the intent, the
    strays, the instant) or just after the instant: hudi-rs reads the table before or after
    the upsert, one row per key, as the driver died and after `dataferry cleanup`, and no
    file of a half-done merge is left; broken, a key doubles (a superseded task file in the
    completed instant), an update is half applied, or a merge file stays."""
    seed = tmp_path / "seed"
    write(frame([1, 3, 4, 6], list("abcd"), day=["d1", "d1", "d2", "d2"]), str(seed), ["day"])
    old = xv(seed)
    new = [(1, "a"), (3, "B"), (4, "C"), (5, "E"), (6, "d")]
    upsert = frame([3, 4, 5, 3], ["x", "C", "E", "B"], day=["d1", "d2", "d1", "d1"])
    ops: list[tuple[int, Op, str]] = []
    spy = FaultRule(action="callback", times=-1, callback=lambda *op: ops.append(op))
    shutil.copytree(seed, tmp_path / "spied")
    write(upsert, open_store(str(tmp_path / "spied"), faults=[spy]), ["day"])
    first = next(i for i, _, p in ops if p.endswith(".marker.MERGE") or "-m_" in p)
    last = next(i for i, op, _ in ops if op == Op.TABLE_COMMIT)
    assert last - first > 10  # the window: the merge's reads and writes to the instant
    points = [(i, "before") for i in range(first - 3, last + 1, 3)] + [(last, "after")]
    for i, when in points:
        path = tmp_path / f"k{i}{when}"
        shutil.copytree(seed, path)
        crash = FaultRule(action="crash", when=when, index=i)
        with pytest.raises(InjectedCrash):
            write(upsert, open_store(str(path), faults=[crash]), ["day"])
        assert xv(path) in (old, new), i  # as the driver died: nothing half done shows
        cleanup_destination(open_store(str(path)))
        assert xv(path) in (old, new), i
        assert_no_orphans(path)


def test_upsert_with_the_marker_service(tmp_path):
    """The merge's files are marked through the marker service as the tasks' are; a failed
    upsert's are rolled back from them; broken, the merge fails on the service or its files
    stay."""
    from dataferry.markers.process import MarkerServiceProcess

    path = tmp_path / "t"
    with MarkerServiceProcess(str(path), token="t0ken", batch_interval_ms=20) as svc:
        service = {"markers": "service", "service_url": svc.url, "service_token": "t0ken"}
        write(frame([1, 3, 4], ["a", "b", "c"]), str(path), **service)
        fault = FaultRule(action="fail", path_glob=".hoodie/.temp/*/_commit_intent*")
        with pytest.raises(Exception):  # noqa: B017 (the injected failure)
            write(frame([3, 5], ["B", "E"]), open_store(str(path), faults=[fault]), **service)
        assert xv(path) == [(1, "a"), (3, "b"), (4, "c")]
        assert_no_orphans(path)
        write(frame([3, 5], ["B", "E"]), str(path), **service)
    assert xv(path) == [(1, "a"), (3, "B"), (4, "c"), (5, "E")]
    assert_no_orphans(path)
