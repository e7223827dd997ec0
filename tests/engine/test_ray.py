"""Writes from Ray Data through CommitDatasink on a local Ray (num_cpus=2).

Failures are injected with `dataferry.ray._inject_failures(sink, [AttemptFailure(...) or
(task, attempt, point)])`, a private test helper (the public constructor has no fault hook):
the named attempt of the named task (Ray's `ctx.task_idx`; attempts are numbered from 0 by the
coordinator as Ray runs and retries the task) dies after writing its files or half way through
its task commit (an AttemptDied error), or its worker process exits (os._exit) once it is
authorised to commit or once it has committed.
"""

from __future__ import annotations

import inspect
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

ray = pytest.importorskip("ray")

from dataferry import write_dataset  # noqa: E402
from dataferry.engine import AttemptFailure  # noqa: E402
from dataferry.errors import ConfigError  # noqa: E402
from dataferry.ray import CommitDatasink, _inject_failures  # noqa: E402
from dataferry.ray.coordinator import coordinator_actor  # noqa: E402

RETRY = {"max_retries": 3, "retry_exceptions": True}


def table(n=10_000):
    i = np.arange(n)
    return pa.table(
        {
            "id": i,
            "day": pa.array(np.array(["d0", "d1", "d2"])[i % 3]),
            "region": pa.array(np.array(["eu", "us"])[(i // 7) % 2]),
            "amount": i * 0.5,
        }
    )


def open_jobs():
    """Jobs the driver's coordinator actor still holds (each write's are dropped at its end)."""
    return ray.get(coordinator_actor().__ray_call__.remote(lambda c: sorted(c.jobs)))


def dataset(t, blocks):
    return ray.data.from_arrow(t).repartition(blocks)


def data_files(root):
    return sorted(p for p in root.rglob("*.parquet") if p.is_file())


def read_back(root):
    return pads.dataset(str(root), format="parquet", partitioning="hive").to_table()


def assert_exact(root, t):
    """Every input row is in the output exactly once, in its partition."""
    back = read_back(root)
    assert back.num_rows == t.num_rows
    got = sorted(
        zip(
            back.column("id").to_pylist(),
            back.column("day").cast(pa.string()).to_pylist(),
            back.column("region").cast(pa.string()).to_pylist(),
            strict=True,
        )
    )
    want = sorted(
        zip(t["id"].to_pylist(), t["day"].to_pylist(), t["region"].to_pylist(), strict=True)
    )
    assert got == want


@pytest.mark.parametrize("batch_format", ["pyarrow", "pandas"])
def test_a_partitioned_write_has_every_row_once(local_ray, tmp_path, batch_format):
    t = table()
    ds = dataset(t, 4).map_batches(lambda b: b, batch_format=batch_format)
    # a write call per block (by default small blocks are gathered into one)
    sink = CommitDatasink(tmp_path / "out", partition_cols=["day", "region"], min_rows_per_write=1)
    ds.write_datasink(sink)
    out = tmp_path / "out"
    assert_exact(out, t)
    assert (out / "_SUCCESS").exists()
    assert not [p for p in out.rglob("*") if "_temporary" in p.parts or "__magic" in p.parts]
    dirs = {p.parent.relative_to(out).as_posix() for p in data_files(out)}
    assert dirs == {f"day=d{d}/region={r}" for d in range(3) for r in ("eu", "us")}
    assert sink.result is not None
    assert (sink.result.rows, sink.result.partitions) == (t.num_rows, 6)
    assert sink.result.files == len(data_files(out))
    assert sink.result.run.attempts == 4


def test_the_coordinator_outlives_a_write_for_the_next_one(local_ray, tmp_path):
    """The driver keeps its coordinator: an actor no handle names is torn down, and a write
    that came just after another was given the dying actor by name (ActorDiedError)."""
    import gc
    import time

    t = table()
    sink = CommitDatasink(tmp_path / "a", partition_cols=["day"])
    dataset(t, 2).write_datasink(sink)
    name = f"dataferry-commit-coordinator-{ray.get_runtime_context().get_job_id()}"
    del sink
    gc.collect()
    time.sleep(1.0)  # time for Ray to destroy an actor nothing refers to
    alive = ray.get_actor(name)  # raises ValueError if it was destroyed
    assert ray.get(alive.finish_job.remote("no such job")).committed == {}
    again = CommitDatasink(tmp_path / "b", partition_cols=["day"])
    dataset(t, 2).write_datasink(again)
    assert_exact(tmp_path / "b", t)


def test_a_write_after_ray_is_shut_down_and_started_again_gets_a_new_coordinator(
    local_ray, tmp_path
):
    """A new cluster in the same process numbers its jobs from 01000000 again: the driver
    must not hand it the old cluster's coordinator (using that handle aborts the process)."""
    t = table(1_000)
    dataset(t, 2).write_datasink(CommitDatasink(tmp_path / "a", partition_cols=["day"]))
    ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    dataset(t, 2).write_datasink(CommitDatasink(tmp_path / "b", partition_cols=["day"]))
    assert_exact(tmp_path / "b", t)


def test_min_rows_per_write_gives_fewer_larger_writes(local_ray, tmp_path):
    """Blocks are gathered into write calls (by size by default, by rows when asked):
    without it, every small block would make a file per partition and a task of its own,
    which made Ray writes slower than one process."""
    t = table()
    plain = CommitDatasink(tmp_path / "plain", partition_cols=["day"], min_rows_per_write=1)
    dataset(t, 8).write_datasink(plain)
    by_size = CommitDatasink(tmp_path / "by_size", partition_cols=["day"])
    assert by_size.min_bytes_per_write and by_size.min_bytes_per_write > t.nbytes
    dataset(t, 8).write_datasink(by_size)
    assert by_size.result.run.attempts == 1  # the default: the small blocks in one call
    assert len(data_files(tmp_path / "by_size")) == 3
    bundled = CommitDatasink(
        tmp_path / "bundled", partition_cols=["day"], min_rows_per_write=t.num_rows
    )
    assert bundled.min_rows_per_write == t.num_rows  # what Ray Data reads
    dataset(t, 8).write_datasink(bundled)
    for name in ("plain", "bundled", "by_size"):
        assert_exact(tmp_path / name, t)
    # one write call per block: a file per partition per block
    assert plain.result.run.attempts == 8
    assert len(data_files(tmp_path / "plain")) == 8 * 3
    # one write call for all eight blocks, streamed through one writer: a file per partition
    assert bundled.result.run.attempts == 1
    assert len(data_files(tmp_path / "bundled")) == 3
    # both writes went through the driver's one coordinator, which forgot each at its end
    assert open_jobs() == []


def test_parquet_options_reach_the_files(local_ray, tmp_path):
    t = table()
    sink = CommitDatasink(
        tmp_path / "out",
        partition_by=["day"],
        compression="zstd",
        row_group_size=500,
        max_rows_per_file=1_000,
    )
    dataset(t, 2).write_datasink(sink)
    assert_exact(tmp_path / "out", t)
    files = data_files(tmp_path / "out")
    assert files
    for f in files:
        meta = pq.ParquetFile(f).metadata
        assert meta.num_rows <= 1_000
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            assert group.num_rows <= 500
            assert {group.column(c).compression for c in range(group.num_columns)} == {"ZSTD"}
    assert max(pq.ParquetFile(f).metadata.num_row_groups for f in files) == 2


def _fsspec_dir(root):
    from fsspec.implementations.dirfs import DirFileSystem
    from fsspec.implementations.local import LocalFileSystem

    return DirFileSystem(path=str(root), fs=LocalFileSystem())


def _arrow_subtree(root):
    return pafs.SubTreeFileSystem(str(root), pafs.LocalFileSystem())


@pytest.mark.parametrize("make_fs", [_arrow_subtree, _fsspec_dir], ids=["pyarrow", "fsspec"])
def test_a_filesystem_object_is_written_through(local_ray, tmp_path, monkeypatch, make_fs):
    # the path is relative to the file system's root: were the file system ignored, the
    # files would land under the (empty) working directory instead
    (tmp_path / "root").mkdir()
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    t = table(3_000)
    sink = CommitDatasink("out", partition_cols=["day"], filesystem=make_fs(tmp_path / "root"))
    dataset(t, 2).write_datasink(sink, ray_remote_args=RETRY)
    assert_exact(tmp_path / "root" / "out", t)
    assert list((tmp_path / "cwd").iterdir()) == []


@pytest.mark.parametrize(
    ("committer", "when"),
    [
        ("manifest", "after_write"),
        ("direct", "after_write"),
        ("manifest", "during_commit"),
        ("manifest", "exit_after_authorised"),
        ("direct", "exit_after_authorised"),
        ("manifest", "exit_after_commit"),
    ],
)
def test_a_task_that_dies_once_is_retried_and_output_is_exact(local_ray, tmp_path, committer, when):
    t = table()
    sink = CommitDatasink(
        tmp_path / "out", partition_cols=["day"], committer=committer, min_rows_per_write=1
    )
    _inject_failures(sink, [(1, 0, when)])
    dataset(t, 4).write_datasink(sink, ray_remote_args=RETRY)
    out = tmp_path / "out"
    assert_exact(out, t)
    assert (out / "_SUCCESS").exists()
    assert not (out / "_temporary").exists()
    assert sink.result.committer == committer
    run = sink.result.run
    if when == "exit_after_commit":
        # the task committed before its process died: Ray's rerun found nothing left to do
        assert (run.attempts, run.failed_attempts) == (4, 0)
        assert sink.result.stats["skipped_attempts"] == 1
    else:
        # the death happened, and Ray's retry was the task's second attempt
        assert (run.attempts, run.failed_attempts) == (5, 1)
        assert sink.result.stats["skipped_attempts"] == 0


def test_a_task_that_exhausts_its_retries_leaves_nothing(local_ray, tmp_path):
    sink = CommitDatasink(tmp_path / "out", partition_cols=["day"])
    _inject_failures(sink, [AttemptFailure(0, a, "after_write") for a in range(5)])
    with pytest.raises(Exception, match="injected death"):
        dataset(table(1_000), 2).write_datasink(
            sink, ray_remote_args={"max_retries": 1, "retry_exceptions": True}
        )
    # the dead attempts left their files behind; the job's abort removed them all
    leftovers = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert leftovers == []
    assert sink.result is None
    assert open_jobs() == []


def test_bad_options_fail_on_the_driver_and_the_fault_hook_is_not_public(tmp_path):
    assert "failures" not in inspect.signature(CommitDatasink).parameters
    with pytest.raises(ConfigError, match="failures"):
        CommitDatasink(tmp_path / "out", failures=[AttemptFailure(0)])
    with pytest.raises(ConfigError, match="not both"):
        CommitDatasink(tmp_path / "out", partition_cols=["a"], partition_by=["a"])
    with pytest.raises(ConfigError, match="min_rows_per_write"):
        CommitDatasink(tmp_path / "out", min_rows_per_write=0)
    with pytest.raises(ConfigError, match="compression"):
        CommitDatasink(tmp_path / "out", compression="nope")


def test_rays_reader_sees_the_earlier_rows_during_a_job_and_all_rows_after_it(local_ray, tmp_path):
    """Ray's reader beside the others of tests/dataset/test_readers.py (here, where Ray runs)."""
    from tests.dataset.test_readers import EARLIER, NEW, earlier

    dest, frozen = tmp_path / "out", tmp_path / "frozen"
    earlier(dest)

    def on_event(event: str, task: int, attempt: int) -> None:
        if event == "job_commit_started":  # what a driver killed here leaves
            shutil.copytree(dest, frozen)

    write_dataset(NEW, dest, partition_by=["day"], mode="append", on_event=on_event)
    assert ray.data.read_parquet(str(frozen)).count() == EARLIER.num_rows
    assert ray.data.read_parquet(str(dest)).count() == EARLIER.num_rows + NEW.num_rows
