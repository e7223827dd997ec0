"""Inputs for one manifest stage at a time: a job layout, task attempts and their manifests
made by hand, and the check that a stage was timed (or marked failed) exactly once."""

from __future__ import annotations

from dataferry.commit.manifest.files import DirEntry, EntryStatus, FileEntry, TaskManifest
from dataferry.commit.manifest.layout import JobLayout
from dataferry.commit.protocol import StageContext
from dataferry.stats import FAILURES
from dataferry.store import Store, paths

LAYOUT = JobLayout("job-0001", 0)


def task_id(n: int) -> str:
    return f"task_{n:04d}"


def attempt_id(n: int, attempt: int = 0) -> str:
    return f"attempt_{n:04d}_{attempt}"


def attempt_dir(n: int, attempt: int = 0) -> str:
    return f"{LAYOUT.tasks_dir}/{attempt_id(n, attempt)}"


def write_attempt(
    store: Store, n: int, files: dict[str, bytes], attempt: int = 0, save: bool = True
) -> TaskManifest:
    """Task `n`'s attempt directory with `files` (destination path -> bytes), and the manifest
    a task commit would make of it (every directory new to the destination), saved where job
    commit looks for it unless `save` is false."""
    base = attempt_dir(n, attempt)
    entries = []
    for dest, data in sorted(files.items()):
        store.write_bytes(f"{base}/{dest}", data)
        entries.append(
            FileEntry(f"{base}/{dest}", dest, len(data), store.stat(f"{base}/{dest}").etag)
        )
    dirs = sorted(
        {p for dest in files for p in _ancestors(dest)}, key=lambda d: (paths.depth(d), d)
    )
    manifest = TaskManifest(
        LAYOUT.job_uuid,
        LAYOUT.attempt,
        task_id(n),
        attempt_id(n, attempt),
        base,
        files=entries,
        directories=[DirEntry(d, EntryStatus.NOT_FOUND, paths.depth(d)) for d in dirs],
    )
    if save:
        save_manifest(store, manifest)
    return manifest


def save_manifest(store: Store, manifest: TaskManifest) -> str:
    path = LAYOUT.manifest_path(manifest.task_id)
    store.write_bytes(path, manifest.to_bytes(store))
    return path


def committed(*manifests: TaskManifest) -> dict[str, str]:
    """What the driver tells job commit: task id -> the attempt that committed it."""
    return {m.task_id: m.task_attempt_id for m in manifests}


def _ancestors(dest: str) -> list[str]:
    out, parent = [], paths.parent(dest)
    while parent:
        out.append(parent)
        parent = paths.parent(parent)
    return out


def assert_timed(ctx: StageContext, statistic: str, name: str) -> None:
    """The stage ran once and succeeded: one duration under its statistic, its seconds kept."""
    assert ctx.stats.counter(statistic) == 1, ctx.stats.counter_values()
    assert ctx.stats.counter(statistic + FAILURES) == 0
    assert ctx.stage_seconds[name] >= 0.0
    assert ctx.last_stage == statistic and ctx.failed_stage == ""


def assert_failed(ctx: StageContext, statistic: str, name: str) -> None:
    """The stage ran once and failed: counted as a failure, its seconds kept, marked failed."""
    assert ctx.stats.counter(statistic) == 0
    assert ctx.stats.counter(statistic + FAILURES) == 1
    assert ctx.stage_seconds[name] >= 0.0
    assert ctx.failed_stage == statistic


def data_files(store: Store) -> list[str]:
    return sorted(s.path for s in store.walk("") if not s.path.startswith("_"))
