"""Hive-style insert: modes, name clashes, staging, restartable load, catalog, readers."""

from __future__ import annotations

import os
from functools import partial

import pyarrow as pa
import pytest

import dataferry
from dataferry import make_committer
from dataferry.commit.hive.catalog import open_catalog
from dataferry.commit.hive.load import copy_name
from dataferry.commit.hive.staging import ext_dir, is_staging_dir, staging_dir
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.records.intent import INTENT_FILE
from dataferry.engine import LocalEngine, LocalEngineConfig
from dataferry.errors import (
    CommitError,
    ConfigError,
    DestinationError,
    InjectedCrash,
    JobCommitError,
)
from dataferry.store import FaultRule, Op, fault_layer, open_store

from .. import helpers
from ..helpers import make_outside, outside_files, read_rows
from ..helpers import read_table as table_rows

INLINE = LocalEngineConfig(workers=0)


read_back = partial(read_rows, columns=("day", "v"))


def rows_of(table):
    return sorted((r["day"], r["v"]) for r in table.to_pylist())


def write(path, table, mode, catalog="", tasks=2, **options):
    return dataferry.write_dataset(
        table,
        str(path),
        partition_by=["day"],
        committer="hive",
        mode=mode,
        engine=INLINE,
        tasks=tasks,
        committer_options={"catalog": catalog, **options},
    )


def days(n, start=0, rows=10):
    return pa.table(
        {
            "day": [f"d{(start + i % n):02d}" for i in range(rows)],
            "v": list(range(start * 1000, start * 1000 + rows)),
        }
    )


def staging_left(path):
    return [p.name for p in path.iterdir() if is_staging_dir(p.name)] if path.exists() else []


def test_append_twice_keeps_both_and_renames_clashes(tmp_path):
    t = tmp_path / "t"
    write(t, days(3), "append", tasks=1)
    write(t, days(3), "append", tasks=1)
    assert table_rows(t).num_rows == 20
    names = sorted(p.name for p in (t / "day=d00").iterdir())
    assert len(names) == 2 and names[0] != names[1]
    assert staging_left(t) == []


def test_copy_names_follow_hive():
    assert copy_name("part-0.c000.parquet", 1) == "part-0.c000_copy_1.parquet"
    assert copy_name("noext", 2) == "noext_copy_2"


def test_name_clash_in_the_load_gets_copy_suffix(tmp_path):
    """Same job uuid in names can't clash across jobs, so force a clash by hand."""
    store = open_store(str(tmp_path / "t"))
    store.write_bytes("day=d00/part-00000.parquet", b"old")
    c = make_committer("hive", store, mode="append")
    job = c.new_job()
    c.setup_job(job)
    t = job.task(0)
    c.setup_task(t)
    c.write_file(t, "day=d00/part-00000.parquet", b"new")
    c.commit_job(job, [c.commit_task(t)])
    assert store.read_bytes("day=d00/part-00000.parquet") == b"old"
    assert store.read_bytes("day=d00/part-00000_copy_1.parquet") == b"new"


def test_overwrite_replaces_only_written_partitions(tmp_path):
    t = tmp_path / "t"
    write(t, days(4), "append")
    write(t, days(2, start=0, rows=4).set_column(1, "v", pa.array([7, 7, 7, 7])), "overwrite")
    rows = table_rows(t).to_pydict()
    by_day: dict[str, list[int]] = {}
    for d, v in zip(rows["day"], rows["v"], strict=True):
        by_day.setdefault(d, []).append(v)
    assert sorted(by_day["d00"]) == [7, 7] and sorted(by_day["d01"]) == [7, 7]
    assert sorted(by_day["d02"]) == [2, 6] and sorted(by_day["d03"]) == [3, 7]  # untouched
    assert staging_left(t) == []


def test_overwrite_table_replaces_everything(tmp_path):
    t = tmp_path / "t"
    write(t, days(4), "append")
    write(t, days(1, start=9, rows=3), "overwrite-table")
    rows = table_rows(t)
    assert rows.num_rows == 3 and set(rows.column("day").to_pylist()) == {"d09"}


def test_new_partitions_move_by_directory_rename_where_atomic(tmp_path):
    for store_url, expect_dir_renames in (
        (f"sim:hdfs:{tmp_path / 'h'}", True),
        (f"sim:gcs:{tmp_path / 'g'}", False),
    ):
        store = open_store(store_url, latency_scale=0)
        result = dataferry.write_dataset(
            days(3),
            store,
            partition_by=["day"],
            committer="hive",
            mode="append",
            engine=INLINE,
            tasks=2,
            allow_unsafe_rename=True,
        )
        load = result.run.commit.details["load"]
        assert (load.dir_renames == 3) == expect_dir_renames
        assert (load.file_moves == 0) == expect_dir_renames
        assert table_rows(store.inner.full_url().removeprefix("file://")).num_rows == 10


def test_catalog_records_partitions_consistently(tmp_path):
    cat = str(tmp_path / "catalog.sqlite")
    t = tmp_path / "sales"
    write(t, days(3), "append", catalog=cat)
    write(t, days(2), "append", catalog=cat)
    catalog = open_catalog(cat)
    (table,) = catalog.tables()
    # two tasks cut the rows in partition order: 4 files for 3 days (one day spans both
    # tasks), then 2 files for 2 days
    assert (table.name, table.partitions, table.files) == ("sales", 3, 4 + 2)
    parts = {p.spec: p for p in catalog.partitions("sales")}
    on_disk = {d.name: len(list(d.iterdir())) for d in t.iterdir() if d.name.startswith("day=")}
    assert {k: v.files for k, v in parts.items()} == on_disk
    write(t, days(1, start=5, rows=2), "overwrite-table", catalog=cat)
    assert [p.spec for p in catalog.partitions("sales")] == ["day=d05"]
    with pytest.raises(ConfigError, match="not in the catalog"):
        catalog.partitions("nope")


def test_a_load_failing_once_is_finished_and_one_failing_on_is_finished_by_cleanup(tmp_path):
    """Once planned (its intent record saved) a load is decided: a failed move is retried from
    the journal at once, and while the store keeps failing the load waits, whole, for cleanup."""
    t = tmp_path / "t"
    write(t, days(2), "append")
    before = sorted(str(p.relative_to(t)) for p in t.rglob("*") if p.is_file())
    store = open_store(
        str(t),
        faults=[
            FaultRule(
                action="fail",
                kinds=frozenset({Op.RENAME}),
                path_glob=".hive-staging*/-ext-10000/day=*",
                times=1,
            )
        ],
    )
    new = days(2, start=0, rows=3)
    dataferry.write_dataset(
        new, store, partition_by=["day"], committer="hive", mode="overwrite", engine=INLINE
    )
    assert staging_left(t) == [] and (t / "_SUCCESS").exists()
    assert read_back(t) == rows_of(new)
    rule = FaultRule(
        action="fail",
        kinds=frozenset({Op.RENAME}),
        path_glob=".hive-staging*/-ext-10000/day=*",
        times=-1,
    )
    fault_layer(store).add_rule(rule)
    with pytest.raises(JobCommitError, match="decided"):
        dataferry.write_dataset(
            days(2), store, partition_by=["day"], committer="hive", mode="overwrite", engine=INLINE
        )
    assert staging_left(t) != []  # the decided load waits, with what it replaced
    rule.times = 0
    report = cleanup_destination(open_store(str(t)), older_than_s=0)
    assert report.rolled_forward and staging_left(t) == []
    assert read_back(t) == rows_of(days(2))
    assert before


def test_crashed_load_completes_on_resume_with_catalog_consistent(tmp_path):
    cat = str(tmp_path / "catalog.sqlite")
    store = open_store(str(tmp_path / "t"), faults=[])
    c = make_committer(
        "hive", store, mode="append", catalog=cat, move_threads=1, load_partition_threads=1
    )
    job = c.new_job()
    c.setup_job(job)
    msgs = []
    for i in range(2):
        t = job.task(i)
        c.setup_task(t)
        for d in range(3):
            c.write_file(t, f"day=d{d}/part-{i}.parquet", b"x" * (i + 1))
        msgs.append(c.commit_task(t))
    # die in the middle of moving partitions into the table
    fault_layer(store).add_rule(
        FaultRule(
            action="crash",
            when="after",
            kinds=frozenset({Op.RENAME}),
            path_glob=".hive-staging*/-ext-10000/day=d1",
        )
    )
    with pytest.raises(InjectedCrash):
        c.commit_job(job, msgs)
    fault_layer(store).armed = False
    assert store.exists(f"{staging_dir(job)}/{INTENT_FILE}")
    assert open_catalog(cat).tables() == []  # not registered yet
    report = cleanup_destination(store, older_than_s=0)  # the catalog is in the intent record
    assert report.rolled_forward
    assert staging_left(tmp_path / "t") == []
    parts = {p.spec: p.files for p in open_catalog(cat).partitions("t")}
    assert parts == {"day=d0": 2, "day=d1": 2, "day=d2": 2}
    assert sorted(s.path for s in store.walk("") if s.path.startswith("day=")) == [
        f"day=d{d}/part-{i}.parquet" for d in range(3) for i in range(2)
    ]


def test_cleanup_completes_or_rolls_back_an_abandoned_load(tmp_path):
    for rollback in (False, True):
        root = tmp_path / f"rb{rollback}"
        store = open_store(str(root), faults=[])
        store.write_bytes("day=d0/old.parquet", b"old")
        c = make_committer(
            "hive", store, mode="overwrite", move_threads=1, load_partition_threads=1
        )
        job = c.new_job()
        c.setup_job(job)
        t = job.task(0)
        c.setup_task(t)
        c.write_file(t, "day=d0/new.parquet", b"new")
        msg = c.commit_task(t)
        fault_layer(store).add_rule(
            FaultRule(
                action="crash", when="after", kinds=frozenset({Op.RENAME}), path_glob="day=d0"
            )
        )
        with pytest.raises(InjectedCrash):
            c.commit_job(job, [msg])  # died after moving the old partition aside
        fault_layer(store).armed = False
        assert not store.exists("day=d0")
        report = cleanup_destination(store, older_than_s=0, rollback=rollback)
        assert len(report.removed) == 1 and staging_left(root) == []
        expected = ["day=d0/old.parquet"] if rollback else ["_SUCCESS", "day=d0/new.parquet"]
        assert [s.path for s in store.walk("")] == expected


def test_cleanup_leaves_recent_jobs_alone_and_removes_dead_temporaries(tmp_path):
    store = open_store(str(tmp_path / "d"))
    c = make_committer("manifest", store)
    job = c.new_job()
    c.setup_job(job)
    report = cleanup_destination(store, older_than_s=3600)
    assert report.skipped_recent and store.exists("_temporary")
    report = cleanup_destination(store, older_than_s=0, dry_run=True)
    assert store.exists("_temporary")
    report = cleanup_destination(store, older_than_s=0)
    assert report.removed and not store.exists("_temporary")


def test_bad_mode_is_named(tmp_path):
    with pytest.raises(ConfigError, match="unknown hive mode 'upsert'"):
        make_committer("hive", str(tmp_path), mode="upsert")
    write(tmp_path / "x", days(1), "error")  # error: only into an empty table
    with pytest.raises(DestinationError, match="not empty"):
        write(tmp_path / "x", days(1), "error")


def test_process_pool_engine_reads_back_exactly(tmp_path):
    t = tmp_path / "pool"
    table = days(5, rows=5000)
    dataferry.write_dataset(
        table,
        str(t),
        partition_by=["day"],
        committer="hive",
        mode="append",
        engine=LocalEngine(workers=2),
        tasks=4,
    )
    back = table_rows(t)
    assert back.num_rows == 5000 and sorted(back.column("v").to_pylist()) == sorted(
        table.column("v").to_pylist()
    )


def test_load_resolves_renames_answered_ambiguously_after_taking_effect(tmp_path):
    """Every move into the table takes effect and is answered 'timed out'. Before the one
    resilient move each such answer failed the load (its retry from the journal met the next
    one); now each is resolved as done and the job commits, once."""
    store = open_store(str(tmp_path / "t"), faults=[])
    first = make_committer("hive", store, mode="append")
    job = first.new_job()
    first.setup_job(job)
    t = job.task(0)
    first.setup_task(t)
    first.write_file(t, "day=d0/part-0.parquet", b"earlier")
    first.commit_job(job, [first.commit_task(t)])

    c = make_committer("hive", store, mode="append", move_threads=1, load_partition_threads=1)
    job = c.new_job()
    c.setup_job(job)
    t = job.task(0)
    c.setup_task(t)
    c.write_file(t, "day=d0/part-1.parquet", b"one")  # an existing partition: a file move
    c.write_file(t, "day=d0/part-2.parquet", b"two")
    c.write_file(t, "day=d1/part-1.parquet", b"new")  # a new one: a directory rename
    msgs = [c.commit_task(t)]
    fault = fault_layer(store)
    rule = FaultRule(
        action="ambiguous",
        when="after",
        times=-1,
        predicate=lambda i, op, p: (
            op == Op.RENAME and not fault.trace[i].dest.startswith((".", "_"))
        ),
    )
    fault.add_rule(rule)
    c.commit_job(job, msgs)
    assert rule.fired >= 3
    fault.armed = False
    assert store.read_bytes("day=d0/part-1.parquet") == b"one"
    assert store.read_bytes("day=d0/part-2.parquet") == b"two"
    assert store.read_bytes("day=d1/part-1.parquet") == b"new"
    assert store.read_bytes("day=d0/part-0.parquet") == b"earlier"


def test_hive_load_refuses_a_link_in_the_staged_tree(tmp_path, monkeypatch):
    """A link that turns up in the staged tree after the staging commit (which refuses the
    links it sees) is refused by the load's plan, before any move. Were it followed, the load
    would rename the linked directory's files into the table: files the job never wrote
    published, and gone from the directory their owner keeps them in."""
    import dataferry.commit.hive.committer as hive_committer

    outside = make_outside(tmp_path)
    dest = tmp_path / "t"
    c = make_committer("hive", str(dest), mode="append")
    job = c.new_job()
    c.setup_job(job)
    task = job.task(0)
    c.setup_task(task)
    c.write_file(task, "day=a/part-0.parquet", b"real")
    msg = c.commit_task(task)
    before = outside_files(outside)
    real_plan = hive_committer.plan_load

    def plant_then_plan(store, staging, ext, *args):
        os.symlink(outside, dest / ext / "day=x")  # planted in the staged tree
        return real_plan(store, staging, ext, *args)

    monkeypatch.setattr(hive_committer, "plan_load", plant_then_plan)
    with pytest.raises(CommitError, match="links are not followed") as e:
        c.commit_job(job, [msg])
    assert c.store.full_url(f"{ext_dir(job)}/day=x") in str(e.value)
    assert outside_files(outside) == before
    assert helpers.visible(dest) == []
