"""The referee on a real NameNode (the suite's MiniDFSCluster, through hdfs-native): the
committers `auto` and the seeds use on HDFS, each at a sample of its crash points and
ambiguous answers. `dataferry verify crash --committer manifest|v1|hive --store hdfs://...`
runs them all (docs/protocols.md's referee table)."""

from __future__ import annotations

import pytest

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


@pytest.mark.parametrize("committer", ["manifest", "v1", "hive"])
def test_no_violations_on_a_real_namenode(committer, hdfs_url):
    """Crashes before and after the job's moves, and their ambiguous answers (done or not,
    the client cannot tell), on HDFS's own rename: a committer that relied on what only the
    `sim:hdfs` model does (or a store whose rename were not the NameNode's) would leave a
    half-committed or duplicated output here."""
    report = verify_crash(
        committer, hdfs_url, every=EVERY, limit=LIMIT, select=_a_move, processes=PROCESSES
    )
    assert report.total_violations == 0, report.to_json(3)["examples"]
    assert len(report.scenarios) == LIMIT + 1 and len(report.extra) == LIMIT
    assert all(s.op == "rename" for s in report.scenarios[1:])
    assert report.outcomes["committed"] > 0


def _in_the_load(t) -> bool:
    """An operation of the Hive load: a move out of the staged tree into the table."""
    return ".hive-staging" in t.path and "-ext-10000/part=" in t.path and t.op.value == "rename"


def test_the_hive_load_is_restartable_on_a_real_namenode(hdfs_url):
    """The staged load (directory renames and parallel file moves) crashed before and after
    each of a sample of its moves on the NameNode, then recovered from its journal: every
    partition is all there or not at all, never a file twice. A load that were not journaled
    (or whose restart redid a move the NameNode had already made) would lose or duplicate
    files here, which is the seed's Hive story on a real cluster."""
    report = verify_crash("hive", hdfs_url, select=_in_the_load, limit=2, processes=PROCESSES)
    assert report.total_violations == 0, report.to_json(3)["examples"]
    moves = [s for s in report.scenarios if s.op == "rename" and "-ext-10000/part=" in s.path]
    assert len(moves) >= 2, "the load's moves must be among the crash points"


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
