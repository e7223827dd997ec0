"""The referee's other kinds, refereed: dead drivers, zombie attempts, racing jobs and
destinations that already hold data. Each kind must find violations in v2 (proof the checks
can fail) and must run, with its counts in the JSON, for manifest."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from dataferry.store import Op, open_store
from dataferry.store.faults import call_at
from dataferry.verify import invariants as inv
from dataferry.verify import verify_crash
from dataferry.verify.concurrent import run_concurrent
from dataferry.verify.driver_kills import kill_points, run_driver_kills
from dataferry.verify.earlier import write_earlier
from dataferry.verify.harness import (
    ScenarioStores,
    check_outcome,
    deterministic_options,
    run_reference,
    seeded_uuid,
)
from dataferry.verify.reference import file_bytes, file_path, job_tag
from dataferry.verify.zombies import run_zombies


def _violations(scenarios) -> dict[str, int]:
    counts: dict[str, int] = {}
    for s in scenarios:
        for name in s.violated:
            counts[name] = counts.get(name, 0) + 1
    return counts


@pytest.fixture
def stores():
    s = ScenarioStores(None)
    yield s
    s.close()


# --- the fault actions ---------------------------------------------------------------------------


def test_callback_fault_runs_at_its_operation_and_the_operation_goes_on(tmp_path):
    seen = []
    store = open_store(
        str(tmp_path), faults=[call_at(1, lambda i, op, path: seen.append((i, op, path)))]
    )
    store.write_bytes("a", b"1")
    store.write_bytes("b", b"2")
    store.write_bytes("c", b"3")
    assert seen == [(1, Op.WRITE, "b")]
    assert store.read_bytes("b") == b"2"


def test_kill_fault_kills_the_process_for_real(tmp_path):
    code = (
        "import sys; from dataferry.store import open_store; "
        "from dataferry.store.faults import kill_at; "
        "s = open_store(sys.argv[1], faults=[kill_at(1, 'after')]); "
        "s.write_bytes('a', b'1'); s.write_bytes('b', b'2'); s.write_bytes('c', b'3')"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], timeout=60)
    assert proc.returncode == -9
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]  # b took effect, then death


# --- the checks themselves fail on bad destinations ---------------------------------------------


def test_checks_see_a_half_visible_job_and_damaged_earlier_data(stores):
    url = stores.url("checks")
    opts = deterministic_options("manifest")
    earlier = write_earlier("manifest", url, opts)
    store = open_store(url)
    assert check_outcome(store, "0" * 32, "append", earlier, "killed", ("_SUCCESS",)) == []
    # a job half visible, and one earlier file changed
    job = "12345678-0000-4000-8000-000000000000"
    store.write_bytes(file_path(0, 0, 0, job_tag(job)), file_bytes(0, 0, 0, job))
    damaged = sorted(earlier)[0]
    store.write_bytes(damaged, b"not what it was")
    problems = check_outcome(store, job, "append", earlier, "killed", ("_SUCCESS",))
    names = {p.split(":", 1)[0] for p in problems}
    assert {inv.NOTHING_OF_FAILED, inv.EARLIER_KEPT, inv.COMPLETE} <= names, problems


def test_earlier_data_must_be_gone_when_replaced_and_intact_when_kept(tmp_path):
    store = open_store(str(tmp_path))
    store.write_bytes("a", b"1")
    store.write_bytes("b", b"2")
    earlier = inv.snapshot(store)
    visible = inv.visible_files(store)
    assert inv.check_earlier(store, earlier, visible, replaced=()) == []
    (left,) = inv.check_earlier(store, earlier, visible, replaced={"a", "b"})
    assert left == (
        f"{inv.WRITE_MODE}: the write mode left 2 of the 2 earlier files it replaces, e.g. a"
    )
    store.delete("a")
    store.delete("b")
    assert inv.check_earlier(store, earlier, [], replaced={"a", "b"}) == []
    (lost,) = inv.check_earlier(store, earlier, [], replaced=())
    assert lost.startswith(f"{inv.EARLIER_KEPT}: earlier data lost 2 of 2"), lost


def test_a_partition_overwrite_replaces_the_partitions_the_job_writes_and_keeps_the_others(
    tmp_path,
):
    store = open_store(str(tmp_path))
    for path in ("part=p0/x.dat", "part=p1/y.dat", "part=p2/z.dat"):
        store.write_bytes(path, b"old")
    earlier = inv.snapshot(store)
    written = inv.replaced_by("overwrite-partitions", earlier)
    assert written == {"part=p0/x.dat", "part=p1/y.dat"}
    assert inv.replaced_by("overwrite", earlier) == set(earlier)
    assert inv.replaced_by("append", earlier) == set()
    store.delete("part=p0", recursive=True)
    store.delete("part=p1", recursive=True)
    assert inv.check_earlier(store, earlier, inv.visible_files(store), written) == []
    store.delete("part=p2", recursive=True)  # the untouched partition must stay
    (lost,) = inv.check_earlier(store, earlier, [], written)
    assert lost.startswith(f"{inv.EARLIER_KEPT}: earlier data lost 1 of 1"), lost


def test_unique_names_carry_the_job_and_the_old_names_still_parse(stores):
    url = stores.url("names")
    out = run_reference("manifest", open_store(url), "error", deterministic_options("manifest"))
    assert out.committed and out.commit_start is None  # no FaultStore: no trace indices
    store = open_store(url)
    files = inv.visible_files(store)
    assert files and all(f"-j{job_tag(out.job_uuid)}" in f for f in files)
    assert inv.check_jobs(store, [out.job_uuid]) == []
    assert inv.check_output(store) == []  # the one-job check reads unique names too


def test_kill_points_are_spread_and_reproducible():
    a = kill_points(100, 140, 10, random.Random("0:x"))
    b = kill_points(100, 140, 10, random.Random("0:x"))
    assert a == b and len(a) == 10 and len(set(a)) == 10
    assert all(100 <= i < 140 for i, _ in a)
    assert a[0][0] < 104 and a[-1][0] >= 136  # one from each stratum: both ends covered
    assert kill_points(100, 103, 10, random.Random(1)) == [
        (i, w) for i in range(100, 103) for w in ("before", "after")
    ]


# --- dead drivers --------------------------------------------------------------------------------


def test_driver_kills_find_v2_violations(stores):
    scenarios = run_driver_kills("v2", stores, deterministic_options("v2"), 2)
    kills = [s for s in scenarios if s.index is not None]
    assert len(kills) >= 6 and any(s.outcome == "killed" for s in kills)
    v = _violations(scenarios)
    # v2 puts task output in the destination: a dead driver leaves it there
    assert v.get(inv.NOTHING_OF_FAILED, 0) + v.get(inv.EARLIER_KEPT, 0) > 0, v


def test_driver_kills_run_for_manifest(stores):
    scenarios = run_driver_kills("manifest", stores, deterministic_options("manifest"), 2)
    kills = [s for s in scenarios if s.index is not None]
    assert len(kills) >= 6
    assert sum(s.outcome == "killed" for s in kills) >= len(kills) - 2
    assert {(s.destination, s.mode) for s in scenarios} == {
        ("fresh", "error"),
        ("existing", "error"),
        ("existing", "append"),
        ("existing", "overwrite"),
    }
    # TIGHTEN to `_violations(scenarios) == {}` once the commit changes (roll forward/back in
    # `dataferry cleanup`) have landed: today a kill late in an append can leave `_dataferry`.
    assert all(isinstance(s.problems, list) for s in scenarios)


# --- zombie attempts -----------------------------------------------------------------------------


def test_zombies_find_v2_violations(stores):
    scenarios = run_zombies("v2", stores, deterministic_options("v2"), max_points=3)
    assert {s.schedule.split()[0] for s in scenarios} >= {
        "before_job_commit",
        "in_job_commit",
        "after_success",
    }
    v = _violations(scenarios)
    # the zombie's task commit merges into the destination, even after _SUCCESS
    assert v.get(inv.EXCLUSIVE, 0) > 0 and v.get(inv.STABLE, 0) > 0, v


def test_zombies_run_for_manifest(stores):
    scenarios = run_zombies("manifest", stores, deterministic_options("manifest"), max_points=3)
    assert len(scenarios) >= 4 * 3
    assert any("zombie committed" in s.outcome for s in scenarios)
    # TIGHTEN to `_violations(scenarios) == {}` once the commit changes have landed (manifest
    # is expected to show none; it showed none when this test was written).
    assert all(isinstance(s.problems, list) for s in scenarios)


# --- racing jobs ---------------------------------------------------------------------------------


def test_concurrent_jobs_find_v2_violations(stores):
    scenarios = run_concurrent("v2", stores, deterministic_options("v2"), points=2)
    assert len(scenarios) == 2 * 3 * 2
    v = _violations(scenarios)
    # in mode error two v2 jobs see each other's task output as data: neither commits
    assert v.get(inv.ONE_WRITER, 0) > 0, v


def test_concurrent_jobs_run_for_manifest(stores):
    scenarios = run_concurrent("manifest", stores, deterministic_options("manifest"), points=3)
    assert len(scenarios) == 2 * 3 * 3
    fresh_error = [s for s in scenarios if s.destination == "fresh" and s.mode == "error"]
    assert fresh_error and all(s.outcome.count("committed") <= 2 for s in fresh_error)
    # TIGHTEN to `_violations(scenarios) == {}` once the destination claim has landed (it
    # showed none when this test was written).
    assert all(isinstance(s.problems, list) for s in scenarios)


# --- everything through verify_crash and the command -------------------------------------------


def test_verify_crash_json_has_the_new_kinds():
    report = verify_crash(
        "manifest",
        None,
        limit=2,
        driver_kills=1,
        zombies=True,
        concurrent_jobs=True,
        existing_data=True,
        zombie_points=1,
        concurrent_points=2,
    )
    data = report.to_json()
    assert data["scenarios"] == 3  # the crash-free run and 2 crash points, as before
    assert data["ambiguous_points"] == 2  # limited as the crash points are
    assert data["driver_kills"] >= 3
    assert data["zombie_schedules"] >= 10
    assert data["concurrent_runs"] == 12
    # each write mode, a partition overwrite included: the crash-free run and 2 crash points
    assert data["existing_data_crash_points"] == 4 * (1 + 2)
    assert set(data["kinds"]) == {
        "crash",
        "ambiguous",
        "existing_crash",
        "driver_kill",
        "zombie",
        "concurrent",
    }
    assert set(data["violations"]) == set(inv.ALL)
    assert data["total_violations"] == sum(data["violations"].values())
    for ex in data["examples"]:
        assert {"kind", "mode", "destination", "schedule", "problems"} <= set(ex)
    json.dumps(data)
    # TIGHTEN to `data["total_violations"] == 0` once the commit changes have landed.


def test_driver_kills_are_skipped_on_a_store_private_to_this_process():
    report = verify_crash("v1", "memory://dataferry-kinds", limit=1, driver_kills=2)
    assert report.driver_kills == 0 and "driver_kill" in report.skipped


def test_verify_crash_command_takes_the_new_options(monkeypatch):
    """The command's options reach `verify_crash` (--concurrent-jobs turns the races on) and
    its JSON has the new kinds. The run itself is cut to a few crash points, two concurrent
    points and no race schedule (the races have tests of their own, `test_races.py`)."""
    from typer.testing import CliRunner

    from dataferry.cli import app
    from dataferry.verify import crash

    real, asked = crash.verify_crash, {}

    def smaller(committer, store=None, **kwargs):
        asked.update(kwargs, committer=committer, store=store)
        return real(committer, store, **{**kwargs, "limit": 4, "concurrent_points": 2, "races": ()})

    monkeypatch.setattr(crash, "verify_crash", smaller)
    res = CliRunner().invoke(
        app,
        [
            "verify",
            "crash",
            "--committer",
            "v2",
            "--store",
            "sim:hdfs",
            "--concurrent-jobs",
            "--seed",
            "3",
            "--json",
        ],
    )
    assert res.exit_code == 1, res.output
    assert asked["committer"] == "v2" and asked["store"] == "sim:hdfs"
    assert asked["concurrent_jobs"] is True and asked["seed"] == 3 and asked["races"] is True
    data = json.loads(res.stdout)
    assert data["concurrent_runs"] == 2 * 3 * 2 and data["seed"] == 3
    assert data["ambiguous_points"] > 0 and "ambiguous" in data["kinds"]
    assert data["kinds"]["concurrent"]["violations"][inv.ONE_WRITER] > 0


def test_kill_after_an_operation_that_failed_still_kills(tmp_path):
    code = (
        "import sys; from dataferry.store import open_store; "
        "from dataferry.store.faults import kill_at; "
        "s = open_store(sys.argv[1], faults=[kill_at(0, 'after')]); "
        "s.exists('missing'); print('survived')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == -9 and "survived" not in proc.stdout


@pytest.mark.parametrize("committer", ["manifest", "hive"])
@pytest.mark.parametrize("mode", ["append", "overwrite", "overwrite-partitions"])
def test_an_existing_data_run_judges_each_mode_by_what_the_committer_means_by_it(
    stores, committer, mode
):
    # the earlier data set has a partition the job does not write: Hive's `overwrite`
    # (INSERT OVERWRITE) keeps it, as a partition overwrite does; others' `overwrite` does not
    from dataferry.verify.existing import run_existing_scenario

    rng = random.Random(7)
    uuids = (seeded_uuid(rng), seeded_uuid(rng))
    url = stores.url(f"x-{committer}-{mode}")
    scenario, _ = run_existing_scenario(
        committer, url, mode, [], deterministic_options(committer), uuids
    )
    assert scenario.problems == [], scenario.problems


def test_a_family_that_stops_is_reported_and_the_others_still_run(monkeypatch):
    """A family of scenarios that stops on its own error (a server that stopped answering,
    after an hour of a slow emulator) is listed under "did not finish" with its error, the
    families after it still run and count, and the exit code says the run is incomplete (3)
    rather than clean (0). The library call without `keep_going` raises, so a test that checks
    only the violations cannot pass over a family that never ran."""
    from typer.testing import CliRunner

    from dataferry.cli import app
    from dataferry.verify import concurrent, crash, zombies

    real, ran = crash.verify_crash, []

    def smaller(committer, store=None, **kwargs):
        return real(committer, store, **{**kwargs, "limit": 2, "concurrent_points": 1, "races": ()})

    def server_gone(*args, **kwargs):
        raise TimeoutError("the server stopped answering")

    real_concurrent = concurrent.run_concurrent

    def counted_concurrent(*args, **kwargs):
        ran.append("concurrent")
        return real_concurrent(*args, **kwargs)

    monkeypatch.setattr(crash, "verify_crash", smaller)
    monkeypatch.setattr(zombies, "run_zombies", server_gone)
    monkeypatch.setattr(concurrent, "run_concurrent", counted_concurrent)
    args = ["verify", "crash", "--committer", "v1", "--store", "memory://dataferry-stops"]
    res = CliRunner().invoke(app, [*args, "--zombies", "--concurrent-jobs", "--json"])
    assert res.exit_code == 3, res.output
    data = json.loads(res.stdout)
    assert data["errors"] == {"zombies": "TimeoutError: the server stopped answering"}
    assert ran == ["concurrent"] and data["concurrent_runs"] > 0  # the next family ran
    assert data["total_violations"] == 0 and data["scenarios"] > 1
    shown = CliRunner().invoke(app, [*args, "--zombies"])
    assert shown.exit_code == 3 and "did not finish zombies: TimeoutError" in shown.output
    with pytest.raises(TimeoutError):
        real("v1", "memory://dataferry-stops", limit=1, zombies=True)
