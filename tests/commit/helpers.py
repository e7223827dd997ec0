"""The one set of commit test helpers: run a job's tasks through the protocol, and look at a
destination as a plain reader does (files hidden by `_`/`.` names left out)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

from dataferry.commit.protocol import TaskCommitMessage
from dataferry.store import Store, paths

Files = Mapping[int, Sequence[str]]  # task index -> paths the task writes (relative)


def task_bytes(i: int, relpath: str) -> bytes:
    """What task `i` writes into `relpath`, unless a test says otherwise."""
    return f"{i}:{relpath}".encode()


def run_tasks(
    committer,
    job,
    files: Files,
    attempt: int = 0,
    data: Callable[[int, str], bytes] = task_bytes,
) -> list[TaskCommitMessage]:
    """Set up, write and commit one attempt of each task in `files`; their commit messages."""
    msgs = []
    for i, names in files.items():
        task = job.task(i, attempt)
        committer.setup_task(task)
        for name in names:
            committer.write_file(task, name, data(i, name))
        msgs.append(committer.commit_task(task))
    return msgs


def run_job(committer, files: Files, data: Callable[[int, str], bytes] = task_bytes):
    """Set up a job, run its tasks and commit it; returns what it wrote, by relative path."""
    job = committer.new_job()
    committer.setup_job(job)
    committer.commit_job(job, run_tasks(committer, job, files, data=data))
    return {name: data(i, name) for i, names in files.items() for name in names}


def expected(
    committer, job, files: Files, attempt: int = 0, data: Callable[[int, str], bytes] = task_bytes
) -> dict[str, bytes]:
    """What the tasks' files are once committed, by the path a reader sees them at (some
    committers give a file a name of their own: `output_path`)."""
    return {
        committer.output_path(job.task(i, attempt), name): data(i, name)
        for i, names in files.items()
        for name in names
    }


def visible(where: Store | str | os.PathLike[str], show: Sequence[str] = ()) -> list[str]:
    """What a plain reader sees in a destination, sorted: a store's files, or every entry of
    a local directory (files, directories and links, none followed). `show` names hidden
    paths to list too (e.g. `_SUCCESS`)."""
    if isinstance(where, Store):
        found = [s.path for s in where.walk("")]
    else:
        root = os.fspath(where)
        found = [
            os.path.relpath(os.path.join(d, n), root).replace(os.sep, "/")
            for d, dirs, names in os.walk(root)
            for n in dirs + names
        ]
    return sorted(p for p in found if not paths.is_hidden(p) or p in show)


def contents(store: Store) -> dict[str, bytes]:
    """Every visible file's bytes, by path."""
    return {p: store.read_bytes(p) for p in visible(store)}


def read_table(path, fmt: str = "parquet"):
    """A (hive-partitioned) dataset at a local path, read as a reader reads it (hidden files
    skipped), as one pyarrow table."""
    import pyarrow.dataset as pads

    return pads.dataset(str(path), format=fmt, partitioning="hive").to_table()


def read_rows(path, columns: Sequence[str], fmt: str = "parquet") -> list[tuple]:
    """The dataset's rows as sorted tuples of `columns`."""
    return sorted(tuple(r[c] for c in columns) for r in read_table(path, fmt).to_pylist())


def make_outside(tmp_path: os.PathLike[str]):
    """A directory outside any destination (`tmp_path/outside`), with two files in it: what a
    planted symbolic link points at, and what must come through a commit untouched."""
    from pathlib import Path

    d = Path(tmp_path) / "outside"
    (d / "sub").mkdir(parents=True)
    (d / "a.parquet").write_bytes(b"outside a")
    (d / "sub" / "b.parquet").write_bytes(b"outside b")
    return d


def outside_files(d) -> dict[str, bytes]:
    """The files under directory `d`, by relative path."""
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def task_with_link(committer, dest, target, link_name: str = "part=x"):
    """A set-up task whose work directory holds a real file and a link to `target`."""
    job = committer.new_job()
    committer.setup_job(job)
    task = job.task(0)
    committer.setup_task(task)
    committer.write_file(task, "part=a/real.parquet", b"real")
    link = os.path.join(os.fspath(dest), committer.task_work_path(task), link_name)
    os.makedirs(os.path.dirname(link), exist_ok=True)  # the real file may be named flat
    os.symlink(target, link)
    return task


def exclusive_creates(monkeypatch, run: Callable[[], object]) -> list[str]:
    """The paths every store's exclusive create (`create_if_absent`) was asked for while
    `run` ran."""
    from dataferry.store.base import Store

    made: list[str] = []
    real = Store.create_if_absent

    def spy(self, path, data=b""):
        made.append(path)
        return real(self, path, data)

    monkeypatch.setattr(Store, "create_if_absent", spy)
    try:
        run()
    finally:
        monkeypatch.setattr(Store, "create_if_absent", real)
    return made
