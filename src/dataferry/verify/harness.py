"""What every scenario kind of the referee shares: the scenario record, fresh destinations, the
reference job run in a write mode, an earlier data set, and the checks of a destination after a
job (and any recovery) ended.

A job's write mode goes to `make_committer(name, store, mode=...)`, which decides it inside the
job commit, holding the destination's claim.
"""

from __future__ import annotations

import functools
import importlib
import random
import shutil
import tempfile
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from ..commit.base import Committer
from ..commit.factory import make_committer
from ..commit.job.session import Job, new_session
from ..commit.protocol import JobContext, TaskCommitMessage
from ..commit.protocol.inflight import published_name
from ..engine.attempt import commit_attempt, run_attempt
from ..engine.local import JobRun, LocalEngine
from ..errors import ConfigError, DataferryError, DestinationError, InjectedCrash
from ..ids import new_job_id
from ..store import Store, open_store
from ..store import fault_layer as find_fault_layer
from . import invariants as inv
from .reference import PARTITIONS, SPECULATIVE_TASK, TASKS, unique_tasks, unique_work

MODES = ("error", "append", "overwrite")
# the existing-data scenarios run a partition overwrite (pyarrow's delete_matching) too
EXISTING_MODES = (*MODES, "overwrite-partitions")
FRESH, EXISTING = "fresh", "existing"
# the runs of a scenario family: a fresh destination (mode error), one holding data (each mode)
VARIANTS = ((FRESH, "error"), *((EXISTING, m) for m in MODES))


@dataclass(eq=False)
class Scenario:
    """One run of the referee: where it broke the job, what the job did, what went wrong."""

    index: int | None
    when: str
    op: str = ""
    path: str = ""
    outcome: str = ""
    problems: list[str] = field(default_factory=list)
    kind: str = "crash"  # crash | existing_crash | driver_kill | zombie | concurrent
    mode: str = ""  # the job's write mode ("" for the classic crash points)
    destination: str = FRESH  # or EXISTING: it held a committed data set first
    schedule: str = ""  # kind-specific: where the zombie or the second job acted

    @property
    def violated(self) -> set[str]:
        return {p.split(":", 1)[0] for p in self.problems}

    def example(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "index": self.index,
            "when": self.when,
            "op": self.op,
            "path": self.path,
            "mode": self.mode,
            "destination": self.destination,
            "schedule": self.schedule,
            "outcome": self.outcome,
            "problems": self.problems,
        }


def variant_scenario(
    v: Any, kind: str, index: int | None = None, when: str = "none", **fields: Any
) -> Scenario:
    """A scenario of a family's variant `v`: its destination and its job's write mode."""
    return Scenario(
        index=index, when=when, kind=kind, mode=v.mode, destination=v.destination, **fields
    )


class ScenarioStores:
    """Fresh, empty destinations for scenarios, under one base URL."""

    def __init__(self, base: str | None) -> None:
        self._tmp: str | None = None
        if base is None or base == "local":
            self._tmp = tempfile.mkdtemp(prefix="dataferry-crash-")
            base = self._tmp
        elif base.startswith("sim:") and base.count(":") == 1:
            self._tmp = tempfile.mkdtemp(prefix="dataferry-crash-")
            base = f"{base}:{self._tmp}"
        self.base = base.rstrip("/")

    def url(self, name: str) -> str:
        suffix = f"{name}-{uuid.uuid4().hex[:8]}"
        return f"{self.base}/{suffix}"

    @property
    def shared_between_processes(self) -> bool:
        """Whether another process opening the same URL sees the same files: all but an
        in-process file system (memory://)."""
        return not self.base.startswith("memory://")

    def close(self) -> None:
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)


def engine() -> LocalEngine:
    """Inline and in a fixed order (every store operation has a stable index), one task with a
    speculative duplicate, retries as Spark's."""
    return LocalEngine(workers=0, speculate_tasks=(SPECULATIVE_TASK,), max_attempts=4)


def deterministic_options(committer: str) -> dict[str, Any]:
    """Options that make a committer's store operations run in one fixed order: a committer
    with an I/O pool runs it with one thread, so every crash point has a stable index."""
    import dataclasses

    from ..commit import factory

    try:
        kind = factory.config_type(committer)  # type: ignore[attr-defined]
    except AttributeError:  # an older factory: a registry of kinds
        factory.known_committers()
        entry = getattr(factory, "REGISTRY", {}).get(committer)
        kind = entry.config_type if entry is not None else None
    except ConfigError:
        kind = None
    if kind is None:
        return {}
    fields = {f.name for f in dataclasses.fields(kind)}
    pools = ("io_threads", "move_threads", "load_partition_threads", "threads", "upload_threads")
    options: dict[str, Any] = {name: 1 for name in pools if name in fields}
    # retries after an injected failure need no pause: timing is not what the referee checks
    options.update({name: 0.0 for name in ("save_retry_sleep_s",) if name in fields})
    # the reference rows have no record key (Hudi refuses a table without one unless told):
    # the referee checks each row itself, so the table is keyless, its writes inserts
    options.update({name: True for name in ("keyless",) if name in fields})
    return options


def load_preload(preload: Collection[str] = ()) -> None:
    """Import each `module` or `module:function` (then call `function()`), before anything
    else runs: how a committer that is not in the registry (a test's deliberately broken one, a
    user's own) gets its registry row in this process and in a child driver."""
    for entry in preload:
        module, _, func = entry.partition(":")
        loaded = importlib.import_module(module)
        if func:
            getattr(loaded, func)()


def allowed_leftovers(committer: Any) -> tuple[str, ...]:
    """Hidden names a committer legitimately leaves in the destination after a job."""
    return (inv.SUCCESS, *getattr(committer, "permanent_entries", ()))


def leftovers_allowed(
    committer: str, url: str, mode: str, options: dict[str, Any]
) -> tuple[str, ...]:
    """`allowed_leftovers` of the committer that recovers a job of `mode` at `url`."""
    return allowed_leftovers(recovery_committer(committer, quiet_store(url), mode, options))


def quiet_store(url: str) -> Store:
    """The destination as a checker or a recovering user opens it: no faults, no latency."""
    return open_store(url, latency_scale=0.0)


def discard(store: Store) -> None:
    try:
        store.delete("", recursive=True)
    except Exception:
        pass


def seeded_uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def spread(points: list[Any], n: int, rng: random.Random) -> list[Any]:
    """`n` of `points` spread over all of them: one at random from each of n equal strata."""
    if n >= len(points):
        return list(points)
    return [
        points[rng.randrange(i * len(points) // n, (i + 1) * len(points) // n)] for i in range(n)
    ]


@dataclass
class Variant:
    """One kind of run of a scenario family: fresh or existing destination, the job's write
    mode, the seeded uuids of the earlier job and this one, and where this job's commit lies
    in its baseline trace (`start`, `end`)."""

    destination: str
    mode: str
    earlier_uuid: str
    job_uuid: str
    start: int = 0
    end: int = 0


# --- a job in a write mode ------------------------------------------------------------------


def job_committer(name: str, store: Store, mode: str, options: dict[str, Any]) -> Committer:
    """A committer for one job in write `mode` (decided inside its job commit)."""
    return make_committer(name, store, mode=mode, allow_unsafe_rename=True, **options)


# a committer to abort or recover a job of `mode` with: built as the job's (it changes nothing
# by itself)
recovery_committer = job_committer


def refused(exc: BaseException | None) -> bool:
    """Whether a job's failure is the destination refusing it (a DestinationError anywhere in
    the chain: engines wrap a job commit's error in JobCommitError)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, DestinationError):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def status_of(exc: BaseException) -> str:
    if isinstance(exc, InjectedCrash):
        return "crashed"
    return "refused" if refused(exc) else f"failed:{type(exc).__name__}"


@dataclass
class JobOutcome:
    """How one reference job ended, and which store operations its job commit spanned."""

    status: str  # committed | refused | failed:<Error> | crashed
    job_uuid: str
    job_id: Any = None  # the JobId (recovery rebuilds the job's context from it)
    error: str = ""
    run: JobRun | None = None
    commit_start: int | None = None  # trace index when job commit started (FaultStore only)
    commit_end: int | None = None  # trace length when the run returned or raised
    chain: list[str] = field(default_factory=list)  # the error's types, outermost first
    unnamed: str = ""  # the first exception in that chain that is not the library's own

    @property
    def committed(self) -> bool:
        return self.status == "committed"


def error_chain(exc: BaseException | None) -> tuple[list[str], str]:
    """The types of an error and of its causes, outermost first, and the first of them that
    is not a named error of the library (a DataferryError, or the OSError a StoreError stands
    for): a TypeError, KeyError or JSON decode error that escaped from a damaged record."""
    names: list[str] = []
    unnamed = ""
    seen: set[int] = set()
    first = True
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        names.append(type(exc).__name__)
        named = isinstance(exc, DataferryError) or (not first and isinstance(exc, OSError))
        if not named and not unnamed:
            unnamed = type(exc).__name__
        first = False
        exc = exc.__cause__ or exc.__context__
    return names, unnamed


def run_reference(
    committer: str,
    store: Store,
    mode: str,
    options: dict[str, Any],
    job_uuid: str | None = None,
    before_job_commit: Callable[[Any], None] | None = None,
    partitions: int = PARTITIONS,
) -> JobOutcome:
    """The reference job (job-tagged names) in `mode`, on the inline engine, over `partitions`
    partition directories. An InjectedCrash (the driver died) propagates, with the outcome so
    far in `exc.outcome`."""
    job_id = new_job_id(job_uuid=job_uuid) if job_uuid else new_job_id()
    out = JobOutcome(status="", job_uuid=job_id.uuid, job_id=job_id)
    fault = find_fault_layer(store)

    def at_commit(job: Any) -> None:
        if fault is not None:
            out.commit_start = fault.op_count
        if before_job_commit is not None:
            before_job_commit(job)

    try:
        under_test = job_committer(committer, store, mode, options)
        out.run = engine().run_job(
            under_test, unique_tasks(partitions), job_id=job_id, before_job_commit=at_commit
        )
        out.status = "committed"
    except InjectedCrash as e:
        out.status, out.error = "crashed", str(e)
        e.outcome = out  # type: ignore[attr-defined]
        raise
    except DataferryError as e:
        out.status, out.error = status_of(e), f"{type(e).__name__}: {e}"
        out.chain, out.unnamed = error_chain(e)
    finally:
        if fault is not None:
            out.commit_end = fault.op_count
    return out


@dataclass
class PreparedJob:
    """A job set up, with every task committed and its commit messages, not yet committed."""

    committer: Committer
    job: JobContext
    messages: list[TaskCommitMessage]
    status: str = ""  # once committed or failed
    error: str = ""

    def commit(self) -> str:
        """Commit as the engine's driver does: on failure, abort the job (and report why)."""
        try:
            Job.set_up(self.committer, self.job).commit(self.messages)  # aborts on failure
            self.status = "committed"
        except Exception as e:
            self.status, self.error = status_of(e), f"{type(e).__name__}: {e}"
        return self.status


def prepare_job(
    committer: str,
    store: Store,
    mode: str,
    options: dict[str, Any],
    job_uuid: str,
    attempts: dict[int, int] | None = None,
    record_driver: bool = False,
) -> PreparedJob:
    """Set up the reference job (job-tagged names) and run each task's attempt (number from
    `attempts`, else 0) to its task commit, through the engine's own attempt functions. Raises
    DestinationError where the write mode is applied up front and refuses the destination.
    `record_driver`: as an engine's driver, this process is recorded as the job's."""
    under_test = job_committer(committer, store, mode, options)
    session = new_session(under_test, new_job_id(job_uuid=job_uuid))
    job = session.setup(record_driver=record_driver).context
    messages = []
    for t in range(TASKS):
        ctx = job.task(t, (attempts or {}).get(t, 0))
        report = run_attempt(ctx, functools.partial(unique_work, t))
        if report.needs_commit:
            messages.append(commit_attempt(ctx, None, report.written).message)
    return PreparedJob(under_test, job, messages)


# --- checks of a destination after a job ---------------------------------------------------------


def check_outcome(
    store: Store,
    job_uuid: str,
    mode: str,
    earlier: inv.Snapshot,
    reported: str,
    allow: Collection[str] = (inv.SUCCESS,),
) -> list[str]:
    """The destination after one job ended (and any recovery ran), against its write mode.

    The job either took effect, and then it is all there as its mode says (with `_SUCCESS`),
    or it did not, and then nothing of it is visible and the earlier data is as it was.
    `reported`: what the job's driver saw (committed, refused, failed:..., crashed, killed).
    """
    problems: list[str] = []
    visible = inv.visible_files(store)
    mine = inv.files_of_job(store, job_uuid, visible)
    has_success = inv.has_success(store)
    if mine:
        if reported == "refused":
            problems.append(
                f"{inv.WRITE_MODE}: the job was refused, yet {len(mine)} of its files are "
                f"visible, e.g. {mine[0]}"
            )
        if mode == "error" and earlier and reported != "refused":
            problems.append(
                f"{inv.WRITE_MODE}: a job in mode 'error' ({reported}) put its files into a "
                f"destination that held {len(earlier)} files"
            )
        problems += inv.check_earlier(store, earlier, visible, inv.replaced_by(mode, earlier))
        bad = inv.check_jobs(store, [job_uuid], ignore=earlier)
        # a glob reader misses a file under its in-flight name (a load that left it unnamed)
        bad += [
            f"{inv.EXCLUSIVE}: {p} is visible under its in-flight name"
            for p in mine
            if published_name(p) != p
        ]
        if bad and reported != "committed":
            problems.append(
                f"{inv.NOTHING_OF_FAILED}: the {reported} job is partly visible "
                f"({len(mine)} files, e.g. {mine[0]}): neither finished nor undone"
            )
        if not has_success:
            if reported == "committed":
                problems.append(f"{inv.NO_FALSE_SUCCESS}: job reported committed but no _SUCCESS")
            elif not bad:
                problems.append(
                    f"{inv.NOTHING_OF_FAILED}: the {reported} job's output is visible without "
                    f"_SUCCESS ({len(mine)} files, e.g. {mine[0]})"
                )
        elif bad:
            problems.append(f"{inv.NO_FALSE_SUCCESS}: _SUCCESS present over bad output: {bad[0]}")
        problems += bad
    else:
        if reported == "committed":
            problems.append(f"{inv.COMPLETE}: job reported committed, none of its files visible")
        if reported == "refused" and (mode != "error" or not earlier):
            problems.append(
                f"{inv.WRITE_MODE}: mode {mode!r} refused a destination holding "
                f"{len(earlier)} files"
            )
        gone = inv.replaced_by(mode, earlier) if reported == "committed" else set()
        replaced = bool(earlier) and gone == set(earlier)  # all the earlier data went
        kept = inv.check_kept(store, {p: b for p, b in earlier.items() if p not in gone})
        problems += kept
        problems += inv.check_jobs(store, [], ignore=earlier)
        if not earlier:
            empty = inv.empty_visible_dirs(store)
            if empty:
                problems.append(
                    f"{inv.NOTHING_OF_FAILED}: {len(empty)} empty directories visible, "
                    f"e.g. {empty[0]}"
                )
        if has_success and (not earlier or replaced):
            problems.append(f"{inv.NO_FALSE_SUCCESS}: _SUCCESS but none of the job's output")
        elif has_success and kept:
            problems.append(f"{inv.NO_FALSE_SUCCESS}: _SUCCESS over damaged earlier data")
    problems += inv.check_no_leftovers(store, tuple(allow))
    return problems


def check_rerun(
    committer: str, url: str, options: dict[str, Any], allow: Collection[str] = (inv.SUCCESS,)
) -> list[str]:
    """After recovery, a new job in mode 'error' behaves as on a fresh destination (commits)
    or as on a committed one (refused with a DestinationError, changing nothing)."""
    store = quiet_store(url)
    before = inv.snapshot(store)
    holds = bool(before) or inv.has_success(store)
    dirs_only = not holds and bool(inv.visible_dirs(store))
    out = run_reference(committer, store, "error", options)
    problems: list[str] = []
    if holds:
        if out.committed:
            problems.append(
                f"{inv.WRITE_MODE}: a rerun in mode 'error' committed over a destination "
                f"holding {len(before)} files"
            )
        elif out.status != "refused":
            problems.append(
                f"{inv.WRITE_MODE}: a rerun in mode 'error' over data failed with "
                f"{out.error}, not a DestinationError"
            )
        changed = inv.diff(before, inv.snapshot(store))
        if changed and not out.committed:
            problems.append(f"{inv.EARLIER_KEPT}: a refused rerun changed the data: {changed}")
        problems += inv.check_no_leftovers(store, tuple(allow))
    elif out.committed:
        problems += check_outcome(store, out.job_uuid, "error", {}, "committed", allow)
    elif not dirs_only:
        problems.append(
            f"{inv.WRITE_MODE}: a rerun in mode 'error' failed on a destination holding "
            f"nothing: {out.error}"
        )
    return [f"{p.split(':', 1)[0]}: rerun: {p.split(':', 1)[1].strip()}" for p in problems]
