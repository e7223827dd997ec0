"""The invariants the crash harness checks, by name.

- no_false_success: a `_SUCCESS` exists only when the committed output is there in full, and a
  job reported committed has written its `_SUCCESS`.
- exclusive_output: each task's visible files come from exactly one attempt of one job, and
  nothing else is visible.
- complete_output: after a successful job, every task's files are there, byte-identical.
- nothing_visible_before_commit: when job commit starts, no output is visible yet.
- no_leftovers: after success, abort or cleanup, no `_temporary`, staging or other in-flight
  entries remain.
"""

from __future__ import annotations

from collections import defaultdict

from ..store import Store, paths
from .reference import FILES_PER_TASK, TASKS, parse_file

NO_FALSE_SUCCESS = "no_false_success"
EXCLUSIVE = "exclusive_output"
COMPLETE = "complete_output"
NOTHING_VISIBLE = "nothing_visible_before_commit"
NO_LEFTOVERS = "no_leftovers"
ALL = (NO_FALSE_SUCCESS, EXCLUSIVE, COMPLETE, NOTHING_VISIBLE, NO_LEFTOVERS)

SUCCESS = "_SUCCESS"


def visible_files(store: Store) -> list[str]:
    """Data files a reader sees: everything not under a hidden (`_`/`.`) name."""
    return [s.path for s in store.walk("") if not paths.is_hidden(s.path)]


def check_output(store: Store) -> list[str]:
    """Exclusive and complete: every task's files from one attempt of one job, all of them."""
    problems: list[str] = []
    groups: dict[int, dict[tuple[str | None, int], set[int]]] = defaultdict(
        lambda: defaultdict(set)
    )
    for path in visible_files(store):
        parsed = parse_file(path, store.read_bytes(path))
        if parsed is None or parsed.job_uuid is None:
            problems.append(f"{EXCLUSIVE}: unexpected or corrupt file {path}")
            continue
        groups[parsed.task][(parsed.job_uuid, parsed.attempt)].add(parsed.file)
    for task in range(TASKS):
        attempts = groups.get(task, {})
        if len(attempts) > 1:
            problems.append(f"{EXCLUSIVE}: task {task} has files of attempts {sorted(attempts)}")
        if not attempts or not any(len(f) == FILES_PER_TASK for f in attempts.values()):
            problems.append(f"{COMPLETE}: task {task} output incomplete: {dict(attempts)}")
    return problems


def check_success(store: Store, job_reported_committed: bool) -> list[str]:
    has_success = store.exists(SUCCESS)
    if job_reported_committed and not has_success:
        return [f"{NO_FALSE_SUCCESS}: job reported committed but wrote no {SUCCESS}"]
    if has_success:
        bad = check_output(store)
        if bad:
            return [f"{NO_FALSE_SUCCESS}: {SUCCESS} present over bad output: {bad[0]}"]
    return []


def check_nothing_visible(store: Store, in_place: bool = False) -> list[str]:
    """Before job commit nothing may be visible; for a committer that writes in place (direct),
    "visible" means what a reader of committed files sees (`list_committed`)."""
    if in_place:
        from ..commit.direct import list_committed

        files = list_committed(store)
    else:
        files = visible_files(store)
    return [f"{NOTHING_VISIBLE}: {len(files)} files visible, e.g. {files[0]}"] if files else []


def check_no_leftovers(store: Store, allow: tuple[str, ...] = (SUCCESS,)) -> list[str]:
    """No in-flight directories, and on stores with multipart upload no upload left pending
    (an incomplete upload is invisible, but billed until it is aborted)."""
    problems = []
    try:
        entries = store.list("")
    except FileNotFoundError:
        entries = []
    extra = [e.path for e in entries if paths.is_hidden(e.path) and e.path not in allow]
    from ..markers.base import MARKERS_ROOT

    if store.exists(MARKERS_ROOT) and store.walk(MARKERS_ROOT):
        extra.append(MARKERS_ROOT)
    if extra:
        problems.append(f"{NO_LEFTOVERS}: {', '.join(extra)} left behind")
    if store.capabilities.multipart_upload:
        uploads = store.list_uploads("")
        if uploads:
            problems.append(
                f"{NO_LEFTOVERS}: {len(uploads)} uploads pending, e.g. {uploads[0].path}"
            )
    return problems
