"""Job-level atomicity of `write_dataset`, with real driver processes.

A. A driver SIGKILLed in the middle of its job commit (the renames into the destination, or
   the creation of its directories), then `dataferry cleanup DEST --older-than 0` as a user
   runs it: the destination is either complete (`_SUCCESS` and exactly the input rows) or holds
   nothing of the job (no visible file or directory, no `_temporary`, no Hive staging).
B. Two drivers racing into one destination: with mode="error" exactly one commits and the
   other fails naming the cause; with mode="overwrite" the destination ends up holding exactly
   one job's rows.
C. An overwrite job whose driver dies before its job commit (while tasks write, or once they
   have committed) keeps, after `dataferry cleanup`, the data set that was there before; one that
   dies at its first rename into the destination leaves the old data set intact or the new one
   complete, never an empty or mixed table.

Each driver is a child process (`atomicity_child.py`) that kills itself with SIGKILL at a
chosen store operation, so the kill lands at a known point of a real job.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
import pytest

import dataferry
from dataferry.errors import DestinationError

from .atomicity_child import make_table

CHILD = Path(__file__).with_name("atomicity_child.py")
CHILD_TIMEOUT_S = 60
ROWS, PARTS, TASKS = 2_000, 40, 8  # 8 tasks x 40 partitions = 320 files to rename
FILES = TASKS * PARTS

Row = tuple[int, str, int]


# --- helpers ------------------------------------------------------------------------------------


def dataferry_cli() -> list[str]:
    """The `dataferry` console script of this environment (pyproject: dataferry.cli:main)."""
    script = Path(sys.executable).with_name("dataferry")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "dataferry.cli"]


def run_child(spec: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHILD), json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )


def start_child(spec: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), json.dumps(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"driver process did not finish in {CHILD_TIMEOUT_S}s; stderr:\n{err}")
    return proc.returncode, err


def cleanup(dest: Path, *age: str) -> str:
    """`dataferry cleanup DEST --older-than 0`, as a user runs it after a dead job (`age`:
    the age options given; none: the user trusts cleanup to know a dead driver)."""
    age = age or ("--older-than", "0")
    done = subprocess.run(
        [*dataferry_cli(), "cleanup", str(dest), *age],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    assert done.returncode == 0, (
        f"`dataferry cleanup {dest} {' '.join(age)}` failed ({done.returncode}):\n"
        f"{done.stdout}\n{done.stderr}\ndestination:\n{listing(dest)}"
    )
    return done.stdout


def job_spec(dest: Path, tmp: Path, label: str, **extra: Any) -> dict[str, Any]:
    spec = {
        "dest": str(dest),
        "committer": "manifest",
        "mode": "error",
        "rows": ROWS,
        "parts": PARTS,
        "tasks": TASKS,
        "label": label,
        "offset": 0,
        "result": str(tmp / f"result-{label}.json"),
    }
    spec.update(extra)
    return spec


def is_visible(rel: str) -> bool:
    return not any(part.startswith(("_", ".")) for part in Path(rel).parts)


def entries(dest: Path) -> list[str]:
    """Every file and directory below dest, relative, directories ending in '/'."""
    if not dest.exists():
        return []
    out = []
    for root, dirs, files in os.walk(dest):
        base = Path(root).relative_to(dest)
        out += [f"{(base / d).as_posix()}/" for d in dirs]
        out += [(base / f).as_posix() for f in files]
    return sorted(out)


def listing(dest: Path, limit: int = 40) -> str:
    items = entries(dest)
    if not dest.exists():
        return "  (the destination does not exist)"
    if not items:
        return "  (empty directory)"
    shown = "\n".join(f"  {e}" for e in items[:limit])
    more = f"\n  ... and {len(items) - limit} more" if len(items) > limit else ""
    return f"{len(items)} entries:\n{shown}{more}"


def rows_of(table: pa.Table) -> list[Row]:
    columns = (table[name].to_pylist() for name in ("i", "job", "p"))
    return sorted((int(i), str(j), int(p)) for i, j, p in zip(*columns, strict=True))


def read_rows(dest: Path) -> list[Row]:
    """The rows a reader sees (pyarrow, hive partitioning; hidden files are ignored)."""
    if not dest.exists():
        return []
    table = pads.dataset(str(dest), partitioning="hive").to_table()
    return rows_of(table) if table.num_rows else []


def describe_rows(rows: list[Row]) -> str:
    by_job: dict[str, int] = {}
    for _, job, _ in rows:
        by_job[job] = by_job.get(job, 0) + 1
    return f"{len(rows)} rows " + (str(dict(sorted(by_job.items()))) if by_job else "")


def destination_state(dest: Path, expected: list[Row]) -> tuple[str, str]:
    """('complete' | 'nothing' | 'other', a description naming what is there)."""
    items = entries(dest)
    visible = [e for e in items if is_visible(e)]
    leftovers = [
        e
        for e in items
        if e.split("/", 1)[0] == "_temporary" or e.split("/", 1)[0].startswith(".hive-staging")
    ]
    success = (dest / "_SUCCESS").is_file()
    try:
        rows = read_rows(dest)
        read = describe_rows(rows)
    except Exception as e:  # a reader that cannot read it is a finding too
        rows, read = None, f"unreadable: {type(e).__name__}: {e}"
    what = (
        f"_SUCCESS {'present' if success else 'absent'}; "
        f"{len([e for e in visible if not e.endswith('/')])} visible files, "
        f"{len([e for e in visible if e.endswith('/')])} visible directories; "
        f"reader sees {read} (expected {describe_rows(expected)}); destination {listing(dest)}"
    )
    if success and rows == expected:
        return "complete", what
    if not visible and not leftovers:
        return "nothing", what
    return "other", what


# --- A: driver killed during job commit, then recovery -----------------------------------------

# (committer, mode, store operation, N, rerun committer): kill the driver right after the N-th
# operation of that kind whose target is a data path of the destination
KILLS = [
    pytest.param("manifest", "error", "rename", 1, id="manifest-after-1st-rename"),
    pytest.param("manifest", "error", "rename", FILES // 2, id="manifest-after-half-renames"),
    pytest.param("manifest", "error", "rename", FILES - 1, id="manifest-before-last-rename"),
    pytest.param("manifest", "error", "mkdirs", 1, id="manifest-after-1st-mkdirs"),
    pytest.param("manifest", "error", "mkdirs", PARTS // 2, id="manifest-after-half-mkdirs"),
    # a Hive load moves the 40 staged partitions into the table (directory renames here)
    pytest.param("hive", "append", "rename", 1, id="hive-append-after-1st-move"),
    pytest.param("hive", "append", "rename", PARTS // 2, id="hive-append-after-half-moves"),
    pytest.param("hive", "overwrite", "rename", PARTS - 1, id="hive-overwrite-before-last-move"),
]


@pytest.mark.timeout(150)
@pytest.mark.parametrize("committer, mode, op, n", KILLS)
def test_killed_job_commit_is_complete_or_absent_after_cleanup(tmp_path, committer, mode, op, n):
    dest = tmp_path / "table"
    expected = rows_of(make_table("a", ROWS, PARTS))
    spec = job_spec(
        dest,
        tmp_path,
        "a",
        committer=committer,
        mode=mode,
        kill={"op": op, "n": n, "when": "after", "visible": True},
    )
    child = run_child(spec)
    assert child.returncode in (-9, 0), (
        f"the driver neither committed nor was killed (exit {child.returncode}):\n{child.stderr}"
    )
    killed = "killed" if child.returncode == -9 else "not killed (the kill point never came)"
    at_kill = listing(dest)

    cleanup(dest)
    state, what = destination_state(dest, expected)
    assert state in ("complete", "nothing"), (
        f"after the driver was {killed} at {op} #{n} of a {committer} job commit and "
        f"`dataferry cleanup` ran, the destination is neither complete nor free of the job: "
        f"{what}\n(at the kill: {at_kill})"
    )

    # a user's next write with mode="error" (hive takes no mode "error": rerun with manifest)
    rerun = make_table("rerun", 400, PARTS, offset=100_000)
    kwargs = dict(partition_by=["p"], committer="manifest", mode="error", tasks=2)
    if state == "complete":
        with pytest.raises(DestinationError):
            dataferry.write_dataset(rerun, str(dest), **kwargs)
        assert read_rows(dest) == expected, "a refused rerun changed the committed data set"
    else:
        dataferry.write_dataset(rerun, str(dest), **kwargs)
        assert read_rows(dest) == rows_of(rerun), (
            f"a rerun into the cleaned destination did not read back as written: "
            f"{destination_state(dest, rows_of(rerun))[1]}"
        )


# --- B: two drivers racing into one destination ------------------------------------------------


def race(tmp_path: Path, dest: Path, mode: str) -> dict[str, dict[str, Any]]:
    """Run jobs "a" and "b" at once (a file barrier before they start and another before their
    job commits; a slowed store so the commits overlap); returns each one's outcome."""
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    procs = {}
    for me, other, offset in (("a", "b", 0), ("b", "a", 10_000)):
        spec = job_spec(
            dest,
            tmp_path,
            me,
            committer="auto",
            mode=mode,
            offset=offset,
            sim=["hdfs-loaded", 0.2],
            barrier={"dir": str(barrier), "me": me, "other": other},
        )
        procs[me] = (start_child(spec), spec)
    out = {}
    for me, (proc, spec) in procs.items():
        rc, err = finish(proc)
        result_file = Path(spec["result"])
        result = json.loads(result_file.read_text()) if result_file.exists() else {}
        table = make_table(me, ROWS, PARTS, spec["offset"])
        out[me] = {"rc": rc, "stderr": err, "rows": rows_of(table), **result}
    return out


def outcome(jobs: dict[str, dict[str, Any]], rows: list[Row], dest: Path) -> str:
    said = "; ".join(
        f"job {k}: exit {v['rc']}"
        + (f" ({v.get('error_type')}: {v.get('message')})" if v["rc"] else "")
        for k, v in jobs.items()
    )
    return f"{said}; destination holds {describe_rows(rows)}: {listing(dest, 12)}"


@pytest.mark.timeout(150)
@pytest.mark.parametrize("run", range(3))
def test_racing_error_mode_jobs_exactly_one_commits(tmp_path, run):
    dest = tmp_path / "table"
    jobs = race(tmp_path, dest, "error")
    rows = read_rows(dest)
    what = outcome(jobs, rows, dest)
    winners = [k for k, v in jobs.items() if v["rc"] == 0]
    assert len(winners) == 1, f"expected exactly one job to commit, {len(winners)} did: {what}"
    (winner,) = winners
    (loser,) = set(jobs) - {winner}
    lost = jobs[loser]
    assert rows == jobs[winner]["rows"], (
        f"destination does not hold exactly the winner's (job {winner}'s) rows: {what}"
    )
    assert lost.get("ok") is False, f"the losing driver did not fail cleanly: {lost['stderr']}"
    message = str(lost.get("message", ""))
    reasons = [
        "not empty",
        "claim",
        jobs[winner].get("job_id") or "?",
        jobs[winner].get("job_uuid") or "?",
    ]
    assert any(r.lower() in message.lower() for r in reasons), (
        f"the loser's error names neither the other job nor a non-empty/claimed destination: {what}"
    )


@pytest.mark.timeout(150)
@pytest.mark.parametrize("run", range(3))
def test_racing_overwrite_jobs_leave_exactly_one_data_set(tmp_path, run):
    dest = tmp_path / "table"
    old = make_table("old", 400, PARTS, offset=50_000)
    dataferry.write_dataset(old, str(dest), partition_by=["p"], committer="manifest", tasks=2)
    assert read_rows(dest) == rows_of(old)

    jobs = race(tmp_path, dest, "overwrite")
    rows = read_rows(dest)
    what = outcome(jobs, rows, dest)
    assert any(v["rc"] == 0 for v in jobs.values()), f"neither overwrite committed: {what}"
    holders = [k for k, v in jobs.items() if rows == v["rows"]]
    assert holders, f"destination holds neither exactly job a's nor exactly job b's rows: {what}"
    assert jobs[holders[0]]["rc"] == 0, f"the rows are those of a job that failed: {what}"


# --- C: a failed overwrite keeps the data that was there ---------------------------------------


def overwrite_killed(tmp_path: Path, **kill: Any) -> tuple[Path, list[Row], list[Row], str]:
    """Commit an old data set, then run an overwrite driver that is SIGKILLed as `kill` says,
    then `dataferry cleanup`. Returns (dest, old rows, new job's rows, listing at the kill)."""
    dest = tmp_path / "table"
    old = make_table("old", 400, PARTS, offset=50_000)
    dataferry.write_dataset(old, str(dest), partition_by=["p"], committer="manifest", tasks=2)
    before = read_rows(dest)
    assert before == rows_of(old)

    child = run_child(job_spec(dest, tmp_path, "new", mode="overwrite", **kill))
    assert child.returncode == -9, (
        f"the overwrite driver was not killed at {kill} (exit {child.returncode}):\n{child.stderr}"
    )
    at_kill = listing(dest)
    cleanup(dest)
    return dest, before, rows_of(make_table("new", ROWS, PARTS)), at_kill


@pytest.mark.timeout(150)
@pytest.mark.parametrize(
    "kill",
    [
        pytest.param(
            {"kill": {"op": "write", "n": 20, "when": "before", "visible": False}},
            id="killed-while-tasks-write",
        ),
        pytest.param({"kill_before_job_commit": True}, id="killed-just-before-job-commit"),
    ],
)
def test_overwrite_killed_before_job_commit_keeps_existing_data_set(tmp_path, kill):
    dest, before, _, at_kill = overwrite_killed(tmp_path, **kill)
    rows = read_rows(dest)
    assert rows == before, (
        f"after an overwrite job died before its job commit ({kill}) and `dataferry cleanup` "
        f"ran, the old data set is not intact: reader sees {describe_rows(rows)}, expected "
        f"{describe_rows(before)}; destination {listing(dest)}\n(at the kill: {at_kill})"
    )


@pytest.mark.timeout(150)
def test_overwrite_killed_at_first_rename_into_destination_loses_nothing(tmp_path):
    """Killed right before its job commit's first rename into the destination: the commit may
    already be decided (then recovery finishes it: the new data set, complete) or not (then the
    old one, intact); never neither, a mix, or an empty table."""
    kill = {"op": "rename", "n": 1, "when": "before", "visible": True}
    dest, before, new, at_kill = overwrite_killed(tmp_path, kill=kill)
    rows = read_rows(dest)
    complete_new = rows == new and (dest / "_SUCCESS").is_file()
    assert rows == before or complete_new, (
        f"after an overwrite job died at its first rename into the destination and `dataferry "
        f"cleanup` ran, the destination holds neither the old data set intact nor the new one "
        f"complete: reader sees {describe_rows(rows)} (old: {describe_rows(before)}, new: "
        f"{describe_rows(new)}); destination {listing(dest)}\n(at the kill: {at_kill})"
    )


def test_harness_a_job_not_killed_commits_and_reads_back(tmp_path):
    """The helper's own contract: a job that is not killed commits, and cleanup finds it
    complete (guards the harness, so the tests above fail for the product's reasons)."""
    dest = tmp_path / "table"
    child = run_child(job_spec(dest, tmp_path, "a", rows=200, tasks=2))
    assert child.returncode == 0, child.stderr
    cleanup(dest)
    state, what = destination_state(dest, rows_of(make_table("a", 200, PARTS)))
    assert state == "complete", what
    shutil.rmtree(dest)
    assert destination_state(dest, [])[0] == "nothing"


@pytest.mark.timeout(150)
@pytest.mark.parametrize(
    ("kill", "committed"),
    [
        pytest.param(
            {"kill": {"op": "write", "n": 20, "when": "before", "visible": False}},
            False,
            id="killed-while-tasks-write",
        ),
        pytest.param({"kill_before_job_commit": True}, False, id="killed-before-job-commit"),
        pytest.param(
            {"kill": {"op": "rename", "n": 5, "when": "after", "visible": True}},
            True,
            id="killed-mid-job-commit",
        ),
    ],
)
def test_cleanup_acts_at_once_on_a_freshly_killed_driver(tmp_path, kill, committed):
    """No --older-than: the job's driver record says its process is gone, so cleanup rolls
    it back (or forward, past its intent record) at once and removes all it left."""
    dest = tmp_path / "table"
    old = make_table("old", 400, PARTS, offset=50_000)
    dataferry.write_dataset(old, str(dest), partition_by=["p"], committer="manifest", tasks=2)
    child = run_child(job_spec(dest, tmp_path, "new", mode="append", **kill))
    assert child.returncode == -9, f"not killed at {kill}:\n{child.stderr}"
    out = cleanup(dest, "--json")
    assert not (dest / "_temporary").exists() and not (dest / "_dataferry").exists(), out + listing(
        dest
    )
    new = rows_of(make_table("new", ROWS, PARTS))
    expected = sorted(rows_of(old) + new) if committed else rows_of(old)
    assert sorted(read_rows(dest)) == expected, out
