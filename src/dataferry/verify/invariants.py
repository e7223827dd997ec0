"""The invariants the crash harness checks, by name.

- no_false_success: a `_SUCCESS` exists only when the committed output is there in full, and a
  job reported committed has written its `_SUCCESS`.
- exclusive_output: each task's visible files come from exactly one attempt of one job, and
  nothing else is visible.
- complete_output: after a successful job, every task's files are there, byte-identical.
- nothing_visible_before_commit: when job commit starts, no output is visible yet.
- no_leftovers: after success, abort or cleanup, no `_temporary`, staging or other in-flight
  entries remain.

Dead drivers, zombie attempts, racing jobs and destinations that already hold data add:

- nothing_of_failed_job: a job that failed, or whose dead driver was recovered, and that did not
  end committed leaves nothing a reader sees: no file, no empty directory, no output without
  its `_SUCCESS`.
- earlier_data_kept: data committed earlier by another job stays exactly as it was (same files,
  same bytes) unless a completed job's write mode replaces it (`overwrite`).
- write_mode: a job does what its mode says: `error` refuses a destination that holds data (with
  a DestinationError) and commits into an empty one; `append` adds; `overwrite` leaves only the
  new output.
- one_writer: two jobs racing into one destination: in `error` mode exactly one commits and the
  other fails with a DestinationError, leaving nothing visible; in `overwrite` the destination
  ends with exactly one job's output, never the union.
- stable_after_success: once `_SUCCESS` is written, nothing a reader sees changes (a zombie
  attempt that commits late changes nothing, before or after `dataferry cleanup`).

Live holders raced by a second job or a `cleanup`, damaged records and links add
(`races.py`, `damage.py`):

- outside_untouched: nothing outside the destination changes: a canary directory elsewhere,
  linked from inside the destination, is byte for byte as it was after every job and cleanup.
- named_error: a job or a cleanup that meets a damaged record or a link either does its work
  or fails with the library's own error (a DataferryError naming the problem), within a
  bounded time: no TypeError, KeyError or decode error escapes, and nothing hangs.
- live_holder_kept: a claim holder that is alive is never overtaken: while it is stopped for
  far less than the claim timeout (a pause), whatever its clock says, a normal job gives way
  or waits and a `cleanup` leaves it alone, so its commit ends as it would have alone.
- no_data_loss: a commit that was decided (its intent saved) loses no data to recovery: when
  a recovery cannot finish it, every file of the chosen attempts is still on the store.

Table committers (`tables.py`) are checked through the format's reader: what it returns stands
for the visible files, a committed table version for `_SUCCESS`; and they add:

- no_orphan_files: after a job and after any recovery, every data file in the table's storage
  (outside hidden directories) is referenced by a version of the table (the current one, or
  an earlier one the format keeps for time travel).

Table committers and `direct` write the type zoo (`zoo_files.py`: every column pandas 2/3,
numpy and polars produce, with the edge cases), and add:

- same_values: every row a reader reads back holds the values its attempt wrote, column by
  column, as the format's type policy keeps them (a unit, a zone, a kind of value changed, a
  column left out, a null or NaN lost is a violation, not only a missing or extra row).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from ..commit.protocol.inflight import published_name
from ..store import Store, paths
from .reference import FILES_PER_TASK, JOB_PARTITIONS, TASKS, ParsedFile, parse_file

if TYPE_CHECKING:
    from .tables import TableView

NO_FALSE_SUCCESS = "no_false_success"
EXCLUSIVE = "exclusive_output"
COMPLETE = "complete_output"
NOTHING_VISIBLE = "nothing_visible_before_commit"
NO_LEFTOVERS = "no_leftovers"
NOTHING_OF_FAILED = "nothing_of_failed_job"
EARLIER_KEPT = "earlier_data_kept"
WRITE_MODE = "write_mode"
ONE_WRITER = "one_writer"
STABLE = "stable_after_success"
OUTSIDE = "outside_untouched"
NAMED = "named_error"
NO_LOSS = "no_data_loss"
LIVE = "live_holder_kept"
NO_ORPHANS = "no_orphan_files"
SAME_VALUES = "same_values"
CORE = (NO_FALSE_SUCCESS, EXCLUSIVE, COMPLETE, NOTHING_VISIBLE, NO_LEFTOVERS)
ALL = (
    *CORE,
    NOTHING_OF_FAILED,
    EARLIER_KEPT,
    WRITE_MODE,
    ONE_WRITER,
    STABLE,
    LIVE,
    OUTSIDE,
    NAMED,
    NO_LOSS,
    NO_ORPHANS,
    SAME_VALUES,
)

SUCCESS = "_SUCCESS"


def table_view(store: Store) -> TableView | None:
    """The table format's reader's view of the destination (None: it is read as files)."""
    from .tables import view

    return view(store)


def visible_files(store: Store) -> list[str]:
    """Data files a reader sees: everything not under a hidden (`_`/`.`) name (of a table:
    the reference files its reader's rows make up)."""
    table = table_view(store)
    if table is not None:
        return sorted(table.files)
    return [s.path for s in store.walk("") if not paths.is_hidden(s.path)]


def read(store: Store, path: str) -> bytes:
    """A visible file's bytes (of a table: as its reader's rows make them up)."""
    table = table_view(store)
    if table is None:
        return store.read_bytes(path)
    if path not in table.files:
        raise FileNotFoundError(path)
    return table.files[path]


def present(store: Store, path: str) -> bool:
    table = table_view(store)
    return store.exists(path) if table is None else path in table.files


def has_success(store: Store) -> bool:
    """`_SUCCESS` is there (of a table: a committed version exists)."""
    table = table_view(store)
    return store.exists(SUCCESS) if table is None else table.exists


def check_output(store: Store) -> list[str]:
    """Exclusive and complete: every task's files from one attempt of one job, all of them."""
    problems: list[str] = []
    groups: dict[int, dict[tuple[str | None, int], set[int]]] = defaultdict(
        lambda: defaultdict(set)
    )
    for path in visible_files(store):
        parsed = parse_file(path, read(store, path))
        if parsed is None or parsed.job_uuid is None:
            problems.append(_unexpected(path, parsed))
            continue
        if published_name(path) != path:  # a glob reader misses it, a listing reads it
            problems.append(f"{EXCLUSIVE}: {path} is visible under its in-flight name")
        groups[parsed.task][(parsed.job_uuid, parsed.attempt)].add(parsed.file)
    for task in range(TASKS):
        attempts = groups.get(task, {})
        if len(attempts) > 1:
            problems.append(f"{EXCLUSIVE}: task {task} has files of attempts {sorted(attempts)}")
        if not attempts or not any(len(f) == FILES_PER_TASK for f in attempts.values()):
            problems.append(f"{COMPLETE}: task {task} output incomplete: {dict(attempts)}")
    return problems


def _unexpected(path: str, parsed: ParsedFile | None) -> str:
    """The problem of a visible file no attempt wrote: its values differ from the attempt's
    (`same_values`, saying how), or it is another file altogether."""
    if parsed is not None and parsed.wrong:
        return f"{SAME_VALUES}: {path} does not read back as written: {parsed.wrong}"
    return f"{EXCLUSIVE}: unexpected or corrupt file {path}"


def check_success(store: Store, job_reported_committed: bool) -> list[str]:
    success = has_success(store)
    if job_reported_committed and not success:
        return [f"{NO_FALSE_SUCCESS}: job reported committed but wrote no {SUCCESS}"]
    if success:
        bad = check_output(store)
        if bad:
            return [f"{NO_FALSE_SUCCESS}: {SUCCESS} present over bad output: {bad[0]}"]
    return []


def check_nothing_visible(
    store: Store, in_place: bool = False, job_uuid: str | None = None
) -> list[str]:
    """Before job commit nothing may be visible; for a committer that writes in place (direct),
    "visible" means what a reader of committed files sees (`list_committed`). With `job_uuid`,
    only that job's files count (the destination may hold an earlier job's data)."""
    if in_place and table_view(store) is None:
        from ..commit.direct.committer import list_committed

        files = list_committed(store)
    else:
        files = visible_files(store)
    if job_uuid is not None:
        files = files_of_job(store, job_uuid, files)
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
    table = table_view(store)
    if table is not None:
        from .tables import orphans

        left = orphans(store, table)
        if left:
            problems.append(
                f"{NO_ORPHANS}: {len(left)} data files no table version references, e.g. {left[0]}"
            )
    from ..markers.base import MARKER_ROOTS

    for root in MARKER_ROOTS:  # a job's markers inside an entry that stays (a table's own)
        if store.exists(root) and store.walk(root):
            extra.append(root)
    if extra:
        problems.append(f"{NO_LEFTOVERS}: {', '.join(_with_contents(store, extra))} left behind")
    markers = _marker_objects(store)
    if markers:
        problems.append(
            f"{NO_LEFTOVERS}: directory marker objects {', '.join(markers)} left behind "
            "(zero-byte entries a delimiter listing shows)"
        )
    if store.capabilities.multipart_upload:
        uploads = store.list_uploads("")
        if uploads:
            problems.append(
                f"{NO_LEFTOVERS}: {len(uploads)} uploads pending, e.g. {uploads[0].path}"
            )
    return problems


def _marker_objects(store: Store) -> list[str]:
    """On S3, the zero-byte `dir/` objects a delimiter listing of the destination shows
    (`S3Store.marker_objects`; its own at "" shown as `./`): `list` hides them, readers do
    not. Other stores have none."""
    from ..store.substore import SubStore
    from ..store.wrapping import WrappingStore

    inner, where = store, ""
    while isinstance(inner, WrappingStore):  # fault injection, models, sub-stores
        if isinstance(inner, SubStore):
            where = paths.join(inner.prefix, where)
        inner = inner.inner
    marker_objects = getattr(inner, "marker_objects", None)
    return [m or "./" for m in marker_objects(where)] if marker_objects else []


# --- several jobs in one destination ---------------------------------------------------------

Snapshot = dict[str, bytes]


def snapshot(store: Store, files: Collection[str] | None = None) -> Snapshot:
    """Visible files and their bytes (or only `files`, e.g. what an in-place reader sees)."""
    return {p: read(store, p) for p in (visible_files(store) if files is None else files)}


def reader_view(store: Store, in_place: bool) -> Snapshot:
    """What a reader of committed data sees: every visible file, or for a committer that
    writes in place (direct) the files of committed jobs (`list_committed`)."""
    if not in_place or table_view(store) is not None:
        return snapshot(store)
    from ..commit.direct.committer import list_committed

    return snapshot(store, list_committed(store))


def diff(before: Mapping[str, bytes], after: Mapping[str, bytes]) -> str:
    """'' if equal, else a short account of files added, removed and changed."""
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(p for p in set(before) & set(after) if before[p] != after[p])
    parts = [
        f"{what} {len(names)} (e.g. {names[0]})"
        for what, names in (("added", added), ("removed", removed), ("changed", changed))
        if names
    ]
    return ", ".join(parts)


def files_of_job(store: Store, job_uuid: str, among: Collection[str] | None = None) -> list[str]:
    """Visible files of `job_uuid`: by their bytes, or by the job tag in their name (a file
    half copied by a non-atomic rename is still the job's)."""
    from .reference import job_tag

    tag = job_tag(job_uuid)
    out = []
    for path in visible_files(store) if among is None else among:
        parsed = parse_file(path, read(store, path))
        if parsed is not None and (parsed.job_uuid == job_uuid or parsed.tag == tag):
            out.append(path)
    return out


def check_jobs(store: Store, expected: Collection[str], ignore: Collection[str] = ()) -> list[str]:
    """Exclusive and complete for several jobs: every visible file (but `ignore`) belongs to
    one of the `expected` jobs, and each of them has every task's files from one attempt."""
    problems: list[str] = []
    groups: dict[str, dict[int, dict[int, set[int]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(set))
    )
    skip = set(ignore)
    for path in visible_files(store):
        if path in skip:
            continue
        parsed = parse_file(path, read(store, path))
        if parsed is None or parsed.job_uuid is None:
            problems.append(_unexpected(path, parsed))
            continue
        groups[parsed.job_uuid][parsed.task][parsed.attempt].add(parsed.file)
    for job in sorted(set(groups) - set(expected)):
        n = sum(len(f) for t in groups[job].values() for f in t.values())
        problems.append(f"{EXCLUSIVE}: {n} files of job {job}, which must not be visible")
    for job in expected:
        tasks = groups.get(job, {})
        for task in range(TASKS):
            attempts = tasks.get(task, {})
            if len(attempts) > 1:
                problems.append(
                    f"{EXCLUSIVE}: job {job} task {task} has files of attempts {sorted(attempts)}"
                )
            if not any(len(f) == FILES_PER_TASK for f in attempts.values()):
                problems.append(
                    f"{COMPLETE}: job {job} task {task} output incomplete: "
                    f"{ {a: sorted(f) for a, f in attempts.items()} }"
                )
    return problems


def check_kept(store: Store, earlier: Mapping[str, bytes], what: str = "") -> list[str]:
    """Every file of the earlier data set is still there with the same bytes."""
    now = {p: read(store, p) for p in earlier if present(store, p)}
    missing = sorted(set(earlier) - set(now))
    changed = sorted(p for p in now if now[p] != earlier[p])
    if not missing and not changed:
        return []
    detail = ", ".join(
        f"{k} {len(v)} of {len(earlier)} (e.g. {v[0]})"
        for k, v in (("lost", missing), ("changed", changed))
        if v
    )
    return [f"{EARLIER_KEPT}: {what + ': ' if what else ''}earlier data {detail}"]


def replaced_by(mode: str, earlier: Collection[str]) -> set[str]:
    """The files of the earlier data set a committed job in `mode` replaces: all of them for
    `overwrite`, those in the partitions the reference job writes for `overwrite-partitions`
    (pyarrow's delete_matching), none otherwise."""
    if mode == "overwrite":
        return set(earlier)
    if mode == "overwrite-partitions":
        return {p for p in earlier if any(paths.is_under(p, d) for d in JOB_PARTITIONS)}
    return set()


def check_earlier(
    store: Store, earlier: Mapping[str, bytes], visible: Collection[str], replaced: Collection[str]
) -> list[str]:
    """The earlier data set after a job that took effect: the `replaced` files gone (a
    committed `overwrite`, or the written partitions of a partition overwrite), every other
    one still there with the same bytes."""
    gone = set(replaced)
    problems = check_kept(store, {p: b for p, b in earlier.items() if p not in gone})
    seen = set(visible)
    left = sorted(p for p in gone if p in seen)
    if left:
        problems.append(
            f"{WRITE_MODE}: the write mode left {len(left)} of the {len(gone)} earlier files "
            f"it replaces, e.g. {left[0]}"
        )
    return problems


def visible_dirs(store: Store, path: str = "") -> list[str]:
    """Every directory a reader sees (no hidden name on its path), recursively (none for a
    table: its reader sees rows)."""
    if table_view(store) is not None:
        return []
    try:
        entries = store.list(path)
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for e in entries:
        if e.is_dir and not paths.is_hidden(e.path):
            out.append(e.path)
            out.extend(visible_dirs(store, e.path))
    return out


def empty_visible_dirs(store: Store) -> list[str]:
    files = visible_files(store)
    return [d for d in visible_dirs(store) if not any(paths.is_under(f, d) for f in files)]


def _with_contents(store: Store, leftovers: list[str]) -> list[str]:
    """Each leftover with up to three of the files it holds, so a report says what was left."""
    described = []
    for path in leftovers:
        try:
            held = [f.path for f in store.walk(path)]
        except FileNotFoundError:
            held = []
        more = f", +{len(held) - 3}" if len(held) > 3 else ""
        described.append(f"{path} (holding {', '.join(held[:3])}{more})" if held else path)
    return described
