"""The referee refereed with committers broken on purpose (`broken_committers.py`): each must be
reported under the invariant it breaks, and deleting the check that sees it must make its
test fail. A test fails if any broken committer goes unseen."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from dataferry.commit.registry import KNOWN
from dataferry.store import Op, paths
from dataferry.store.faults import TracedOp
from dataferry.verify import crash, harness, verify_crash
from dataferry.verify import invariants as inv
from dataferry.verify.child import ChildSpec, run_child
from dataferry.verify.crash_report import CrashReport
from dataferry.verify.driver_kills import run_driver_kills
from dataferry.verify.harness import ScenarioStores, deterministic_options

from .broken_committers import BROKEN, PRELOAD, SPECS


@pytest.fixture(autouse=True)
def broken_rows(monkeypatch):
    """The broken committers' registry rows, for this test only."""
    for name, spec in SPECS.items():
        monkeypatch.setitem(KNOWN, name, spec)


@dataclass(frozen=True)
class Case:
    """A targeted referee run: the crash points and ambiguous answers at the operations
    `select` accepts (`limit`: only the first few), on `store` ('s3': the test server)."""

    committer: str
    store: str
    select: Callable[[TracedOp], bool]
    limit: int | None = None

    @property
    def invariant(self) -> str:
        return BROKEN[self.committer]


def _none(t: TracedOp) -> bool:
    return False  # the crash-free run alone


def _job_commit_renames(t: TracedOp) -> bool:
    return t.op == Op.RENAME and not paths.is_hidden(t.dest)


def _before_the_intent(t: TracedOp) -> bool:
    return t.op == Op.WRITE and t.path.endswith("_commit_intent.json")


def _first_upload_part(t: TracedOp) -> bool:
    return t.op == Op.MULTIPART_PART and t.path.endswith("t0-f0-a0.dat")


def _the_load(t: TracedOp) -> bool:
    return t.op == Op.RENAME and "-ext-10000/part=" in t.path


CASES = {
    "broken-drops-file": Case("broken-drops-file", "local", _none),
    "broken-ambiguous": Case("broken-ambiguous", "local", _job_commit_renames, limit=2),
    "broken-no-rollback": Case("broken-no-rollback", "local", _before_the_intent),
    "broken-abort-uploads": Case("broken-abort-uploads", "s3", _before_the_intent, limit=1),
    "broken-dead-attempts": Case("broken-dead-attempts", "s3", _first_upload_part, limit=1),
    "broken-journal-late": Case("broken-journal-late", "sim:hdfs", _the_load),
}
ON_S3 = {name for name, c in CASES.items() if c.store == "s3"}


def referee(case: Case, request: pytest.FixtureRequest) -> CrashReport:
    store = request.getfixturevalue("s3_url") if case.store == "s3" else case.store
    return verify_crash(
        case.committer,
        None if store == "local" else store,
        select=case.select,
        limit=case.limit,
        preload=(PRELOAD,),
    )


def assert_caught(report: CrashReport, invariant: str) -> None:
    """What each broken committer's test asserts: seen, and under its own invariant."""
    examples = report.to_json(5)["examples"]
    assert report.total_violations > 0, f"{report.committer} went unseen"
    assert report.violations[invariant] > 0, (
        f"{report.committer} not reported under {invariant}: {report.violations} {examples}"
    )


def _param(name: str):
    marks = [pytest.mark.slow] if name in ON_S3 else []
    return pytest.param(CASES[name], id=name, marks=marks)


def test_every_broken_committer_has_a_case():
    assert set(CASES) == set(BROKEN) == set(SPECS)


@pytest.mark.parametrize("case", [_param(n) for n in CASES])
def test_broken_committer_is_reported_under_the_invariant_it_breaks(case, request):
    assert_caught(referee(case, request), case.invariant)


# --- the checks cannot be deleted silently ------------------------------------------------


def _without(monkeypatch, name: str) -> None:
    """Delete one check of the referee: it finds nothing, wherever it is called from (every
    module of the referee that holds the name, by import or by definition)."""
    referee_modules = [m for n, m in sys.modules.items() if n.startswith("dataferry.verify.")]
    assert inv in referee_modules and harness in referee_modules
    for module in referee_modules:
        if hasattr(module, name):
            monkeypatch.setattr(module, name, lambda *a, **k: [])


@pytest.mark.parametrize(
    ("check", "committer"),
    [
        ("check_output", "broken-drops-file"),  # the complete-output check
        ("check_outcome", "broken-no-rollback"),  # all or nothing after recovery
        ("check_outcome", "broken-journal-late"),
    ],
)
def test_deleting_the_check_makes_the_broken_committers_test_fail(
    check, committer, monkeypatch, request
):
    _without(monkeypatch, check)
    case = CASES[committer]
    with pytest.raises(AssertionError):
        assert_caught(referee(case, request), case.invariant)


def test_the_ambiguous_case_is_what_the_real_committer_passes():
    """The same answers leave the real manifest committer's output complete: the violation
    is the broken committer's, not the scenario's."""
    case = CASES["broken-ambiguous"]
    report = verify_crash("manifest", None, select=case.select, limit=case.limit)
    assert report.ambiguous_points == 2
    assert report.violations[inv.COMPLETE] == 0, report.to_json(3)["examples"]


# --- a child driver knows the broken committers through its preload -------------------------


def test_a_child_driver_imports_the_preload_first():
    stores = ScenarioStores(None)
    try:
        opts = deterministic_options("broken-drops-file")
        spec = ChildSpec("broken-drops-file", stores.url("child"), "error", opts, "1" * 32)
        outcome, detail, _ = run_child(spec, 60)
        assert outcome != "committed" and "unknown committer" in detail  # not without it
        spec = ChildSpec(
            "broken-drops-file",
            stores.url("child-preloaded"),
            "error",
            opts,
            "2" * 32,
            preload=(PRELOAD,),
            import_path=tuple(p for p in sys.path if p),
        )
        outcome, detail, _ = run_child(spec, 60)
        assert outcome == "committed", detail
    finally:
        stores.close()


def test_driver_kills_run_a_broken_committer_in_the_child():
    stores = ScenarioStores(None)
    try:
        opts = deterministic_options("broken-drops-file")
        scenarios = run_driver_kills("broken-drops-file", stores, opts, 1, preload=(PRELOAD,))
    finally:
        stores.close()
    assert not [s for s in scenarios if s.outcome == "child_error"], [s.schedule for s in scenarios]
    assert any(s.outcome == "killed" for s in scenarios)
    # the children's kill-free runs commit without a file: only the broken committer does that
    assert any(inv.COMPLETE in s.violated for s in scenarios if s.index is None)


def test_the_command_passes_its_preloads_on(monkeypatch):
    from typer.testing import CliRunner

    from dataferry.cli import app

    seen = {}

    def fake(committer, store, **kwargs):
        seen.update(kwargs, committer=committer)
        return CrashReport(committer, store or "local", 0, [])

    monkeypatch.setattr(crash, "verify_crash", fake)
    res = CliRunner().invoke(
        app,
        ["verify", "crash", "--committer", "broken-drops-file", "--preload", PRELOAD, "--json"],
    )
    assert res.exit_code == 0, res.output
    assert seen["preload"] == (PRELOAD,) and seen["committer"] == "broken-drops-file"
