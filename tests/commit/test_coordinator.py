from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dataferry.commit import CommitCoordinator


def test_first_committer_wins_and_failure_releases():
    c = CommitCoordinator()
    assert c.can_commit(0, 0)
    assert not c.can_commit(0, 1)
    assert c.can_commit(0, 0)  # asking again is idempotent
    c.attempt_failed(0, 0)
    assert not c.can_commit(0, 0)  # a failed attempt never comes back
    assert c.can_commit(0, 1)
    c.task_committed(0, 1)
    assert not c.can_commit(0, 2)
    assert c.committed_attempt(0) == 1


def test_failure_of_a_non_holder_keeps_the_right():
    c = CommitCoordinator()
    assert c.can_commit(3, 1)
    c.attempt_failed(3, 0)
    assert not c.can_commit(3, 2)
    assert c.can_commit(3, 1)


events = st.lists(
    st.tuples(st.sampled_from(["ask", "fail", "commit"]), st.integers(0, 2), st.integers(0, 3)),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(events)
def test_at_most_one_attempt_ever_commits_a_task(schedule):
    """Whatever the order of asks, failures and commits, no task has two committers and
    no attempt commits without holding the right at that moment."""
    c = CommitCoordinator()
    holders: dict[int, int] = {}
    committed: dict[int, int] = {}
    for kind, task, attempt in schedule:
        if kind == "ask":
            if c.can_commit(task, attempt):
                assert task not in committed or committed[task] == attempt
                assert holders.get(task, attempt) == attempt
                holders[task] = attempt
        elif kind == "fail":
            c.attempt_failed(task, attempt)
            if holders.get(task) == attempt and task not in committed:
                del holders[task]
        elif holders.get(task) == attempt and task not in committed:
            c.task_committed(task, attempt)
            committed[task] = attempt
    for task, attempt in committed.items():
        assert c.committed_attempt(task) == attempt
