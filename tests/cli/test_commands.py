"""The commands through click's test runner: what they print and how they exit."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from dataferry.cli import app

runner = CliRunner()


def test_help_lists_commands():
    out = runner.invoke(app, ["--help"]).output
    for cmd in ("demo", "success", "verify"):
        assert cmd in out


def test_demo_json_and_success(tmp_path):
    dest = str(tmp_path / "demo")
    res = runner.invoke(app, ["demo", "--dest", dest, "--rows", "20000", "--tasks", "6", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["rows_written"] == data["rows_read"] == 20000
    assert data["failed_attempts"] == 1 and data["speculative_attempts"] == 1
    # the tour: v1 and manifest on the loaded NameNode's model, a pulled and a pushed shuffle
    tour = {r["committer"]: r for r in data["commit_tour"]}
    assert set(tour) == {"v1", "manifest"} and tour["v1"]["files"] == tour["manifest"]["files"]
    shuffle = {r["method"]: r for r in data["shuffle_tour"]}
    assert shuffle["pull"]["rows"] == shuffle["push"]["rows"] == 8 * 60_000
    assert shuffle["push"]["merged_partitions"] == 16
    # one host: every pushed block is merged by reference and still read from its map output,
    # so the tour must not show push reading less than pull (it once did, counting stubs only)
    push = shuffle["push"]
    assert push["by_reference"] > 0
    assert push["reduce_reads"] >= shuffle["pull"]["reduce_reads"]
    assert push["reduce_reads"] >= push["merged_reads"] + push["by_reference"]
    res = runner.invoke(app, ["success", dest])
    assert res.exit_code == 0 and "_SUCCESS" in res.output


def test_demo_into_a_dest_says_the_output_stays_there(tmp_path):
    """A demo given --dest leaves its output there; saying "temporary output removed" (as it
    did) tells the user their data is gone when it is not."""
    dest = tmp_path / "demo"
    args = ["demo", "--dest", str(dest), "--rows", "2000", "--tasks", "2", "--no-tour", "--quiet"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "output stays in" in res.output and str(dest) in res.output.replace("\n", "")
    assert "\ntemporary output removed" not in "\n" + res.output
    assert (dest / "_SUCCESS").exists()


def test_success_errors_are_one_line(tmp_path):
    res = runner.invoke(app, ["success", str(tmp_path / "missing")])
    assert res.exit_code == 1 and res.output.startswith("error:")
    assert len(res.output.splitlines()) == 1


def test_verify_crash_exit_codes(monkeypatch):
    """Exit 0 without a violation, 1 with one, and a one-line error for an unknown committer.
    The command's exit code is the point here, so each run is cut to its first crash points
    (every crash point of v1 and v2 is refereed in tests/verify/test_crash.py)."""
    from dataferry.verify import crash

    real = crash.verify_crash
    monkeypatch.setattr(
        crash,
        "verify_crash",
        lambda committer, store=None, **kw: real(committer, store, **kw, limit=6),
    )
    ok = runner.invoke(
        app, ["verify", "crash", "--committer", "v1", "--store", "sim:hdfs", "--json"]
    )
    assert ok.exit_code == 0 and json.loads(ok.stdout)["total_violations"] == 0
    bad = runner.invoke(
        app, ["verify", "crash", "--committer", "v2", "--store", "sim:hdfs", "--json"]
    )
    assert bad.exit_code == 1 and json.loads(bad.stdout)["total_violations"] > 0
    unknown = runner.invoke(app, ["verify", "crash", "--committer", "nope"])
    assert unknown.exit_code == 1 and "unknown committer" in unknown.output


def test_manifest_command_shows_task_manifests(tmp_path):
    from dataferry import make_committer

    c = make_committer("manifest", str(tmp_path / "out"))
    job = c.new_job()
    c.setup_job(job)
    t = job.task(0)
    c.setup_task(t)
    c.write_file(t, "p=1/a.parquet", b"123")
    c.commit_task(t)
    manifests = tmp_path / "out" / "_temporary" / job.job_uuid / "00" / "manifests"
    res = runner.invoke(app, ["manifest", str(manifests), "--json"])
    assert res.exit_code == 0, res.output
    (entry,) = json.loads(res.stdout)
    assert entry["taskAttemptID"] == str(t.attempt_id) and entry["files"] == 1
    assert entry["entries"][0]["d"].endswith("/p=1/a.parquet")
    bad = tmp_path / "bad-manifest.json"
    bad.write_text('{"type": "nope"}')
    res = runner.invoke(app, ["manifest", str(bad)])
    assert res.exit_code == 1 and "wrong type" in res.output


def test_bench_commit_json():
    res = runner.invoke(
        app,
        [
            "bench",
            "commit",
            "--committers",
            "v1,manifest",
            "--files",
            "40",
            "--tasks",
            "2",
            "--partitions",
            "2",
            "--store",
            "sim:hdfs",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert [r["committer"] for r in data["results"]] == ["v1", "manifest"]
    for r in data["results"]:
        assert {"committer", "job_commit_s", "task_commit_s", "ops", "limit_s"} <= set(r)


def test_bench_shuffle_json_on_the_embedded_engine():
    res = runner.invoke(
        app,
        [
            "bench",
            "shuffle",
            "--size",
            "4MiB",
            "--maps",
            "4",
            "--reduces",
            "6",
            "--engine",
            "local",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    by = {r["method"]: r for r in data["results"]}
    assert set(by) == {"pull", "push"} and data["disk_mb_s"] > 0
    assert by["pull"]["reduce_reads"] == 4 * 6
    assert by["push"]["merged_partitions"] == 6
    # one host: merged by reference, each block still read from its map output
    assert by["push"]["reduce_reads"] == 6 + 4 * 6
    for r in data["results"]:
        assert {"method", "wall_s", "mb_s", "reduce_reads", "avg_read_bytes"} <= set(r)
        assert r["rows"] == data["spec"]["rows"]


def test_bench_shuffle_refuses_a_bad_size():
    res = runner.invoke(app, ["bench", "shuffle", "--size", "lots"])
    assert res.exit_code == 1 and "size 'lots'" in res.output


def test_cleanup_finishes_a_dead_commit_and_exits_1_when_it_cannot(tmp_path):
    import pytest

    from dataferry import make_committer
    from dataferry.errors import InjectedCrash
    from dataferry.store import FaultRule, Op, fault_layer, open_store

    def dead_commit(dest, files):
        store = open_store(str(dest), faults=[])
        c = make_committer("manifest", store, io_threads=1)
        job = c.new_job()
        c.setup_job(job)
        t = job.task(0)
        c.setup_task(t)
        for f in files:
            c.write_file(t, f, b"data")
        msg = c.commit_task(t)
        fault_layer(store).add_rule(
            FaultRule(action="crash", when="after", kinds=frozenset({Op.RENAME}), times=1)
        )
        with pytest.raises(InjectedCrash):
            c.commit_job(job, [msg])
        fault_layer(store).armed = False
        return store, c.attempt_path(t, files[-1])  # where the last file was written

    store, _ = dead_commit(tmp_path / "ok", ["p=1/a", "p=1/b"])
    result = runner.invoke(app, ["cleanup", str(tmp_path / "ok"), "--older-than", "0", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rolled_forward"]
    assert sorted(s.path for s in store.walk("")) == ["_SUCCESS", "p=1/a", "p=1/b"]
    store, last = dead_commit(tmp_path / "lost", ["p=1/a", "p=1/b"])
    store.delete(last)  # a file the commit still has to move has vanished
    result = runner.invoke(app, ["cleanup", str(tmp_path / "lost"), "--older-than", "0"])
    assert result.exit_code == 1 and "LEFT IN PLACE" in result.output
    assert store.exists("_temporary") and not store.exists("_SUCCESS")


# --- the library's log: -v INFO, -vv DEBUG, nothing without ---------------------------------

LOG_LINE = r"^\d\d:\d\d:\d\d (INFO|DEBUG|WARNING) dataferry(\.\w+)*: "


def _dead_manifest_commit(dest) -> None:
    """A manifest job commit that died after its first rename (cleanup rolls it forward)."""
    import pytest

    from dataferry import make_committer
    from dataferry.errors import InjectedCrash
    from dataferry.store import FaultRule, Op, fault_layer, open_store

    store = open_store(str(dest), faults=[])
    c = make_committer("manifest", store, io_threads=1)
    job = c.new_job()
    c.setup_job(job)
    t = job.task(0)
    c.setup_task(t)
    c.write_file(t, "p=1/a", b"data")
    msg = c.commit_task(t)
    fault_layer(store).add_rule(
        FaultRule(action="crash", when="after", kinds=frozenset({Op.RENAME}), times=1)
    )
    with pytest.raises(InjectedCrash):
        c.commit_job(job, [msg])


def test_verbose_shows_the_librarys_info_lines_and_without_it_none(tmp_path):
    import logging
    import re

    _dead_manifest_commit(tmp_path / "loud")
    res = runner.invoke(app, ["-v", "cleanup", str(tmp_path / "loud"), "--older-than", "0"])
    assert res.exit_code == 0, res.output
    lines = [line for line in res.stderr.splitlines() if re.match(LOG_LINE, line)]
    assert any(" INFO dataferry.commit: " in line and " stage " in line for line in lines)
    assert not any(" DEBUG " in line for line in lines)  # -v is INFO; -vv adds DEBUG
    logger = logging.getLogger("dataferry")
    assert logger.level == logging.NOTSET  # the command is over: its handler went with it
    assert not [h for h in logger.handlers if h.get_name() == "dataferry-cli"]

    _dead_manifest_commit(tmp_path / "quiet")
    res = runner.invoke(app, ["cleanup", str(tmp_path / "quiet"), "--older-than", "0"])
    assert res.exit_code == 0, res.output
    assert not [line for line in res.stderr.splitlines() if re.match(LOG_LINE, line)]
    assert "cleanup of" in res.stdout  # the command's own report stays


def _serve_and_stop(tmp_path, *flags: str) -> str:
    """`dataferry [flags] shuffle serve` as a process: wait until it has announced itself,
    SIGTERM it, return its stderr."""
    import signal
    import subprocess
    import sys
    import time

    name = "".join(flags) or "quiet"
    port_file, err_file = tmp_path / f"port{name}", tmp_path / f"stderr{name}"
    command = [sys.executable, "-m", "dataferry.cli", *flags, "shuffle", "serve"]
    command += ["--dir", str(tmp_path / "node"), "--port-file", str(port_file)]
    with open(err_file, "w") as err:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists():  # written once up (SIGTERM handled since it started)
            assert proc.poll() is None and time.monotonic() < deadline, err_file.read_text()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return err_file.read_text()


def test_service_start_and_stop_are_logged_with_verbose(tmp_path):
    import re

    err = _serve_and_stop(tmp_path, "-v")
    logged = [line for line in err.splitlines() if re.match(LOG_LINE, line)]
    assert len(logged) == 2, err
    assert re.search(
        r"INFO dataferry\.shuffle: shuffle service listening on 127\.0\.0\.1:\d+ "
        r"\(plain, no TLS\)$",
        logged[0],
    ), err
    assert re.search(
        r"INFO dataferry\.shuffle: shuffle service on 127\.0\.0\.1:\d+ stopped$", logged[1]
    ), err
    err = _serve_and_stop(tmp_path, "-vv")
    assert re.search(
        r"DEBUG dataferry\.net: shuffle-loop: bound to 127\.0\.0\.1:\d+ \(plain\)", err
    )
    err = _serve_and_stop(tmp_path)
    assert not [line for line in err.splitlines() if re.match(LOG_LINE, line)], err
    assert "listening on" in err  # the command's own announcement stays


def test_the_library_prints_nothing_at_the_default_level(tmp_path):
    """A program that uses the library and configures no logging sees nothing from it, not
    even its warnings (they end in the NullHandler of the "dataferry" logger)."""
    import subprocess
    import sys

    program = f"""
import logging
import dataferry
from dataferry.shuffle import ShuffleService
from dataferry.stages import StageRun, stage
from dataferry.store import LocalStore

ShuffleService(LocalStore({str(tmp_path / "node")!r})).start().stop()
logging.getLogger("dataferry.commit").warning("a recovery decision")

@stage("s", "s")
def boom(run):
    raise ValueError("x")

try:
    boom(StageRun())
except ValueError:
    pass
"""
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and done.stdout == ""


def test_python_dash_m_dataferry_is_the_command():
    """`python -m dataferry --version` runs the command line (the way to reach it from a
    virtualenv whose scripts directory is not on PATH)."""
    import subprocess
    import sys

    import dataferry

    out = subprocess.run(
        [sys.executable, "-m", "dataferry", "--version"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith(dataferry.__version__)
