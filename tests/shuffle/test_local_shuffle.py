"""The embedded engine's shuffle: node services as subprocesses, tasks on a process pool."""

from __future__ import annotations

import functools
import os
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from dataferry.engine.shuffle import LocalShuffle, LocalShuffleConfig
from dataferry.errors import EngineError
from dataferry.shuffle import DriverConfig

MAPS, REDUCES, ROWS = 8, 12, 4000


def source(i: int) -> pa.Table:
    rng = np.random.default_rng(i)
    return pa.table(
        {
            "key": rng.integers(0, 500, ROWS),
            "row": np.arange(ROWS) + i * ROWS,  # a unique id per input row
            "payload": rng.random(ROWS),
        }
    )


def fails_first(flag: str, i: int) -> pa.Table:
    """Input `i`, but the first call (in any worker) fails, as a lost executor would."""
    try:
        os.close(os.open(flag, os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return source(i)
    raise OSError(f"map {i}: first attempt lost")


def always_fails(i: int) -> pa.Table:
    raise OSError(f"map {i}: input unreadable")


SOURCES = [functools.partial(source, i) for i in range(MAPS)]
EXPECTED = Counter(pa.concat_tables([s() for s in SOURCES]).column("row").to_pylist())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cfg = LocalShuffleConfig(nodes=2, workers=2, driver=DriverConfig(min_shuffle_size_to_wait=0))
    with LocalShuffle(cfg, root=str(tmp_path_factory.mktemp("shuffle"))) as ls:
        yield ls


def check_exact(run) -> None:
    rows = Counter()
    key_homes: dict[int, int] = {}
    for r, table in enumerate(run.results):
        rows.update(table.column("row").to_pylist())
        for k in set(table.column("key").to_pylist()):
            assert key_homes.setdefault(k, r) == r  # every key in one partition only
    assert rows == EXPECTED  # every row exactly once


def test_push_and_pull_give_the_same_partitions(cluster):
    pull = cluster.run(SOURCES, ["key"], REDUCES, push=False)
    push = cluster.run(SOURCES, ["key"], REDUCES, push=True)
    check_exact(pull)
    check_exact(push)
    for a, b in zip(pull.results, push.results, strict=True):
        assert sorted(a.column("row").to_pylist()) == sorted(b.column("row").to_pylist())
    assert not pull.push and push.push
    assert push.finalize["merged_partitions"] == REDUCES
    assert all(rep["merged_blocks"] > 0 for rep in push.read_reports)
    assert push.counter("reduce_reads") < pull.counter("reduce_reads")
    # the nodes share a host: the maps' blocks were merged by reference, found in their files
    assert push.counter("reduce_ref_blocks") == pull.counter("reduce_reads")


def test_speculative_maps_yield_no_duplicate_rows(cluster):
    run = cluster.run(SOURCES, ["key"], REDUCES, push=True, speculate_maps=[0, 3, 5])
    check_exact(run)
    # every map's blocks reached the mergers before finalize (the driver waited for their push
    # completions), speculative attempts' pushes besides
    assert run.service_counter("push_blocks") >= MAPS * REDUCES


def test_kill_a_merger_mid_push_and_the_job_completes(cluster):
    """kill -9 of a node's service while maps are pushing: the node manager (our supervisor)
    restarts it on the same port; unfinished merges are lost, map outputs are not, and the
    reducers read what was not merged from the map outputs."""
    victim = cluster.services[1]
    before = cluster.restarts

    def kill_after_first(map_index: int) -> None:
        if victim.alive and cluster.restarts == before:
            victim.kill()

    run = cluster.run(SOURCES, ["key"], REDUCES, push=True, on_map_done=kill_after_first)
    check_exact(run)
    assert cluster.restarts > before
    reads = run.read_reports
    assert sum(r["original_blocks"] + r["fallback_maps"] for r in reads) > 0


def test_a_failed_map_runs_again_as_a_new_attempt(cluster, tmp_path):
    flag = str(tmp_path / "failed-once")
    sources = [*SOURCES[:2], functools.partial(fails_first, flag, 2), *SOURCES[3:]]
    run = cluster.run(sources, ["key"], REDUCES, push=True)
    check_exact(run)
    assert os.path.exists(flag)  # the first attempt did fail


def test_a_map_that_fails_every_attempt_fails_the_shuffle_naming_it(cluster):
    sources = [*SOURCES[:1], functools.partial(always_fails, 1)]
    with pytest.raises(EngineError, match=r"map task 1 failed 4 times.*input unreadable"):
        cluster.run(sources, ["key"], REDUCES, push=False)
