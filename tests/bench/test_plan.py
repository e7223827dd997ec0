"""`plan commit`: the fitted request counts extrapolate exactly along a job's shape."""

from __future__ import annotations

import pytest

from dataferry.bench.plan import PlanSpec, _counts, _run, calibrate, predict, soft_max
from dataferry.errors import ConfigError


@pytest.mark.parametrize(
    "committer,size",
    [
        ("v1", (3000, 30, 40)),
        ("manifest", (3000, 30, 40)),
        ("direct", (3000, 30, 40)),
        # more partitions than any small job has files: direct's job commit lists the marker
        # directories in use, which the fit must not mistake for one request a file
        ("direct", (4000, 40, 1000)),
        ("manifest", (4000, 40, 1000)),
    ],
)
def test_request_counts_extrapolate(committer, size):
    spec = PlanSpec(*size, store="hdfs", committers=(committer,))
    model = calibrate(spec, committer)
    predicted = predict(model, spec, *size)
    measured = _counts(_run(spec.profile, committer, size, spec, 0.0).requests, 0.0)
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
