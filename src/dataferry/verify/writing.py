"""`cleanup --older-than` during a job whose tasks are still writing and that has no driver
record (an engine that writes none, a record lost or removed by hand).

What it models: a long job whose job directory was made hours ago and whose tasks are still
writing into it: the directories are old, the newest files are seconds old. Without a driver
record, cleanup can only judge the job by the age of what it left, and that age must be its
newest file's: a leftover aged by its directory's own time is rolled back under the running
job, whose commit then fails (or commits part of its output).

`cleanup_writing` (stores backed by a local directory, where ages can be set): a job over a
committed data set, in `overwrite` and `append`, is set up, its driver record removed, and all
but its last task run and committed; everything in the destination is then made `OLD_S` old,
the last task writes its files, and every directory is made old again (only those files are
new). `cleanup --older-than OLDER_THAN_S` runs: it must leave the job alone. Then the last task
commits, the job commits, and it must be all there as its mode says (`check_outcome`).
"""

from __future__ import annotations

import functools
import os
import random
import time
from collections.abc import Callable, Collection
from typing import Any

from ..commit.job.session import new_session
from ..engine.attempt import commit_attempt, run_attempt
from ..ids import new_job_id
from . import invariants as inv
from .damage import local_dir
from .earlier import write_earlier
from .harness import (
    EXISTING,
    PreparedJob,
    Scenario,
    ScenarioStores,
    check_outcome,
    discard,
    job_committer,
    leftovers_allowed,
    quiet_store,
    seeded_uuid,
)
from .reference import TASKS, unique_work
from .scenario import run_threads

OLD_S = 2 * 3600.0  # how old the job's directories (and its earlier tasks' files) are made
OLDER_THAN_S = 3600.0  # the cleanup's `--older-than`: between the two ages
WRITING_MODES = ("overwrite", "append")


def make_old(root: str, files: bool) -> None:
    """Every directory under `root` (and every file, if `files`) made `OLD_S` old."""
    old = time.time() - OLD_S
    for dirpath, dirs, names in os.walk(root):
        for name in [*dirs, *(names if files else ())]:
            full = os.path.join(dirpath, name)
            if not os.path.islink(full):
                os.utime(full, (old, old))
    os.utime(root, (old, old))


def cleanup_writing(
    committer: str,
    stores: ScenarioStores,
    options: dict[str, Any],
    mode: str,
    uuids: tuple[str, str],
) -> Scenario:
    """One run (see the module docstring); `uuids`: the earlier data set's and the job's."""
    from ..commit.job.cleanup import cleanup_destination
    from ..commit.records.drivers import end_driver

    url = stores.url(f"cw-{mode[:2]}")
    root = local_dir(url)
    assert root is not None
    earlier = write_earlier(committer, url, options, uuids[0])
    store = quiet_store(url)
    scenario = Scenario(
        index=None, when="none", kind="cleanup_writing", mode=mode, destination=EXISTING
    )
    problems: list[str] = []
    under_test = job_committer(committer, store, mode, options)
    job = new_session(under_test, new_job_id(job_uuid=uuids[1])).setup(record_driver=False).context
    end_driver(store, uuids[1])  # no driver record: only the ages speak for the job
    messages = []
    for t in range(TASKS - 1):
        ctx = job.task(t, 0)
        report = run_attempt(ctx, functools.partial(unique_work, t))
        if report.needs_commit:
            messages.append(commit_attempt(ctx, None, report.written).message)
    make_old(root, files=True)
    last = job.task(TASKS - 1, 0)
    written = run_attempt(last, functools.partial(unique_work, TASKS - 1))
    make_old(root, files=False)
    recovered = []
    try:
        done = cleanup_destination(quiet_store(url), older_than_s=OLDER_THAN_S)
        recovered = [*done.rolled_back, *done.rolled_forward, *done.removed]
        note = (
            f"cleanup: rolled forward {len(done.rolled_forward)}, back "
            f"{len(done.rolled_back)}, removed {len(done.removed)}, left "
            f"{len(done.skipped_recent) + len(done.left)}"
        )
    except Exception as e:
        note = f"cleanup raised {type(e).__name__}: {e}"
        problems.append(f"{inv.NAMED}: {note}")
    if recovered:
        problems.append(
            f"{inv.LIVE}: cleanup --older-than {OLDER_THAN_S:g} recovered {recovered[0]} of a "
            "job whose last task wrote its files seconds ago"
        )
    if written.needs_commit:
        try:
            messages.append(commit_attempt(last, None, written.written).message)
        except Exception as e:
            note += f"; the last task's commit failed: {type(e).__name__}: {e}"
    prepared = PreparedJob(under_test, job, messages)
    status = prepared.commit()
    allow = leftovers_allowed(committer, url, mode, options)
    problems += check_outcome(store, uuids[1], mode, earlier, status, allow)
    if status != "committed":
        problems.append(
            f"{inv.COMPLETE}: the job, its tasks still writing while cleanup ran, ended {status}: "
            f"{prepared.error[:200]}"
        )
    scenario.outcome = status
    scenario.schedule = (
        f"directories {OLD_S:g} s old, the last task's files new, no driver record; {note}"
    )
    scenario.problems = problems
    discard(store)
    return scenario


def run_cleanup_writing(
    committer: str,
    stores: ScenarioStores,
    options: dict[str, Any],
    *,
    seed: int = 0,
    workers: int = 2,
    progress: Callable[[int], None] | None = None,
    modes: Collection[str] = WRITING_MODES,
) -> list[Scenario]:
    """One run per mode of `modes`, `workers` at a time."""
    rng = random.Random(f"{seed}:writing")
    uuids = {m: (seeded_uuid(rng), seeded_uuid(rng)) for m in modes}
    runs = [lambda m=m: cleanup_writing(committer, stores, options, m, uuids[m]) for m in modes]
    return run_threads(runs, workers, "writing", progress)
