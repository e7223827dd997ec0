"""The referee's race schedules (`races.py`, `damage.py`), one small run of each kind on the
local store with the reference job: a live claim holder (a child driver, stopped mid-commit)
raced by a job with its clock skewed, by a job whose clock runs ahead of the store's, by a job
with a 0.2 s claim timeout, by one after the holder's lease expired, by `cleanup --older-than
0`; two takers of a dead claim; damaged records; links to a directory outside. Each must find nothing wrong with `manifest`, and
report what it ran. The full schedules run from `dataferry verify crash --races`."""

from __future__ import annotations

import os

import pytest

from dataferry.verify import invariants as inv
from dataferry.verify import verify_crash
from dataferry.verify.child import JOIN_S
from dataferry.verify.damage import Damage, canary_snapshot, local_dir, make_canary
from dataferry.verify.harness import EXISTING, ScenarioStores, deterministic_options, error_chain
from dataferry.verify.races import RaceVariant, points_of, run_races

COMMITTER = "manifest"
OVERWRITE = [(EXISTING, "overwrite")]


@pytest.fixture
def stores():
    s = ScenarioStores(None)
    yield s
    s.close()


def _problems(scenarios) -> list[str]:
    return [f"{s.kind} {s.mode} [{s.schedule}]: {p}" for s in scenarios for p in s.problems]


def _races(stores, schedule: str, point: str = "decided", variants=OVERWRITE):
    out = run_races(
        COMMITTER,
        stores,
        deterministic_options(COMMITTER),
        schedules=(schedule,),
        variants=variants,
        points=(point,),
    )
    ran = [s for s in out if s.kind == schedule]
    assert ran, [s.schedule for s in out]
    return out, ran


# --- pieces ---------------------------------------------------------------------------------------


def test_points_of_a_commit_trace():
    trace = [
        [9, "get_file_status", "_dataferry/claim.json", ""],
        [10, "create_if_absent", "_dataferry/claim.json", ""],
        [11, "create", "_staging/j/_commit_intent.json", ""],  # an inner commit's record
        [12, "create", "_temporary/j/_commit_intent.json", ""],
        [13, "rename", "_temporary/j/a", "part=p0/a"],
        [14, "rename", "_temporary/j/b", "part=p0/b"],
        [15, "rename", "_temporary/j/c", "part=p0/c"],
        [16, "rename", "_temporary/j/_SUCCESS.tmp", "_SUCCESS"],
        [17, "delete", "_temporary/j", ""],
    ]
    points, success = points_of(trace, 18)
    assert points == {"planning": 11, "decided": 13, "applying": 15, "after_success": 17}
    assert success == 16


def test_a_side_counts_as_hung_only_past_three_times_the_holders_run_alone():
    """On Azurite at load 15 the holder alone took longer than the 60 s a side was given:
    the taker, rightly waiting on the live holder's claim, was reported as a second writer
    that never ended. The limit follows the holder's own pace on the store."""
    v = RaceVariant("fresh", "error", ("a", "b", "c", "d"))
    v.alone_s = 5.0
    assert v.limit_s == JOIN_S
    v.alone_s = 50.0
    assert v.limit_s == 150.0


def test_error_chain_names_what_is_not_the_librarys_own():
    from dataferry.errors import JobCommitError, NotFound

    try:
        try:
            raise TypeError("unsupported operand type(s) for -: 'float' and 'str'")
        except TypeError as e:
            raise JobCommitError("commit failed") from e
    except JobCommitError as e:
        assert error_chain(e) == (["JobCommitError", "TypeError"], "TypeError")
    try:
        try:
            raise IsADirectoryError("x")
        except OSError as e:
            raise NotFound("gone", "x") from e
    except NotFound as e:
        assert error_chain(e)[1] == ""  # a StoreError standing for an OSError is named


def test_a_canary_change_is_seen(tmp_path):
    root = str(tmp_path / "canary")
    before = make_canary(root)
    assert before == canary_snapshot(root)
    os.remove(os.path.join(root, "sub", "deep.dat"))
    assert "sub/deep.dat" not in canary_snapshot(root)
    assert local_dir(f"sim:abfs:{tmp_path}") == str(tmp_path)
    assert local_dir("s3://bucket/x") is None


# --- each schedule once ----------------------------------------------------------------------------


def test_skewed_clock_holder_is_not_overtaken(stores):
    out, ran = _races(stores, "skewed_clock")
    assert {s.schedule.split(",")[1].split(";")[0].strip() for s in ran} == {
        "holder's clock -300 s",
        "holder's clock +300 s",
    }
    assert not _problems(out)
    assert all(s.outcome.startswith("H committed") for s in ran)


def test_a_taker_whose_clock_runs_ahead_does_not_overtake_a_live_holder(stores):
    """Were staleness judged by the taker's wall clock, this taker (300 s ahead of the store)
    would take the destination from the stopped, live holder: the referee reports it."""
    out, ran = _races(stores, "taker_clock_ahead")
    assert "taker's clock +300 s" in ran[0].schedule
    assert not _problems(out)
    assert ran[0].outcome == "H committed, T refused"


def test_short_timeout_taker_does_not_overtake_a_live_holder(stores):
    out, ran = _races(stores, "short_timeout")
    assert not _problems(out)
    assert ran[0].outcome == "H committed, T refused"


def test_a_short_timeout_taker_leaves_a_holder_within_its_longer_lease(stores):
    """The holder declared a 30 s lease and is stopped past the taker's own (5 s) but within
    its own: were the lease ever the taker's timeout instead of the longer of the two, the
    taker would take the destination from a live job, whose commit then fails."""
    out, ran = _races(stores, "longer_lease")
    assert "its lease 30 s" in ran[0].schedule
    assert not _problems(out)
    assert ran[0].outcome == "H committed, T refused"


def test_holder_stopped_past_its_lease_loses_the_claim(stores):
    out, _ = _races(stores, "lease_expired")
    assert not _problems(out)


def test_cleanup_leaves_a_live_holder_alone(stores):
    out, ran = _races(stores, "cleanup_race")
    assert not _problems(out)
    assert ran[0].outcome == "H committed"


def test_two_takers_of_a_dead_claim(stores):
    out, ran = _races(stores, "two_takers")
    assert len(ran) == 2  # staggered (a slow one and a short timeout) and at once
    assert not _problems(out)
    assert all(s.outcome.startswith("H killed") for s in ran)


# --- damaged records and links ---------------------------------------------------------------------


@pytest.fixture
def damage(stores):
    return Damage(COMMITTER, stores, deterministic_options(COMMITTER))


@pytest.mark.parametrize("how", ["claim_truncated", "claim_wrong_types"])
def test_a_damaged_claim_gives_a_named_error_and_loses_nothing(damage, how):
    s = damage.claim(how)
    assert not s.problems, s.schedule


def test_a_truncated_intent_loses_no_data(damage):
    s = damage.intent("overwrite")
    assert s.index is not None, s.schedule  # the holder was killed in its decided commit
    assert not s.problems, s.schedule


@pytest.mark.parametrize(
    ("place", "action"), [("_temporary", "cleanup"), ("_dataferry", "overwrite")]
)
def test_a_link_to_a_directory_outside_changes_nothing_there(damage, place, action):
    s = damage.link(place, action)
    assert not s.problems, s.schedule


def test_verify_crash_reports_the_race_schedules():
    report = verify_crash(COMMITTER, select=lambda t: False, ambiguous=False, races=("links",))
    data = report.to_json()
    assert data["race_schedules"] == len(report.of_kind("links")) > 0
    assert data["kinds"]["links"]["total_violations"] == 0
    assert set(data["violations"]) == set(inv.ALL)


# --- a claim broken on purpose ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "races"),
    [
        ([], False),
        (["--concurrent-jobs"], True),
        (["--concurrent-jobs", "--no-races"], False),
        (["--races"], True),
        (["--race-schedule", "links", "--race-schedule", "two_takers"], ("links", "two_takers")),
    ],
)
def test_the_command_turns_the_races_on_with_concurrent_jobs(monkeypatch, args, races):
    from typer.testing import CliRunner

    from dataferry.cli import app
    from dataferry.verify import crash
    from dataferry.verify.crash_report import CrashReport

    seen = {}

    def fake(committer, store, **kwargs):
        seen.update(kwargs)
        return CrashReport(committer, store or "local", 0, [])

    monkeypatch.setattr(crash, "verify_crash", fake)
    res = CliRunner().invoke(app, ["verify", "crash", "--committer", COMMITTER, *args, "--json"])
    assert res.exit_code == 0, res.output
    assert seen["races"] == races
    assert '"race_schedules": 0' in res.output


def test_an_unknown_race_schedule_is_named():
    from dataferry.errors import ConfigError
    from dataferry.verify.crash import race_schedules

    assert race_schedules(True)[-2:] == ("damaged_record", "links")
    with pytest.raises(ConfigError, match="'nope'"):
        race_schedules(["nope"])


def test_a_child_driver_that_hangs_is_logged_with_its_threads_stacks(monkeypatch, caplog):
    """A holder that did not end after it went on was reported only as "timeout": where it
    hung (a store request, a lock) was lost with the process. Its threads' stacks are logged
    before it is killed."""
    from dataferry.verify import child

    header = child.CHILD_CODE.split("from dataferry.verify.child")[0]
    monkeypatch.setattr(child, "CHILD_CODE", header + "print('up', flush=True)\ntime.sleep(600)\n")
    spec = child.ChildSpec("manifest", "unused", "error", {}, "u-1")
    driver = child.ChildDriver(spec)
    try:
        assert driver.lines.get(timeout=30).strip() == "up"
        with caplog.at_level("WARNING", logger="dataferry.verify"):
            status, _, _ = driver.finish(timeout_s=0.5)
    finally:
        driver.kill()
    assert status == "timeout"
    assert "did not end" in caplog.text
    assert 'File "<string>", line 9' in caplog.text, caplog.text  # where it sleeps


def test_a_damaged_record_job_counts_as_hung_only_past_three_times_its_own_run():
    """On Azurite under load a whole job took longer than the damaged-record schedules' 30 s,
    and the job, rightly giving way to the damaged claim, was reported as hung (named_error)."""
    from dataferry.verify.damage import CHILD_TIMEOUT_S, child_limit

    assert child_limit(5.0) == CHILD_TIMEOUT_S
    assert child_limit(20.0) == 60.0
