"""`plan commit`: the fitted request counts extrapolate exactly along a job's shape."""

from __future__ import annotations

import pytest

from dataferry.bench.plan import (
    PlanSpec,
    _counts,
    _plan_run,
    _run,
    calibrate,
    count,
    predict,
    soft_max,
)
from dataferry.errors import ConfigError


@pytest.mark.parametrize(
    "committer,size",
    [
        ("v1", (1200, 12, 40)),
        ("manifest", (1200, 12, 40)),
        ("direct", (1200, 12, 40)),
        # more partitions than any small job has files: direct's job commit lists the marker
        # directories in use, which the fit must not mistake for one request a file
        ("direct", (1200, 12, 300)),
        ("manifest", (1200, 12, 300)),
    ],
)
def test_request_counts_extrapolate(committer, size):
    """The counting stage's fit (small jobs of the shape) gives the larger job's requests."""
    spec = PlanSpec(*size, store="hdfs", committers=(committer,))
    model = count(_plan_run(committer), spec, committer)
    fitted = model.job.requests(*size)
    measured = _counts(_run(spec.profile, committer, size, spec, 0.0).requests, 0.0)
    assert fitted["reads"] + fitted["writes"] == pytest.approx(
        measured["reads"] + measured["writes"], rel=0.02
    )


def test_a_calibrated_model_predicts_the_requests_and_a_time():
    """Both stages (counts, then the pace with latency on) and the prediction, at one shape."""
    size = (1200, 12, 20)
    spec = PlanSpec(*size, store="hdfs", committers=("manifest",))
    model = calibrate(spec, "manifest")
    predicted = predict(model, spec, *size)
    measured = _counts(_run(spec.profile, "manifest", size, spec, 0.0).requests, 0.0)
    assert predicted.job_requests == pytest.approx(measured["reads"] + measured["writes"], rel=0.02)
    assert predicted.job_commit_s > 0 and predicted.task_commits_wall_s >= 0
    assert model.job.concurrency > 0


def test_soft_max_and_bad_specs():
    assert soft_max(10, 0) == pytest.approx(10)
    assert 10 < soft_max(10, 10) < 12
    with pytest.raises(ConfigError, match="unknown"):
        PlanSpec(store="nfs")
    with pytest.raises(ConfigError):
        PlanSpec(files=10, tasks=20)


def test_plan_stages_count_pace_predict_are_timed_and_logged(monkeypatch, caplog):
    """On a stand-in for the committer runs (requests linear in files): each stage once per
    committer, timed, logged at INFO, and the prediction follows the fitted line."""
    from types import SimpleNamespace

    from dataferry.bench import plan
    from dataferry.stages import StageRun

    def fake_run(profile, committer, size, spec, scale):
        files, tasks, _ = size
        requests = {"store_requests_read": 2 * files, "store_requests_write": files + tasks}
        busy = plan.busy_seconds(profile, plan._counts(requests, 0.0)) * scale
        return SimpleNamespace(
            task_requests={"store_requests_write": tasks},
            task_commit_s=0.001 * tasks + busy / 10,
            requests=requests,
            job_commit_s=0.01 + busy / 4,
        )

    monkeypatch.setattr(plan, "_run", fake_run)
    caplog.set_level("INFO", logger="dataferry.bench")
    spec = PlanSpec(10_000, 100, 10, store="hdfs", committers=("v1",))
    run = StageRun(logger=plan.log, label="plan commit v1")
    model = calibrate(spec, "v1", run=run)
    p = predict(model, spec, 10_000, 100, 10, run=run)
    assert p.job_requests == 3 * 10_000 + 100
    assert set(run.stage_seconds) == {"count", "pace", "predict"}
    assert run.stats.counter("plan_calibration_runs") == 8
    assert run.stats.counter("plan_pace_runs") == 2 * plan.PACE_REPEATS
    for name in ("count", "pace", "predict"):
        assert run.stats.counter(f"plan_stage_{name}") == 1
    lines = [r.getMessage() for r in caplog.records if r.name == "dataferry.bench"]
    assert [line.split(": ")[1] for line in lines] == ["stage count", "stage pace", "stage predict"]
    assert "plan_calibration_runs=+8" in lines[0]
    steps: list[str] = []
    data = plan.plan_commit(spec, progress=steps.append)  # the report keeps its shape
    assert len(steps) == plan.plan_steps(spec)  # `plan commit`'s bar counts to its end
    assert set(data) == {"spec", "profile", "predictions", "models"}
    assert data["predictions"][0]["job_requests"] == p.job_requests
