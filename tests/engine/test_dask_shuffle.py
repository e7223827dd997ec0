"""`dataferry.dask.shuffle` on a real LocalCluster, one shuffle service per worker: a lazy
collection that runs the shuffle when computed, composes with what follows, and stays exact
when a worker dies mid-shuffle."""

from __future__ import annotations

import os
import time
from collections import Counter

import dask
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from distributed import get_task_stream

import dataferry.dask as dfd
from dataferry.bench.shuffle_profile import stage_of
from dataferry.dask.push_shuffle import (
    PLUGIN_NAME,
    DaskShuffleReport,
    ensure_services,
    service_host,
    services_identity,
)
from dataferry.net.addresses import host_of
from dataferry.shuffle import DriverConfig, ShuffleClient
from dataferry.shuffle.open_outputs import open_map_outputs

dd = pytest.importorskip("dask.dataframe")

ROWS = 30000
MERGE_ALWAYS = DriverConfig(min_shuffle_size_to_wait=0)


def source_frame() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    pdf = pd.DataFrame(
        {"key": rng.integers(0, 700, ROWS), "name": rng.choice(["a", "b", "c"], ROWS)}
    )
    pdf["row"] = np.arange(ROWS)
    return pdf


SOURCE = source_frame()


@pytest.fixture(scope="module")
def ddf(client):
    return dd.from_pandas(SOURCE, npartitions=6).persist()


def groups(frame) -> list[frozenset]:
    """The keys of each output partition (one computation for all of them)."""
    return [frozenset(part["key"]) for part in dask.compute(*frame.to_delayed())]


def service_counter(client, name: str) -> int:
    """A counter summed over every worker's shuffle service."""
    services = ensure_services(client)
    return sum(
        ShuffleClient(address, services.token).service_stats()["counters"].get(name, 0)
        for address in services.addresses.values()
    )


def assert_exact(parts: list[pd.DataFrame]) -> None:
    """The input's rows exactly (the same multiset of rows, index labels included), and each
    key in one output partition only."""
    out = pd.concat(parts)
    assert len(out) == ROWS
    # "row" is unique: sorting restores the input (Dask may store the strings as Arrow's)
    pd.testing.assert_frame_equal(out.sort_values("row"), SOURCE, check_dtype=False)
    owner: dict[int, int] = {}
    for i, part in enumerate(parts):
        for key in set(part["key"]):
            assert owner.setdefault(key, i) == i, f"key {key} in partitions {owner[key]} and {i}"


@pytest.mark.parametrize("push", [True, False])
def test_same_groups_as_dask_shuffle(client, ddf, push):
    report = DaskShuffleReport(False, 0, 0)
    ours = dfd.shuffle(
        ddf,
        "key",
        npartitions=5,
        push=push,
        client=client,
        driver_config=DriverConfig(min_shuffle_size_to_wait=0),
        report=report,
    )
    theirs = ddf.shuffle("key", npartitions=5)
    assert report.merge_id == -1 and report.reduce_reads == 0  # nothing ran yet
    parts = list(dask.compute(*ours.to_delayed()))  # one computation of the shuffle
    assert [frozenset(p["key"]) for p in parts] == groups(theirs)  # same keys, same partitions
    assert_exact(parts)
    out = pd.concat(parts)
    assert list(out.columns) == list(ddf.columns) and out.dtypes.equals(ddf.dtypes)
    assert report.push == push and report.reduce_reads > 0 and report.merge_id >= 0
    if push:
        assert report.finalize["merged_partitions"] == 5
        assert report.reduce_reads < 6 * 5  # fewer reads than one per (map, reduce) block
    else:
        assert report.reduce_reads == 6 * 5


def test_multi_column_keys(client, ddf):
    ours = dfd.shuffle(
        ddf, ["name", "key"], npartitions=4, client=client, driver_config=MERGE_ALWAYS
    )
    theirs = ddf.shuffle(["name", "key"], npartitions=4)

    def pairs(frame) -> list[frozenset]:
        parts = dask.compute(*frame.to_delayed())
        return [frozenset(zip(p["name"], p["key"], strict=True)) for p in parts]

    assert pairs(ours) == pairs(theirs)


@pytest.mark.parametrize("named", [False, True])
def test_every_row_keeps_its_index_label(client, ddf, named):
    source = ddf.set_index("row", sorted=True) if named else ddf
    cfg = DriverConfig(min_shuffle_size_to_wait=0)
    ours = dfd.shuffle(source, "key", npartitions=4, client=client, driver_config=cfg).compute()
    theirs = source.shuffle("key", npartitions=4).compute()
    assert ours.index.name == theirs.index.name and ours.index.dtype == theirs.index.dtype
    assert list(ours.columns) == list(theirs.columns)
    # the same (label, row) pairs, whatever order the rows arrive in
    assert ours.sort_index().equals(theirs.sort_index())


def test_the_index_can_be_left_behind(client, ddf):
    source = ddf.set_index("row", sorted=True)
    cfg = DriverConfig(min_shuffle_size_to_wait=0)
    out = dfd.shuffle(source, "key", 4, client=client, driver_config=cfg, keep_index=False)
    parts = list(dask.compute(*out.to_delayed()))
    assert all(isinstance(p.index, pd.RangeIndex) and p.index.name is None for p in parts)
    assert sum(len(p) for p in parts) == ROWS and list(parts[0].columns) == ["key", "name"]


def test_each_service_listens_on_its_workers_host(client):
    services = ensure_services(client)
    assert sorted(services.addresses) == sorted(client.scheduler_info()["workers"])
    for worker, address in services.addresses.items():
        assert host_of(address) == host_of(worker)  # where Dask reaches the worker
        assert address != worker  # its own port
    assert services.fingerprint == ""  # every worker on loopback: no TLS
    assert ensure_services(client).token == services.token  # one token per client


def test_a_worker_on_every_interface_advertises_the_route_to_the_scheduler():
    assert service_host("tcp://10.1.2.3:4000", "tcp://10.1.2.1:8786") == "10.1.2.3"
    assert service_host("tcp://0.0.0.0:4000", "tcp://127.0.0.1:8786") == "127.0.0.1"


def test_workers_beyond_loopback_share_one_tls_identity():
    assert services_identity(["127.0.0.1"]) is None
    assert services_identity([]) is not None  # workers yet to join may be anywhere
    identity = services_identity(["10.1.2.3", "10.1.2.4"])
    assert identity is not None and len(identity.fingerprint) == 64
    assert identity.fingerprint != services_identity(["10.1.2.3"]).fingerprint  # per client


def test_dask_workers_encode_into_arrows_default_pool(client):
    """Dask's nanny fixes glibc's trim threshold for its workers, so glibc maps every large
    buffer afresh there: a worker's shuffle buffers come from Arrow's default pool."""

    def pools() -> tuple[str, str]:
        from dataferry.engine.shuffle import codec

        return codec.POOL.backend_name, pa.default_memory_pool().backend_name

    for pool, default in client.run(pools).values():
        assert pool == default != "system"


# --- lazy, as a Dask collection --------------------------------------------------------------


def test_nothing_runs_until_compute(client, ddf):
    ensure_services(client)  # the services may start at call time; the shuffle may not
    pushes, finalized = (
        service_counter(client, "push_blocks"),
        service_counter(client, "finalized_shuffles"),
    )
    report = DaskShuffleReport(False, 0, 0)
    with get_task_stream(client=client) as stream:
        out = dfd.shuffle(ddf, "key", 4, client=client, driver_config=MERGE_ALWAYS, report=report)
        time.sleep(0.5)  # anything the call had started would show by now
    assert stream.data == []  # no task ran
    assert service_counter(client, "push_blocks") == pushes  # no block pushed
    assert service_counter(client, "finalized_shuffles") == finalized
    assert report.finalize == {} and report.merge_id == -1
    assert out.npartitions == 4 and list(out.columns) == list(ddf.columns)
    with get_task_stream(client=client) as stream:
        assert_exact(list(dask.compute(*out.to_delayed())))
    # one task per map and per reduce, and nothing else of the shuffle's (no aliases for the
    # scheduler to run); at most one more per input partition, Dask's own for the persisted input
    stages = Counter(stage_of(t["key"]) for t in stream.data)
    ours = {s: stages[s] for s in ("begin", "map", "barrier", "reduce")}
    assert ours == {"begin": 1, "map": ddf.npartitions, "barrier": 1, "reduce": 4}
    assert len(stream.data) <= sum(ours.values()) + ddf.npartitions
    assert service_counter(client, "push_blocks") > pushes
    assert report.finalize["merged_partitions"] == 4


def test_composes_with_what_follows(client, ddf, tmp_path):
    out = dfd.shuffle(ddf, "key", 5, client=client, driver_config=MERGE_ALWAYS)
    expected = ddf.compute()
    # one graph: the shuffle, then per-partition work, then a groupby
    doubled = out.map_partitions(lambda p: p.assign(twice=p["row"] * 2))
    counts = doubled.groupby("key")["twice"].sum().compute().sort_index()
    assert counts.equals(expected.assign(twice=expected["row"] * 2).groupby("key")["twice"].sum())
    # a following per-partition reduction sees each key in one partition only
    per_part = out.map_partitions(lambda p: p.groupby("key").size()).compute()
    assert per_part.index.is_unique and int(per_part.sum()) == ROWS
    # a committed write of the shuffled data, read back whole
    dfd.to_parquet(out, str(tmp_path / "shuffled"))
    back = pd.read_parquet(tmp_path / "shuffled")
    assert sorted(back["row"]) == list(range(ROWS))


def test_computing_again_runs_the_shuffle_again_exactly(client, ddf):
    report = DaskShuffleReport(False, 0, 0)
    out = dfd.shuffle(ddf, "key", 3, client=client, driver_config=MERGE_ALWAYS, report=report)
    assert_exact(list(dask.compute(*out.to_delayed())))
    first = report.merge_id
    pushes = service_counter(client, "push_blocks")
    assert_exact(list(dask.compute(*out.to_delayed())))  # maps and merge again, no duplicates
    assert service_counter(client, "push_blocks") > pushes
    assert report.merge_id != first and report.finalize["merged_partitions"] == 3


def shuffle_files(client) -> int:
    """Files under every worker's shuffle service directory (not the services' records of
    the applications registered with them)."""

    def count(dask_worker) -> int:
        plugin = dask_worker.plugins.get(PLUGIN_NAME)
        if plugin is None:
            return 0  # no shuffle has run on this cluster yet (this test alone)
        return sum(len(files) for d, _, files in os.walk(plugin.directory) if "@apps" not in d)

    return sum(client.run(count).values())


def test_files_stay_for_reruns_until_removed(client, ddf):
    dfd.remove_shuffles(client)  # the other tests' files
    assert shuffle_files(client) == 0
    out = dfd.shuffle(ddf, "key", 3, client=client, driver_config=MERGE_ALWAYS)
    assert_exact(list(dask.compute(*out.to_delayed())))
    left = shuffle_files(client)
    assert left > 0  # map outputs and merges, for a reduce task Dask may run again
    assert_exact(list(dask.compute(*out.to_delayed())))
    assert shuffle_files(client) == left  # a computation removes the one before it first
    # the reduces read their blocks from map outputs kept open for the merge
    assert sum(client.run(lambda: open_map_outputs().open_count).values()) > 0
    assert dfd.remove_shuffles(client) >= 1
    assert shuffle_files(client) == 0
    # and removing the files closes them: an open file would keep its space
    assert sum(client.run(lambda: open_map_outputs().open_count).values()) == 0
    assert_exact(list(dask.compute(*out.to_delayed())))  # computing again starts over
    assert shuffle_files(client) == left
    dfd.remove_shuffles(client)
    assert shuffle_files(client) == 0  # and what that computation left goes too


# keep last: it restarts a worker of the module's cluster


def test_a_worker_killed_mid_shuffle_loses_and_duplicates_no_row(client, ddf):
    """A worker dies while maps run: Dask runs its maps again elsewhere (new attempts whose
    pushes the merge de-duplicates by map index), the merger it held is lost and reducers read
    the original blocks of what it had merged."""

    def slow(part: pd.DataFrame) -> pd.DataFrame:
        time.sleep(0.4)
        return part

    source = ddf.repartition(npartitions=10).map_partitions(slow)
    report = DaskShuffleReport(False, 0, 0)
    out = dfd.shuffle(source, "key", 4, client=client, driver_config=MERGE_ALWAYS, report=report)
    pushes = service_counter(client, "push_blocks")
    victim = sorted(client.scheduler_info()["workers"])[0]
    future = client.compute(out.to_delayed())
    deadline = time.monotonic() + 60
    while service_counter(client, "push_blocks") == pushes:  # the first map has pushed
        assert time.monotonic() < deadline, "no map pushed within a minute"
        time.sleep(0.05)
    assert not report.finalize  # the barrier has not run: maps are still running
    client.restart_workers([victim])
    assert_exact(client.gather(future))
    # the victim's service was a merger: finalize could not reach it, its merges were read
    # from the original blocks
    assert len(report.finalize["mergers_failed"]) == 1
    assert report.finalize["merged_partitions"] < 4


def test_a_worker_dying_with_pushes_in_flight_loses_and_duplicates_no_row(client, ddf):
    """Maps hand their blocks to their worker's pusher and return. With every service frozen
    (SIGSTOP: pushes stay in flight), the maps still finish; then a worker is killed with its
    pushes in flight, and the services thaw. Dask runs the dead worker's maps again (new
    attempts that push again, de-duplicated by map index), the barrier collects the push
    completions from the mergers, and the reduces read every row exactly once."""
    import signal

    def slow_first(part: pd.DataFrame, partition_info=None) -> pd.DataFrame:
        if partition_info is not None and partition_info["number"] == 0:
            time.sleep(6)  # keeps the barrier waiting while the others have pushed
        return part

    source = ddf.repartition(npartitions=8).map_partitions(slow_first)
    report = DaskShuffleReport(False, 0, 0)
    out = dfd.shuffle(source, "key", 4, client=client, driver_config=MERGE_ALWAYS, report=report)
    services = client.run(lambda dask_worker: dask_worker.plugins[PLUGIN_NAME].service.pid)
    victim = sorted(services)[0]
    stopped = list(services.values())

    def in_memory(kind: str) -> int:
        states = client.run_on_scheduler(
            lambda dask_scheduler: {str(k): t.state for k, t in dask_scheduler.tasks.items()}
        )
        return sum(f"dataferry-shuffle-{kind}" in k and s == "memory" for k, s in states.items())

    future = client.compute(out.to_delayed())
    deadline = time.monotonic() + 60
    while not in_memory("begin"):  # begin talks to every service: let it through first
        assert time.monotonic() < deadline
        time.sleep(0.02)
    for pid in stopped:
        os.kill(pid, signal.SIGSTOP)
    try:
        while in_memory("map") < 4:  # maps finish although no push can go through
            assert time.monotonic() < deadline, "maps did not return while their pushes waited"
            time.sleep(0.1)
        assert not report.finalize  # the barrier has not finalized
        pid = client.run(os.getpid, workers=[victim])[victim]
        os.kill(pid, signal.SIGKILL)  # the victim dies with its pushes in flight
    finally:
        for p in stopped:
            try:
                os.kill(p, signal.SIGCONT)
            except ProcessLookupError:
                pass
    assert_exact(client.gather(future))
    # the barrier finalized after collecting push completions (the survivors' pushes went
    # through once thawed), and used what was merged
    assert report.finalize["used"] and report.finalize["waited_s"] > 0
