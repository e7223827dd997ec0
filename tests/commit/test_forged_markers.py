"""Forged markers delete nothing: a marker is only a job's claim that it is writing a file, and
anyone who can write into a marker directory (or holds the marker service's token) can make
one. Every deleting path (the rollback of a made-up or dead job by `dataferry cleanup` and by
the next job, the stray files of a live job's commit) deletes a file only when its name carries
the job's own tag and no committed version references it.

Broken, each of these tests loses a user's committed table: the log (or the commit records)
still names the deleted files, and no reader can read the table any more."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dataferry
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.lookup import committer_by_name
from dataferry.markers.base import marker_name
from dataferry.markers.direct import BATCH_PREFIX
from dataferry.store import FaultRule, Op, open_store

pytest.importorskip("deltalake")
pytest.importorskip("pyiceberg")
pytest.importorskip("hudi")

# committer -> (its options, where its jobs' marker directories lie)
COMMITTERS = {
    "direct": ({}, "_dataferry/markers"),
    "delta": ({}, "_dataferry/delta-markers"),
    "iceberg": ({}, "_dataferry/iceberg-markers"),
    "hudi": ({"table_name": "t", "record_key": "x"}, ".hoodie/.temp"),
}


def rows(n: int, start: int = 0) -> pa.Table:
    return pa.table(
        {
            "x": pa.array(range(start, start + n), pa.int64()),
            "day": [f"2024-01-0{1 + i % 2}" for i in range(start, start + n)],
        }
    )


def write(name: str, dest, data: pa.Table, **kw):
    return dataferry.write_dataset(
        data,
        dest if not isinstance(dest, Path) else str(dest),
        partition_by=["day"],
        committer=name,
        committer_options=COMMITTERS[name][0],
        mode="append",
        **kw,
    )


def data_files(dest: Path) -> set[str]:
    """Every visible parquet file under the destination, by relative path."""
    return {
        p.relative_to(dest).as_posix()
        for p in dest.rglob("*.parquet")
        if not any(part.startswith((".", "_")) for part in p.relative_to(dest).parts)
    }


def read_xs(name: str, dest: Path) -> list[int]:
    """The committed rows' keys, read as the format's readers read them (the table committers'
    own reader; for `direct`, the files its commit records list)."""
    store = open_store(str(dest))
    if name == "direct":
        from dataferry.commit.direct.committer import list_committed

        files = [str(dest / f) for f in list_committed(store)]
        return sorted(x for f in files for x in pq.read_table(f).column("x").to_pylist())
    table = committer_by_name(name, store).read_rows()
    return sorted(table.column("x").to_pylist())


def forge(dest: Path, directory: str, targets: list[str], batch: bool = False) -> None:
    """Marker files naming `targets`, written straight into a marker directory; with `batch`,
    one batch file naming them all (as Delta's tasks announce theirs)."""
    names = [marker_name(*target.rpartition("/")[::2]) for target in targets]
    if batch:
        (dest / directory).mkdir(parents=True, exist_ok=True)
        text = "".join(f"{n}\n" for n in names)
        (dest / directory / f"{BATCH_PREFIX}{uuid.uuid4().hex}").write_text(text)
    for name in [] if batch else names:
        marker = dest / directory / name
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_bytes(b"")
    old = time.time() - 7200  # older than cleanup's hour: a dead job's leftovers
    for d, _, names in os.walk(dest / directory):
        for n in (*names, ""):
            os.utime(os.path.join(d, n), (old, old))


def made_up_job_dir(name: str) -> str:
    root = COMMITTERS[name][1]
    return f"{root}/20990101000000000" if name == "hudi" else f"{root}/{uuid.uuid4()}"


@pytest.mark.parametrize("name", sorted(COMMITTERS))
def test_cleanup_of_a_made_up_job_deletes_no_committed_file(tmp_path, name):
    dest = tmp_path / "t"
    write(name, dest, rows(6))
    committed = data_files(dest)
    forge(dest, made_up_job_dir(name), sorted(committed))

    report = cleanup_destination(open_store(str(dest)))

    assert data_files(dest) == committed, report
    assert read_xs(name, dest) == list(range(6))


@pytest.mark.parametrize("name", ["direct", "delta", "iceberg"])
def test_a_forged_batch_of_markers_deletes_no_committed_file(tmp_path, name):
    """A batch file (one file naming many markers, as Delta's tasks write theirs) is read by
    every committer's cleanup and by the next job: forged into a made-up job's directory it
    names committed files, and neither deletes one."""
    dest = tmp_path / "t"
    write(name, dest, rows(6))
    committed = data_files(dest)
    forge(dest, made_up_job_dir(name), sorted(committed), batch=True)

    report = cleanup_destination(open_store(str(dest)))
    assert data_files(dest) == committed, report
    forge(dest, made_up_job_dir(name), sorted(committed), batch=True)
    write(name, dest, rows(4, start=6))

    assert committed <= data_files(dest)
    assert read_xs(name, dest) == list(range(10))


@pytest.mark.parametrize("name", sorted(COMMITTERS))
def test_the_next_job_keeps_the_files_a_made_up_job_marks(tmp_path, name):
    """The next job cleans up dead jobs of the table before it starts (tables), or leaves
    them (direct): either way it deletes nothing committed."""
    dest = tmp_path / "t"
    write(name, dest, rows(6))
    committed = data_files(dest)
    forge(dest, made_up_job_dir(name), sorted(committed))

    write(name, dest, rows(4, start=6))

    assert committed <= data_files(dest)
    assert read_xs(name, dest) == list(range(10))


@pytest.mark.parametrize("name", ["direct", "delta", "iceberg"])
@pytest.mark.parametrize("named", ["the_job", "its_tag"])
def test_a_marker_directory_named_after_a_committed_job_deletes_nothing_it_committed(
    tmp_path, name, named
):
    """The tag alone is not enough: a forger can name a directory after the committed job
    whose files carry it, or after another uuid with the same first 8 characters (the tag);
    what a committed version references is kept."""
    dest = tmp_path / "t"
    seen: list[str] = []
    root = COMMITTERS[name][1]

    def job_dir(index, op, path) -> None:
        if path.startswith(root + "/") and path.count("/") == root.count("/") + 1:
            seen.append(path)

    rule = FaultRule(
        action="callback", kinds=frozenset({Op.WALK, Op.LIST}), times=-1, callback=job_dir
    )
    write(name, open_store(str(dest), faults=[rule]), rows(6))
    committed = data_files(dest)
    assert seen, "the job's marker directory was never listed"
    directory = seen[0]
    if named == "its_tag":
        directory = directory[: -len("0000-0000-0000-000000000000")] + "0000-0000-0000-000000000000"
        assert directory != seen[0]
    forge(dest, directory, sorted(committed))

    cleanup_destination(open_store(str(dest)))

    assert data_files(dest) == committed
    assert read_xs(name, dest) == list(range(6))


@pytest.mark.parametrize("name", sorted(COMMITTERS))
@pytest.mark.parametrize("moment", ["before_the_plan", "after_the_plan"])
def test_a_live_jobs_commit_with_a_forged_marker_commits_exactly_its_own_files(
    tmp_path, name, moment
):
    """Forged into the live job's own marker directory just before its commit lists its
    markers, or after it planned (the markers are read again as the job tidies up)."""
    dest = tmp_path / "t"
    write(name, dest, rows(6))
    committed = data_files(dest)
    root = COMMITTERS[name][1]

    def forge_once(index, op, path) -> None:
        if not forged:
            directory = path if moment == "before_the_plan" else path.rpartition("/")[0]
            forge(dest, directory, sorted(committed))
            forged.append(directory)

    forged: list[str] = []
    if moment == "before_the_plan":
        rule = FaultRule(
            action="callback",
            kinds=frozenset({Op.WALK, Op.LIST}),
            predicate=lambda i, op, path: (
                path.startswith(root + "/") and path.count("/") == root.count("/") + 1
            ),
            callback=forge_once,
        )
    else:
        rule = FaultRule(action="callback", path_glob="*_commit_intent.json", callback=forge_once)
    write(name, open_store(str(dest), faults=[rule]), rows(4, start=6))

    assert forged
    assert committed <= data_files(dest)
    assert read_xs(name, dest) == list(range(10))


def test_the_marker_service_refuses_a_marker_for_a_file_its_job_did_not_write(tmp_path):
    from dataferry.errors import DataferryError
    from dataferry.markers import MarkerClient, MarkerService, MarkerServiceConfig
    from dataferry.markers.base import marker_dir

    job = str(uuid.uuid4())
    with MarkerService(open_store(str(tmp_path)), MarkerServiceConfig(token="k")) as service:
        client = MarkerClient(service.url, "k")
        mine = f"day=a/part-0-{job[:8]}-t0-a0.parquet.marker.CREATE"
        assert client.create(marker_dir(job), mine)
        for forged in (
            "day=a/part-0-deadbeef-t0-a0.parquet.marker.CREATE",  # another job's file
            "day=a/part-0.parquet.marker.CREATE",  # a file no job of dataferry names so
        ):
            with pytest.raises(DataferryError, match="did not write"):
                client.create(marker_dir(job), forged)
        assert client.all(marker_dir(job)) == [mine]
