"""The referee refereed: it passes v1 and fails v2, on several stores.

Each committer has every crash point enumerated on one store; on its others the crash points
are sampled (`every` odd, so before and after an operation both stay among them), which keeps
the store's semantics refereed at a third or a fifth of the cost."""

from __future__ import annotations

import pytest

from dataferry.verify import verify_crash


@pytest.mark.parametrize("store,every", [("sim:hdfs", 3), ("memory://dataferry-crash", 1)])
def test_v1_has_no_violations_at_any_crash_point(store, every):
    report = verify_crash("v1", store, every=every)
    assert report.crash_points > 50
    assert len(report.scenarios) == len(range(0, 2 * report.crash_points, every)) + 1
    assert report.total_violations == 0, report.to_json(3)["examples"]
    outcomes = report.outcomes
    assert outcomes["committed"] > 0 and outcomes["driver_crashed"] > 0


def test_v2_violations_are_detected():
    report = verify_crash("v2", "sim:hdfs", every=3)
    v = report.violations
    crash = report.kinds()["crash"]["violations"]  # the classic crash points (and no crash)
    assert crash["nothing_visible_before_commit"] == len(report.scenarios)
    assert v["exclusive_output"] > 0
    data = report.to_json()
    assert set(data) >= {
        "committer",
        "store",
        "crash_points",
        "scenarios",
        "violations",
        "total_violations",
    }
    assert data["total_violations"] == sum(v.values())


@pytest.mark.parametrize("store,every", [("sim:abfs", 3), (None, 1)])
def test_manifest_has_no_violations_at_any_crash_point(store, every):
    report = verify_crash("manifest", store, every=every)
    assert report.crash_points > 50
    assert report.total_violations == 0, report.to_json(3)["examples"]
    assert report.outcomes["driver_crashed"] > 0


@pytest.mark.parametrize("store,every", [("sim:hdfs", 3), ("sim:gcs", 5)])
def test_hive_has_no_violations_including_crashes_inside_the_load(store, every):
    report = verify_crash("hive", store, every=every)
    assert report.total_violations == 0, report.to_json(3)["examples"]
    load_points = [
        s
        for s in report.scenarios
        if ".hive-staging" in s.path
        and "-ext-10000/part=" in s.path
        and s.op in ("rename", "copy", "delete")
    ]
    assert load_points, "the load's moves must be among the crash points"


@pytest.mark.parametrize("committer", ["directory", "partitioned"])
def test_staging_committers_have_no_violations_on_the_s3_model(committer):
    """A sample of every kind of failure the referee knows, on sim:s3: crash points,
    ambiguous answers, killed drivers, zombie attempts, racing jobs; no upload left pending."""
    report = verify_crash(
        committer,
        "sim:s3",
        every=5,
        driver_kills=1,
        zombies=True,
        zombie_points=1,
        concurrent_jobs=True,
        concurrent_points=1,
    )
    assert report.total_violations == 0, report.to_json(3)["examples"]
    assert report.outcomes["driver_crashed"] > 0
    assert report.driver_kills and report.zombie_schedules and report.concurrent_runs


@pytest.mark.parametrize("store,every", [("sim:s3", 3), (None, 2)])
def test_direct_committer_has_no_violations(store, every):
    report = verify_crash("direct", store, every=every)
    assert report.total_violations == 0, report.to_json(3)["examples"]
    assert report.outcomes["driver_crashed"] > 0
