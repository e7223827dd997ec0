"""The referee on the table family (registry rows with family="table"), on Delta: the reference
job writes real Parquet files, the checks read the table through deltalake, and a broken
exactly-once check is reported."""

from __future__ import annotations

import pytest

from dataferry.commit.table.delta import committer as delta
from dataferry.store import Op
from dataferry.store.faults import TracedOp
from dataferry.verify import invariants as inv
from dataferry.verify import tables
from dataferry.verify.crash import verify_crash

pytest.importorskip("deltalake")


def _table_commit(t: TracedOp) -> bool:
    return t.op == Op.TABLE_COMMIT


def _job_commit(t: TracedOp) -> bool:
    """The table's transaction, and the save of the job's intent (the commit decided)."""
    return t.op == Op.TABLE_COMMIT or (t.op.mutates and "_commit_intent" in t.path)


def _problems(report) -> list[str]:
    return [p for s in report.all_scenarios for p in s.problems]


def test_delta_under_the_referee_breaks_nothing():
    report = verify_crash("delta", select=_job_commit, existing_data=True)
    kinds = {s.kind for s in report.all_scenarios}
    assert "ambiguous" in kinds and "existing_crash" in kinds
    ambiguous = [s for s in report.of_kind("ambiguous") if s.op == Op.TABLE_COMMIT.value]
    assert {s.when for s in ambiguous} == {"before", "after"}
    crashes = [s for s in report.of_kind("crash") if s.op == Op.TABLE_COMMIT.value]
    assert {s.when for s in crashes} == {"before", "after"}
    assert report.total_violations == 0, _problems(report)[:5]
    assert tables.active() is None  # the referee leaves this process reading files again


def test_the_referee_reads_the_table_not_the_files(tmp_path):
    from dataferry.store import open_store
    from dataferry.verify.harness import deterministic_options, run_reference

    options = deterministic_options("delta")
    store = open_store(str(tmp_path / "t"), latency_scale=0.0)
    with tables.read_as("delta", options):
        out = run_reference("delta", store, "append", options)
        assert out.committed
        files = inv.visible_files(store)
        assert len(files) == 12 and all(f.endswith(".dat") for f in files)
        assert inv.check_jobs(store, [out.job_uuid]) == []
        assert inv.has_success(store)
        assert inv.check_no_leftovers(store, ("_SUCCESS", "_delta_log")) == []
        stray = "part=p0/stray.parquet"
        store.write_bytes(stray, b"PAR1")
        assert any(p.startswith(inv.NO_ORPHANS) for p in inv.check_no_leftovers(store))


def test_a_commit_applied_without_reading_the_log_back_is_reported(monkeypatch):
    """Delta's exactly-once check broken on purpose: the table never says the job's
    transaction landed, so a commit that landed but answered a timeout fails the job, whose
    abort deletes files the table now references."""
    real = delta.commit_exactly_once

    def never_landed(ctx, what, landed, commit, is_conflict, retries, label="", pause=None):
        return real(ctx, what, lambda: None, commit, is_conflict, retries, label, pause)

    monkeypatch.setattr(delta, "commit_exactly_once", never_landed)
    report = verify_crash("delta", select=_table_commit)
    bad = [s for s in report.of_kind("ambiguous") if s.problems]
    assert bad, "the referee missed a table commit applied without reading the log back"
    assert all(s.when == "after" for s in bad)
    assert report.total_violations > 0
