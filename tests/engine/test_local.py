from __future__ import annotations

import functools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataferry import make_committer
from dataferry.engine import AttemptFailure, LocalEngine
from dataferry.errors import ConfigError, TaskFailed
from dataferry.store import open_store
from dataferry.verify import invariants as inv
from dataferry.verify.reference import TASKS, reference_tasks

from .workloads import always_fails, bad_input, slow_first_attempt, write_two


def data_files(store):
    return sorted(s.path for s in store.walk("") if not s.path.startswith("_"))


def tasks(n, fn=write_two):
    return [functools.partial(fn, i) for i in range(n)]


@pytest.mark.parametrize(
    ("workers", "executor"), [(0, "processes"), (2, "processes"), (2, "threads")]
)
def test_retries_speculation_and_deaths_commit_exactly_one_attempt(tmp_path, workers, executor):
    c = make_committer("v1", str(tmp_path / "out"))
    engine = LocalEngine(
        workers=workers,
        executor=executor,
        speculate_tasks=(2,),
        failures=(
            AttemptFailure(task=1, attempt=0, when="after_write"),
            AttemptFailure(task=3, attempt=0, when="during_commit"),
        ),
    )
    run = engine.run_job(c, tasks(5))
    assert run.failed_attempts == 2
    assert run.speculative_attempts == 1 and run.denied_commits == 1
    assert run.attempts == 5 + 1 + 2
    assert run.results == {i: i * 10 for i in range(5)}
    files = data_files(c.store)
    assert len(files) == 10
    for task in range(5):
        attempts = {f.split("-a")[1] for f in files if f"/t{task}-" in f}
        assert len(attempts) == 1, (task, files)
    assert {f for f in files if "/t1-" in f} == {"p=0/t1-a1.txt", "p=1/t1-a1.txt"}
    assert not c.store.exists("_temporary")
    assert run.store_stats.counter("op_rename") > 0


def test_task_that_always_fails_aborts_the_job(tmp_path):
    c = make_committer("v1", str(tmp_path / "out"))
    with pytest.raises(TaskFailed, match="failed 3 times") as e:
        LocalEngine(workers=0, max_attempts=3).run_job(c, tasks(2, always_fails))
    assert len(e.value.causes) == 3 and "cannot succeed" in e.value.causes[0]
    assert c.store.walk("") == []  # aborted: nothing visible, nothing left behind


@pytest.mark.parametrize(
    ("workers", "executor"), [(0, "processes"), (1, "processes"), (2, "threads")]
)
def test_bad_input_fails_the_job_after_one_attempt_not_four(tmp_path, workers, executor):
    c = make_committer("v1", str(tmp_path / "out"))
    started = []
    engine = LocalEngine(workers=workers, executor=executor)  # max_attempts=4
    with pytest.raises(ConfigError, match=r"^task 0: partition value too long for a file name$"):
        engine.run_job(
            c, [functools.partial(bad_input, 0)], on_event=lambda e, t, a: started.append(e)
        )
    assert started.count("attempt_started") == 1  # no retry of a deterministic error
    assert c.store.walk("") == []  # the job was aborted


def test_speculation_by_timing_on_the_process_pool(tmp_path):
    c = make_committer("v1", str(tmp_path / "out"))
    engine = LocalEngine(workers=2, speculation=True, speculation_quantile=0.5)
    work = [functools.partial(slow_first_attempt, i, 3.0) for i in range(4)]
    run = engine.run_job(c, work)
    assert run.speculative_attempts >= 1
    files = data_files(c.store)
    assert len(files) == 4 and sum(f.startswith("t0-") for f in files) == 1


def test_engine_events(tmp_path):
    c = make_committer("v1", str(tmp_path / "out"))
    events = []
    LocalEngine(workers=0).run_job(c, tasks(3), on_event=lambda k, t, a: events.append((k, t)))
    assert [e for e in events if e[0] == "task_committed"] == [
        ("task_committed", i) for i in range(3)
    ]
    assert events[-1] == ("job_committed", -1)


schedules = st.lists(
    st.tuples(
        st.integers(0, TASKS - 1),
        st.integers(0, 2),
        st.sampled_from(["after_write", "during_commit"]),
    ),
    max_size=6,
    unique_by=lambda f: (f[0], f[1]),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(failures=schedules, speculate=st.sets(st.integers(0, TASKS - 1), max_size=2))
def test_any_schedule_of_deaths_and_duplicates_commits_exact_output(
    tmp_path_factory, failures, speculate
):
    """Property: whatever attempts die (before or during commit) and whichever tasks run a
    speculative duplicate, v1 commits exactly one complete attempt per task."""
    store = open_store(str(tmp_path_factory.mktemp("prop")))
    engine = LocalEngine(
        workers=0,
        max_attempts=4,
        speculate_tasks=tuple(speculate),
        failures=tuple(AttemptFailure(t, a, w) for t, a, w in failures),
    )
    engine.run_job(make_committer("v1", store), reference_tasks())
    assert inv.check_output(store) == []
    assert inv.check_success(store, True) == []
    assert inv.check_no_leftovers(store) == []
