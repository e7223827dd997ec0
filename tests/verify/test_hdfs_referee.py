"""The referee on a real NameNode (the suite's MiniDFSCluster, through hdfs-native): the
committers `auto` and the seeds use on HDFS, each at a sample of its crash points and
ambiguous answers. `dataferry verify crash --committer manifest|v1|hive --store hdfs://...`
runs them all (docs/protocols.md's referee table)."""

from __future__ import annotations

from fnmatch import fnmatchcase

import pytest

from dataferry.store import FaultRule, Op
from dataferry.verify import verify_crash

pytestmark = pytest.mark.xdist_group("hdfs")

# the sample: crash points and ambiguous answers at the job's moves of its data files on the
# NameNode, every EVERY-th of them (odd: before and after both stay among them), at most LIMIT
# of each; all of them at once, one to a process (PROCESSES), as each is a whole job, and a
# rerun, waiting on the NameNode's closes. The whole run is the command line's.
EVERY = 7
LIMIT = 2
PROCESSES = 4


def _a_move(t) -> bool:
    """A move of one of the job's data files (named `.inflight` until published), not one
    inside a hidden staging tree (Hive's `.hive-staging_*`)."""
    return t.op.value == "rename" and t.path.endswith(".inflight") and not t.path.startswith(".")


class _Seen:
    """A sample's `select` that remembers the trace indices it accepted (the Hive load's
    first and last move are its smallest and largest)."""

    def __init__(self, accepts) -> None:
        self.accepts, self.indices = accepts, set()

    def __call__(self, t) -> bool:
        if self.accepts(t):
            self.indices.add(t.index)
            return True
        return False


def _hive_sample(report, seen: _Seen) -> None:
    """The Hive load's sample: a crash before its first move, finished by the restart from
    the journal (which must make every move), and one after its last move, undone by
    `cleanup --rollback` (which must undo every move)."""
    points = {(s.index, s.when, s.kind) for s in report.scenarios[1:]}
    first, last = min(seen.indices), max(seen.indices)
    assert (first, "before", "crash") in points, (first, points)
    assert (last, "after", "rolled_back") in points, (last, points)


# the Hive load's sample at its data files' moves: the first one's `before` and the last
# one's `after` (12 moves: 24 crash points, every 23rd), the `after` undone (`rollback`)
HIVE_EVERY = 23


@pytest.mark.parametrize("committer", ["manifest", "v1", "hive"])
def test_no_violations_on_a_real_namenode(committer, hdfs_url):
    """Crashes before and after the job's moves, and their ambiguous answers (done or not,
    the client cannot tell), on HDFS's own rename: a committer that relied on what only the
    `sim:hdfs` model does (or a store whose rename were not the NameNode's) would leave a
    half-committed or duplicated output here. Hive's load into a fresh table (a directory
    rename per partition, then each file renamed in place to its own name) is crashed before
    its first file's rename (its restart must make every move left: one forgotten leaves a
    file under its in-flight name, which a glob reader misses) and after its last
    (`cleanup --rollback` must undo every move: a partition skipped stays in the table, with
    none of the job's other files; a file's rename skipped is harmless here, as it goes back
    with its partition: the next test undoes file moves)."""
    hive = committer == "hive"
    seen = _Seen(_a_move)
    report = verify_crash(
        committer,
        hdfs_url,
        every=HIVE_EVERY if hive else EVERY,
        limit=LIMIT,
        select=seen,
        processes=PROCESSES,
        rollback=("after",) if hive else (),
    )
    assert report.total_violations == 0, report.to_json(3)["examples"]
    assert len(report.scenarios) == LIMIT + 1 and len(report.extra) == LIMIT
    assert all(s.op == "rename" for s in report.scenarios[1:])
    assert report.outcomes["committed"] > 0
    if hive:
        _hive_sample(report, seen)


# where the Hive load appending into partitions the table holds (its files moved one by one)
# is crashed: before its first move, and once its last move is done (before it marks its moves
# done in its journal); `*` matches across `/`
FIRST_MOVE = FaultRule(kinds=frozenset({Op.RENAME}), path_glob="*/-ext-10000/part=*")
ALL_MOVED = FaultRule(kinds=frozenset({Op.WRITE}), path_glob="*/_commit_intent.json.moved")
EARLIER, JOB = "e0e0e0e0-0000-4000-8000-000000000001", "10b10b10-0000-4000-8000-000000000002"


def _load_crashed(args: tuple[str, FaultRule, bool]):
    """One job appending into a table's partitions, crashed by `rule`, then recovered by its
    driver (the load finished from its journal) or, with `rollback`, by `cleanup --rollback`
    (the load undone from it): the earlier data as it was and the job all there or not at all
    (`check_outcome`). No rerun: the destination's next job is the test above's."""
    from dataferry.verify.existing import run_existing_scenario
    from dataferry.verify.harness import deterministic_options, discard, quiet_store

    url, rule, rollback = args
    options = deterministic_options("hive")
    scenario, trace = run_existing_scenario(
        "hive", url, "append", [rule], options, (EARLIER, JOB), rollback, again=False
    )
    hit = next(t for t in trace if t.op in rule.kinds and fnmatchcase(t.path, rule.path_glob))
    scenario.index, scenario.op, scenario.path = hit.index, hit.op.value, hit.path
    scenario.when = "before"
    discard(quiet_store(url))
    return scenario


def test_the_hive_load_is_restartable_on_a_real_namenode(hdfs_url):
    """The staged load appending into partitions the table holds (its files moved one by one,
    in parallel) crashed before its first move on the NameNode, then finished from its
    journal, and crashed once its last move was done, then undone from it (`cleanup
    --rollback`): the earlier data as it was and the job all there or not at all, never a
    file twice. A load that were not journaled, whose restart forgot or redid a move, or whose
    undo skipped a file, would lose, duplicate or leave files here, which is the seed's Hive
    story on a real cluster."""
    from dataferry.verify.harness import ScenarioStores
    from dataferry.verify.scenario import run_scenarios

    stores = ScenarioStores(hdfs_url)
    try:
        jobs = [(stores.url("restart"), FIRST_MOVE, False), (stores.url("undo"), ALL_MOVED, True)]
        found = run_scenarios(_load_crashed, jobs, len(jobs), (), lambda _total: None)
    finally:
        stores.close()
    assert not [p for s in found for p in s.problems], [(s.path, s.problems) for s in found]
    assert [(s.outcome, s.kind) for s in found] == [
        ("driver_crashed", "existing_crash"),
        ("driver_crashed", "existing_rolled_back"),
    ]


def test_the_command_samples_with_every(monkeypatch):
    """`verify crash --every N` hands the sample to the referee (how the HDFS rows of
    docs/protocols.md were run): were it dropped, the command would run every crash point, an
    hour on a loaded NameNode."""
    import json

    from typer.testing import CliRunner

    from dataferry.cli import app
    from dataferry.verify import crash

    seen = {}
    real = crash.verify_crash

    def spy(committer, store=None, **kw):
        seen.update(kw)
        return real(committer, store, **{**kw, "limit": 2})

    monkeypatch.setattr(crash, "verify_crash", spy)
    args = ["verify", "crash", "--committer", "v1", "--store", "sim:hdfs", "--every", "41"]
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    assert seen["every"] == 41 and json.loads(res.stdout)["total_violations"] == 0
