"""Group commit of Iceberg appends (`commit/table/iceberg/group.py`): appenders committing at
the same moment share one snapshot, its summary naming each job; a job whose commit request is
published lands whatever happens to its driver, and never twice; a forged request is not
carried. On the embedded SQL catalog, and one case on SeaweedFS's REST catalog."""

from __future__ import annotations

import json
from collections import Counter

import msgspec
import pyarrow as pa
import pytest

import dataferry
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.lookup import committer_by_name
from dataferry.commit.records.intent import INTENT_FILE
from dataferry.commit.table.iceberg import committer as iceberg_committer
from dataferry.commit.table.iceberg import group
from dataferry.commit.table.iceberg.catalog import GROUP_KEY, jobs_of
from dataferry.errors import InjectedCrash
from dataferry.store import FaultRule, Op, Store, open_store

from .group_appenders import appenders_meeting_at_publish

pytestmark = pytest.mark.filterwarnings("ignore::Warning")

JOBS = 4


def data(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "day": pa.array([f"d{i % 2}" for i in ids])})


def write(dest, table: pa.Table, storage_options: dict | None = None, **options):
    return dataferry.write_dataset(
        table,
        dest,
        partition_by=["day"],
        committer="iceberg",
        mode="append",
        storage_options=storage_options,
        committer_options=options or None,
    )


def table_of(url: str):
    return committer_by_name("iceberg", open_store(url)).table()


def ids_of(url: str) -> list[int]:
    return sorted(table_of(url).scan().to_arrow().column("id").to_pylist())


def snapshots_per_job(url: str) -> Counter:
    """How many snapshots name each job (a group's names every job it carries)."""
    return Counter(j for s in table_of(url).snapshots() for j in jobs_of(s.summary))


def every_referenced_file_exists(url: str) -> None:
    store = open_store(url)
    referenced = committer_by_name("iceberg", store).referenced_files()
    assert referenced and all(store.exists(f) for f in referenced)


def no_requests_left(url: str) -> None:
    assert not open_store(url).exists(group.GROUP_DIR)


def at_request(action: str, when: str, callback=None) -> FaultRule:
    return FaultRule(
        action=action,
        when=when,
        kinds=frozenset({Op.CREATE_IF_ABSENT}),
        path_glob=f"{group.GROUP_DIR}/*",
        callback=callback,
    )


def test_appenders_at_once_share_one_snapshot(tmp_path, monkeypatch):
    """JOBS appenders whose requests are all published before any of them leads land in ONE
    new snapshot naming every job once, every row once. Were requests not carried, there
    would be JOBS snapshots (no group commit); were a carried job not to find its id in the
    winner's summary, it would commit its files a second time."""
    url = str(tmp_path / "t")
    write(url, data(3, start=10_000))
    before = len(table_of(url).snapshots())
    jobs = appenders_meeting_at_publish(
        monkeypatch, iceberg_committer, JOBS, lambda i: write(url, data(3, start=100 * i))
    )
    snapshots = table_of(url).snapshots()
    assert len(snapshots) == before + 1  # one snapshot for the JOBS jobs
    assert jobs_of(snapshots[-1].summary) == set(jobs)
    per_job = snapshots_per_job(url)
    assert {j: per_job[j] for j in jobs} == dict.fromkeys(jobs, 1)
    assert ids_of(url) == sorted(
        [*range(10_000, 10_003), *(100 * i + k for i in range(JOBS) for k in range(3))]
    )
    every_referenced_file_exists(url)
    no_requests_left(url)


def test_a_job_dead_after_its_request_lands_through_another_job(tmp_path):
    """A's driver dies just after publishing its request; B's commit carries A's files (one
    snapshot for both, A's id under dataferry.group-job-ids); cleanup then finds A landed and
    deletes nothing: A's rows once, every file the table references there, no request left.
    Were requests not carried, A would land only by cleanup (two snapshots); were cleanup
    blind to a carried job's id, it would commit A again or roll it back (deleting files the
    table references)."""
    url = str(tmp_path / "t")
    write(url, data(3))
    b: list[str] = []

    def b_commits(*_: object) -> None:  # while A's driver is alive, A's request published
        b.append(write(url, data(3, start=20)).run.job.job_uuid)

    with pytest.raises(InjectedCrash):
        write(open_store(url, faults=[at_request("crash", "after", b_commits)]), data(3, start=10))
    snapshots = table_of(url).snapshots()
    assert len(snapshots) == 2
    assert snapshots[-1].summary.get(GROUP_KEY) and len(jobs_of(snapshots[-1].summary)) == 2
    report = cleanup_destination(open_store(url), older_than_s=0)
    assert report.rolled_forward and not report.rolled_back
    assert len(table_of(url).snapshots()) == 2  # cleanup found A landed: no new snapshot
    assert ids_of(url) == [0, 1, 2, 10, 11, 12, 20, 21, 22]
    assert sorted(snapshots_per_job(url).values()) == [1, 1, 1]
    every_referenced_file_exists(url)
    no_requests_left(url)


def test_a_landed_request_left_behind_is_not_carried_again(tmp_path):
    """A lands alone and its request is left behind (as by a driver dead before removing
    it); B then commits: A's id in a snapshot since the request's base means A landed, so B
    does not carry it again and removes it. Without that check A's rows would be in the
    table twice."""
    url = str(tmp_path / "t")
    write(url, data(3))
    store = open_store(url)
    kept: list[tuple[str, bytes]] = []

    def keep(*_: object) -> None:
        (st,) = store.list(group.GROUP_DIR)
        kept.append((st.path, store.read_bytes(st.path)))

    a = write(open_store(url, faults=[at_request("callback", "after", keep)]), data(3, start=10))
    store.write_bytes(*kept[0])  # A's request, back as A published it
    write(url, data(3, start=20))
    assert ids_of(url) == [0, 1, 2, 10, 11, 12, 20, 21, 22]
    assert snapshots_per_job(url)[a.run.job.job_uuid] == 1
    no_requests_left(url)


@pytest.mark.parametrize("tamper", ["none", "foreign file", "not vouched", "another table"])
def test_a_forged_request_is_not_carried(tmp_path, tamper):
    """A commit request is a file anyone who can write into the table's storage can write.
    Just after A publishes its request (A then dies), the request is rewritten: a file A
    never decided to commit (one already in the table: its rows twice), or another table's
    name; or a request of a job nothing vouches for is put beside it (A's files under a
    made-up job, with a copy of A's intent record: A's rows twice). B, committing meanwhile, must not carry what is forged:
    carried, the table would show rows twice. Cleanup then lands A once, from A's own intent
    record. Untampered ("none"), B carries A's request."""
    url = str(tmp_path / "t")
    write(url, data(3))
    store = open_store(url)
    committed = sorted(committer_by_name("iceberg", store).referenced_files())
    forged_path: list[str] = []

    def forge_then_b_commits(*_: object) -> None:
        (st,) = store.list(group.GROUP_DIR)
        request = msgspec.json.decode(store.read_bytes(st.path), type=group.Request)
        forged = request
        if tamper == "foreign file":
            size = store.stat(committed[0]).size
            forged = msgspec.structs.replace(request, files=[*request.files, (committed[0], size)])
        elif tamper == "another table":
            forged = msgspec.structs.replace(request, identifier="default.other")
        elif tamper == "not vouched":  # A's request and intent record as a made-up job's
            forged = msgspec.structs.replace(request, job_uuid="made-up")
            markers = committer_by_name("iceberg", store).markers_root
            intent = json.loads(store.read_bytes(f"{markers}/{request.job_uuid}/{INTENT_FILE}"))
            intent["job_uuid"] = "made-up"
            store.write_bytes(f"{markers}/made-up/{INTENT_FILE}", json.dumps(intent).encode())
        forged_path.append(group.request_path(forged.job_uuid))
        store.write_bytes(forged_path[0], msgspec.json.encode(forged))
        write(url, data(3, start=20))

    with pytest.raises(InjectedCrash):
        write(
            open_store(url, faults=[at_request("crash", "after", forge_then_b_commits)]),
            data(3, start=10),
        )
    carried = tamper in ("none", "not vouched")  # A's own request, as A published it
    assert ids_of(url) == [0, 1, 2, *([10, 11, 12] if carried else []), 20, 21, 22]
    assert store.exists(forged_path[0]) == (tamper != "none")  # not the leader's to delete
    failed = cleanup_destination(open_store(url), older_than_s=0).failed
    markers = committer_by_name("iceberg", store).markers_root
    forged_intent = [f"{markers}/made-up"] if tamper == "not vouched" else []
    assert sorted(failed) == forged_intent  # recovery leaves a forged intent record alone
    assert ids_of(url) == [0, 1, 2, 10, 11, 12, 20, 21, 22]  # A once, from its intent record
    assert "made-up" not in snapshots_per_job(url)
    every_referenced_file_exists(url)


def test_a_request_on_another_schema_is_not_carried(tmp_path):
    """A's request was published on the table's first schema; before B leads, the schema
    changes (a merge adds a column). B must not carry A's request (its files were decided
    on a schema the table no longer has): A lands by its own commit (here, cleanup's), on
    the new schema. Were the shape not compared, B would build A's files on a schema their
    request never saw."""
    url = str(tmp_path / "t")
    write(url, data(3))
    snaps: list[int] = []

    def wider(n: int, start: int) -> pa.Table:
        return data(n, start).append_column("extra", pa.array(["x"] * n))

    def evolve_then_b_commits(*_: object) -> None:
        write(url, wider(2, 50), schema_mode="merge")
        snaps.append(len(table_of(url).snapshots()))
        write(url, wider(3, 20))

    with pytest.raises(InjectedCrash):
        write(
            open_store(url, faults=[at_request("crash", "after", evolve_then_b_commits)]),
            data(3, start=10),
        )
    tbl = table_of(url)
    assert len(tbl.snapshots()) == snaps[0] + 1 and not tbl.snapshots()[-1].summary.get(GROUP_KEY)
    assert not cleanup_destination(open_store(url), older_than_s=0).failed
    assert ids_of(url) == [0, 1, 2, 10, 11, 12, 20, 21, 22, 50, 51]
    assert sorted(snapshots_per_job(url).values()) == [1] * 4
    every_referenced_file_exists(url)
    no_requests_left(url)


@pytest.mark.xdist_group("seaweedfs")
def test_a_job_dead_after_its_request_lands_through_another_job_rest_catalog(iceberg_rest):
    """The dead-driver case on the REST catalog (its compare-and-swap asserts the branch's
    snapshot, the schema and the spec): B's snapshot carries A, cleanup finds A landed and
    commits nothing more; every row once."""
    url, ident = iceberg_rest.url(), iceberg_rest.identifier()
    storage = iceberg_rest.storage_options
    options = {"catalog": iceberg_rest.properties(), "identifier": ident}

    def append(dest, table: pa.Table):
        return write(dest, table, None if isinstance(dest, Store) else storage, **options)

    append(url, data(3))

    def b_commits(*_: object) -> None:
        append(url, data(3, start=20))

    faults = [at_request("crash", "after", b_commits)]
    with pytest.raises(InjectedCrash):
        append(open_store(url, storage_options=storage, faults=faults), data(3, start=10))
    recovery = open_store(url, storage_options=storage)
    assert not cleanup_destination(recovery, older_than_s=0).failed
    tbl = iceberg_rest.catalog().load_table(ident)
    assert len(tbl.snapshots()) == 2 and tbl.snapshots()[-1].summary.get(GROUP_KEY)
    per_job = Counter(j for s in tbl.snapshots() for j in jobs_of(s.summary))
    assert sorted(per_job.values()) == [1, 1, 1]
    ids = sorted(tbl.scan().to_arrow().column("id").to_pylist())
    assert ids == [0, 1, 2, 10, 11, 12, 20, 21, 22]
    assert not recovery.exists(group.GROUP_DIR)
