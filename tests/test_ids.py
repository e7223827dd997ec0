from __future__ import annotations

import pytest

from dataferry.ids import new_job_id, parse_job_id, parse_task_attempt_id, parse_task_id


def test_hadoop_shapes_and_round_trip():
    job = new_job_id(7)
    assert str(job).startswith("job_") and str(job).endswith("_0007")
    attempt = job.task(12).attempt(3)
    text = str(attempt)
    assert text == f"attempt_{job.tracker}_0007_m_000012_3"
    parsed = parse_task_attempt_id(text)
    assert (parsed.task.index, parsed.number) == (12, 3)
    assert str(parse_task_id(str(job.task(12)))) == str(job.task(12))
    assert str(parse_job_id(str(job))) == str(job)


def test_jobs_started_in_the_same_second_never_collide():
    """The bug class of SPARK-33402 / HADOOP-17318."""
    ids = {str(new_job_id()) for _ in range(5000)}
    uuids = {new_job_id().uuid for _ in range(5000)}
    assert len(ids) == 5000 and len(uuids) == 5000


@pytest.mark.parametrize("bad", ["job_", "task_x_1_m", "attempt_a_b_c", "job_a_b_c"])
def test_parse_errors_name_the_value(bad):
    with pytest.raises(ValueError, match="not a"):
        for parse in (parse_job_id, parse_task_id, parse_task_attempt_id):
            parse(bad)
