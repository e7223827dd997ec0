"""Job commit, stage 1: load the committed tasks' manifests.

Manifests are loaded in parallel on the I/O pool, validated, checked for paths that escape
(sources must lie in the task's own attempt directory, destinations in the destination and
outside `_temporary`), and their file entries are streamed to an entries file in the job's own
directory, where the intent record points and a resumed commit reads them: memory holds at
most one manifest per I/O thread plus a hash per destination (to reject two tasks writing the
same file, naming both: `owners.py`), not the whole job's file list. A small job's entries
(up to KEEP_ENTRIES_BYTES) are also kept as written, for its own renames to read.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from itertools import repeat

import msgspec

from ....errors import JobCommitError, NotFound, ValidationError
from ....stages import stage
from ....store import IOPool, Store, paths
from ...protocol import StageContext
from ...records.success import SUCCESS_FILE
from ..carried import inflate
from ..files import DirEntry, FileEntry, TaskManifest, read_manifest
from ..layout import PENDING_DIR
from .owners import DestinationOwners

ENTRIES_FILE = "entries.jsonl"
# the entries a job commit keeps in memory as it writes them, up to this many bytes: its own
# renames then read them from there, not back from the store (two round trips, one of them to
# a DataNode on HDFS); a larger job streams them back from the file
KEEP_ENTRIES_BYTES = 1024 * 1024
Batch = tuple[str, list[FileEntry]]  # a task attempt id and some of its entries


@dataclass
class LoadedManifests:
    """What job commit knows after loading: where the entries are, and the totals."""

    scratch: Store
    entries_path: str = ENTRIES_FILE
    directories: dict[str, DirEntry] = field(default_factory=dict)
    manifests: int = 0
    files: int = 0
    bytes: int = 0
    task_attempts: dict[str, int] = field(default_factory=dict)  # attempt -> its files
    entries_bytes: int | None = None  # the entries file's size as written (None: not known)
    closing: Future[None] | None = None  # the entries file's close, still under way
    # the size was checked just now (the intent's check): the next `batches` need not ask
    size_checked: bool = False
    # the entries file's lines as this process wrote them (None: not kept, read the file)
    kept: list[bytes] | None = None
    # the job's directories `check_existing_files` found existing in the destination
    seen_dirs: set[str] = field(default_factory=set)

    def written(self) -> None:
        """Wait until the entries file is closed (its close may run beside other work)."""
        if self.closing is not None:
            closing, self.closing = self.closing, None
            closing.result()

    def batches(self, threads: int) -> Iterator[Batch]:
        """The entries, streamed from the scratch file as (task attempt id, its entries) in
        batches sized so that `threads` workers get several each: one pool task per batch
        instead of per file keeps the per-file overhead down on fast stores.

        Each line is decoded and checked in one pass as it is read, and the file's size and
        entry count against what the loading recorded: a damaged or cut-short entries file
        gives one ValidationError naming it, never a commit of part of the job's files."""
        if self.files == 0:
            return
        source = self.scratch.full_url(self.entries_path)
        if self.size_checked:
            self.size_checked = False  # once: a later reading checks afresh
        else:
            self.check_size()
        size = max(1, min(256, self.files // (threads * 8)))
        count = 0
        with contextlib.ExitStack() as stack:
            lines: Iterable[bytes] = self.kept if self.kept is not None else ()
            if self.kept is None:
                lines = stack.enter_context(self.scratch.open_read(self.entries_path))
            for number, line in enumerate(lines, 1):
                attempt, entries = parse_entries_line(line, source, number)
                count += len(entries)
                for start in range(0, len(entries), size):
                    yield attempt, entries[start : start + size]
        if count != self.files:
            raise ValidationError(
                f"holds {count} file entries, the commit's plan {self.files}", source
            )

    def check_size(self) -> None:
        """The entries file is as long as when it was written (when that was recorded)."""
        if self.entries_bytes is None:
            return
        source = self.scratch.full_url(self.entries_path)
        if not isinstance(self.entries_bytes, int) or isinstance(self.entries_bytes, bool):
            raise ValidationError(
                f"its recorded size {self.entries_bytes!r} is not an integer", source
            )
        try:
            st = self.scratch.stat(self.entries_path)
        except NotFound:
            raise ValidationError("the job's entries file is missing", source) from None
        if st.is_dir or st.size != self.entries_bytes:
            raise ValidationError(
                f"is {'a directory' if st.is_dir else f'{st.size} bytes'}, "
                f"written as {self.entries_bytes} bytes",
                source,
            )

    def entries(self) -> Iterator[tuple[FileEntry, str]]:
        """Every (entry, task attempt id), one at a time."""
        for attempt, entries in self.batches(1):
            for entry in entries:
                yield entry, attempt


class EntriesLine(msgspec.Struct):
    """One line of the entries file: `{"a": attempt id, "f": [[src, dest, size, etag], ...]}`."""

    a: str
    f: list[FileEntry]


_LINE_DECODER = msgspec.json.Decoder(EntriesLine)
_LINE_ENCODER = msgspec.json.Encoder()


def parse_entries_line(line: bytes, source: str, number: int) -> tuple[str, list[FileEntry]]:
    """One line of the entries file, decoded and checked (ValidationError naming the line)."""
    try:
        record = _LINE_DECODER.decode(line)
    except msgspec.ValidationError as e:
        raise ValidationError(f"not an entries record: {e}", source, f"line {number}") from None
    except msgspec.DecodeError as e:
        raise ValidationError(f"not valid JSON: {e}", source, f"line {number}") from None
    return record.a, record.f


@stage("job_stage_load_manifests", "load_manifests")
def load_manifests(
    ctx: StageContext,
    committed: Mapping[str, str],
    scratch: Store,
    entries_path: str = ENTRIES_FILE,
    close_beside: bool = False,
    carried: Mapping[str, str] | None = None,
) -> LoadedManifests:
    """Load the manifest of each committed task (task id -> the attempt the driver says
    committed it), streaming its entries to `entries_path` in `scratch` (and keeping them,
    up to KEEP_ENTRIES_BYTES, in `kept`). `close_beside`: the entries file is closed on a
    thread of its own (a slow close: `LoadedManifests.written` waits for it). `carried`:
    attempt id -> the copy of its manifest its commit message carries (`carried.py`)."""
    loaded = LoadedManifests(scratch, entries_path, kept=[])
    task_of = {attempt: task for task, attempt in committed.items()}
    owners = DestinationOwners(
        lambda attempt: [
            f.dest for f in read_checked(ctx, task_of[attempt], attempt, carried).files
        ],
        ctx.store.full_url,
    )
    lock = threading.Lock()
    sink = scratch.open_write(entries_path)

    written = 0

    def load_one(item: tuple[str, str]) -> None:
        nonlocal written
        task_id, attempt_id = item
        manifest = read_checked(ctx, task_id, attempt_id, carried)
        line = _LINE_ENCODER.encode(EntriesLine(attempt_id, manifest.files))
        owners.claim(attempt_id, [f.dest for f in manifest.files])
        with lock:
            for d in manifest.directories:
                loaded.directories.setdefault(d.dest, d)
            loaded.manifests += 1
            loaded.files += len(manifest.files)
            loaded.bytes += manifest.total_size
            loaded.task_attempts[attempt_id] = len(manifest.files)
            if manifest.files:
                sink.write(line + b"\n")
                written += len(line) + 1
                if loaded.kept is not None:
                    loaded.kept.append(line)
                    if written > KEEP_ENTRIES_BYTES:
                        loaded.kept = None  # too many to hold: read back from the file

    try:
        ctx.pool.for_each(load_one, sorted(committed.items()), adaptive=True)
    except BaseException:
        sink.close()
        raise
    if close_beside:
        closer = ThreadPoolExecutor(1, thread_name_prefix="dataferry-entries")
        loaded.closing = closer.submit(sink.close)
        closer.shutdown(wait=False)
    else:
        sink.close()
    loaded.entries_bytes = written
    ctx.stats.incr("committer_task_manifests_loaded", loaded.manifests)
    return loaded


def read_checked(
    ctx: StageContext, task_id: str, attempt_id: str, carried: Mapping[str, str] | None = None
) -> TaskManifest:
    """The manifest of the attempt the driver says committed the task: as its message
    carried it (`carried`: attempt id -> copy), else read, rebuilt from the attempt's directory where another
    attempt's manifest took its name; checked either way."""
    path = ctx.layout.manifest_path(task_id)
    source = ctx.store.full_url(path)
    copy = (carried or {}).get(attempt_id)
    if copy is not None:  # as its commit message carries it (`carried.py`): not read back
        ctx.stats.incr("committer_task_manifests_carried")
        where = f"{source} (the copy {attempt_id}'s commit message carries)"
        manifest = TaskManifest.from_bytes(inflate(copy, where), ctx.store, where)
        check_manifest(ctx, manifest, where, task_id, attempt_id)
        return manifest
    try:
        with ctx.stats.duration("op_load_manifest"):
            manifest = read_manifest(ctx.store, path)
    except NotFound:
        raise JobCommitError(
            f"task {task_id} was committed by {attempt_id} but its manifest {source} is missing"
        ) from None
    if manifest.task_attempt_id != attempt_id and manifest.task_id == task_id:
        manifest = rescan_attempt(ctx, manifest, attempt_id)
    check_manifest(ctx, manifest, source, task_id, attempt_id)
    return manifest


def rescan_attempt(ctx: StageContext, saved: TaskManifest, attempt_id: str) -> TaskManifest:
    """The task's manifest is another attempt's: one the driver gave up on committed after the
    attempt it chose (last writer wins the manifest's name). The chosen attempt's files are
    still in its own directory, so its manifest is rebuilt from there, untouched by the other."""
    from .scan import scan_task_attempt

    attempt_dir = f"{ctx.layout.tasks_dir}/{attempt_id}"
    own = StageContext(
        store=ctx.store,
        stats=ctx.stats,
        pool=IOPool(1),
        job_id=ctx.job_id,
        config=ctx.config,
        layout=ctx.layout,
    )
    try:
        files, dirs = scan_task_attempt(own, attempt_dir)
    finally:
        own.close()
    ctx.stats.incr("committer_task_manifests_rebuilt")
    return replace(
        saved,
        task_attempt_id=attempt_id,
        task_attempt_dir=attempt_dir,
        files=files,
        directories=dirs,
    )


def check_manifest(
    ctx: StageContext, m: TaskManifest, source: str, task_id: str, attempt_id: str
) -> None:
    """Refuse a manifest of another job or attempt, or one whose paths escape, before any
    rename happens."""
    if m.task_id != task_id or m.task_attempt_id != attempt_id:
        raise ValidationError(
            f"manifest is of {m.task_attempt_id} (task {m.task_id}), but the driver says task "
            f"{task_id} was committed by {attempt_id}",
            source,
            "taskAttemptID",
        )
    if m.job_id != ctx.layout.job_uuid:
        raise ValidationError(
            f"manifest is of job {m.job_id!r}, not {ctx.layout.job_uuid!r}", source, "jobId"
        )
    expected_dir = f"{ctx.layout.tasks_dir}/{m.task_attempt_id}"
    if m.task_attempt_dir != expected_dir:
        raise ValidationError(
            f"task attempt directory {m.task_attempt_dir!r} is not {expected_dir!r}",
            source,
            "taskAttemptDir",
        )
    inside = expected_dir + "/"  # paths from a manifest are normalized already
    sources, dests = [f.source for f in m.files], [f.dest for f in m.files]
    if all(map(str.startswith, sources, repeat(inside))) and not _any_forbidden(dests):
        files: list[FileEntry] = []  # the common case, seen in a few passes: nothing to name
    else:
        files = m.files
    for i, f in enumerate(files):
        if not f.source.startswith(inside):
            raise ValidationError(
                f"source {f.source!r} is not inside the task attempt directory",
                source,
                f"files[{i}]",
            )
        if _forbidden_dest(f.dest):
            raise ValidationError(
                f"destination {f.dest!r} is not a data path of the destination",
                source,
                f"files[{i}]",
            )
    dirs = m.directories if _any_forbidden([d.dest for d in m.directories]) else []
    for i, d in enumerate(dirs):
        if _forbidden_dest(d.dest):
            raise ValidationError(
                f"directory {d.dest!r} is not a data path of the destination",
                source,
                f"directories[{i}]",
            )


def _any_forbidden(dests: list[str]) -> bool:
    """Whether `_forbidden_dest` may hold for one of `dests` (True also where a path merely
    contains a forbidden name: the caller then looks at each)."""
    joined = "\x00".join(dests)
    return "" in dests or SUCCESS_FILE in joined or PENDING_DIR in joined


def _forbidden_dest(dest: str) -> bool:
    return not dest or dest in (SUCCESS_FILE, PENDING_DIR) or dest.startswith(PENDING_DIR + "/")


@stage("job_stage_check_existing_files", "check_existing_files")
def check_existing_files(ctx: StageContext, loaded: LoadedManifests) -> list[str]:
    """Files already in the destination where this job's files go, found before anything
    changes: the destination's directories this job writes into are walked from its root,
    level by level, one listing per directory that exists (a directory missing from its
    parent's listing is not there, and nothing below it is asked about): one listing for a new
    destination. The tasks did not look (`scan.py`); this look, under the claim, is the newer.
    The directories found are noted in `loaded.seen_dirs` (the commit creates no other). Files
    in the way are refused, or with `delete_target_files` returned to be replaced."""
    if not loaded.files:
        return []
    below: dict[str, set[str]] = {}  # a directory -> the job's directories in it
    for d in loaded.directories:
        while d and d not in below.get(paths.parent(d), ()):
            below.setdefault(paths.parent(d), set()).add(d)
            d = paths.parent(d)
    names: dict[str, set[str]] = {}

    def list_one(directory: str) -> list[str]:
        """The files in `directory` (into `names`), and the job's directories in it."""
        try:
            listing = ctx.store.list(directory)
        except NotFound:
            listing = []
        names[directory] = {e.name for e in listing if not e.is_dir}
        inside = below.get(directory, set())
        return [e.path for e in listing if e.is_dir and e.path in inside]

    level = [""]
    while level:
        level = [d for found in ctx.pool.map(list_one, level, adaptive=True) for d in found]
        loaded.seen_dirs.update(level)
    if not any(names.values()):
        return []
    taken = []
    for entry, attempt in loaded.entries():
        parent = paths.parent(entry.dest)
        if paths.name(entry.dest) in names.get(parent, ()):
            if not ctx.config.delete_target_files:
                raise JobCommitError(
                    f"cannot commit {ctx.store.full_url(entry.dest)} (from {attempt}): a file is "
                    "already there; file names should be unique per job, or set "
                    "delete_target_files=True"
                )
            taken.append(entry.dest)
    ctx.stats.incr("op_delete_file_under_destination", len(taken))
    return taken
