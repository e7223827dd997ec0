"""The referee's schedules for one guarantee each (`guarantees.py`), at the smallest shape that
still fails when the guarantee is broken, on the local store with `manifest`."""

from __future__ import annotations

import pytest

from dataferry.verify.harness import EXISTING, ScenarioStores, deterministic_options
from dataferry.verify.intents import INTENT_DAMAGE, run_damaged_intents
from dataferry.verify.landed import run_table_landed
from dataferry.verify.writing import run_cleanup_writing

COMMITTER = "manifest"


@pytest.fixture
def stores():
    s = ScenarioStores(None)
    yield s
    s.close()


def _problems(scenarios) -> list[str]:
    return [f"{s.kind} {s.mode} [{s.schedule}]: {p}" for s in scenarios for p in s.problems]


def test_a_damaged_intent_is_never_taken_for_no_decision(stores):
    """An overwrite killed just after its intent record, the record then cut short, oversized,
    made a directory or overwritten with garbage: were any of them read as "no decision", the
    cleanup would roll the decided commit back (after its deletes, both data sets lost)."""
    out = run_damaged_intents(
        COMMITTER,
        stores,
        deterministic_options(COMMITTER),
        modes=("overwrite",),
        points=("decided",),
    )
    ran = [s for s in out if s.kind == "damaged_intent"]
    assert len(ran) == len(INTENT_DAMAGE), [s.schedule for s in out]
    assert all("1 record(s)" in s.schedule for s in ran), [s.schedule for s in ran]
    assert not _problems(out)
    assert all(s.outcome == "holder killed, cleanup failed:cleanup" for s in ran)


def test_cleanup_leaves_a_job_whose_tasks_are_still_writing(stores):
    """A job with no driver record, its directories two hours old, its last task's files
    seconds old, and `cleanup --older-than 3600`: were a leftover aged by its directory's own
    time instead of its newest file, cleanup would roll the running job back and its commit
    would fail."""
    out = run_cleanup_writing(
        COMMITTER, stores, deterministic_options(COMMITTER), modes=("overwrite",)
    )
    assert [s.kind for s in out] == ["cleanup_writing"]
    assert not _problems(out)
    assert out[0].outcome == "committed"
    assert "back 0" in out[0].schedule, out[0].schedule


@pytest.mark.filterwarnings("ignore::Warning")
@pytest.mark.parametrize(
    ("committer", "library"), [("delta", "deltalake"), ("iceberg", "pyiceberg")]
)
def test_a_table_commit_that_landed_is_in_the_table_once(stores, committer, library):
    """The job's transaction lands and is answered with the format's conflict, a timeout or an
    I/O error: were it tried again without asking the table, an append would be in the table
    twice (every row of the job duplicated for its readers)."""
    pytest.importorskip(library)
    out = run_table_landed(
        committer,
        stores,
        deterministic_options(committer),
        variants=[(EXISTING, "append")],
    )
    assert len(out) == 3
    assert not _problems(out)
    assert "the format's conflict" in out[0].schedule, out[0].schedule
    assert all(s.outcome == "committed" for s in out)


def test_a_holder_overtaken_while_publishing_stops_at_its_next_batch(stores):
    """An append stopped half way through publishing, past its lease, overtaken by a job that
    recovers it and commits: were a publish batch not to ask the claim first, the holder
    would go on publishing the rest of its files after the other job's commit, changing what
    its readers see wherever a file is still there to move (here each finds its file moved
    already, and the referee counts the holder's publishing operations)."""
    from dataferry.verify.races import run_races

    out = run_races(
        COMMITTER,
        stores,
        deterministic_options(COMMITTER),
        schedules=("overtaken_batches",),
        variants=[(EXISTING, "append")],
        points=("applying",),
    )
    ran = [s for s in out if s.kind == "overtaken_batches"]
    assert len(ran) == 1, [s.schedule for s in out]
    assert not _problems(out)
    assert ran[0].outcome.endswith("T committed"), ran[0].outcome
