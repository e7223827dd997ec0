"""A job commit logs one INFO line per stage (with its seconds) on `dataferry.commit`, its
recovery decisions at WARNING, and nothing at all at the default level."""

from __future__ import annotations

import logging
import re
import subprocess
import sys

import pyarrow as pa

import dataferry

STAGE_LINE = re.compile(r"^job (\S+): stage (\w+): [0-9.]+ s")


def _table() -> pa.Table:
    return pa.table({"day": ["a", "b"] * 20, "x": list(range(40))})


def test_each_job_commit_stage_logs_one_info_line(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="dataferry"):
        result = dataferry.write_dataset(_table(), str(tmp_path / "out"), partition_by=["day"])
    lines = [r.getMessage() for r in caplog.records if r.name == "dataferry.commit"]
    stages = [m.group(2) for line in lines if (m := STAGE_LINE.match(line))]
    commit = result.commit if hasattr(result, "commit") else result.run.commit
    expected = [s for s in commit.stage_seconds if s != "total"]
    committed = [s for s in stages if s != "setup"]  # setup is the job's, before the commit
    assert sorted(committed) == sorted(expected)  # each commit stage once, none missing
    assert {"claim", "save_intent", "rename_files", "save_success", "cleanup"} <= set(stages)
    assert all(r.levelno == logging.INFO for r in caplog.records if r.name == "dataferry.commit")


def test_per_task_stages_stay_below_info(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="dataferry"):
        dataferry.write_dataset(_table(), str(tmp_path / "out"), partition_by=["day"])
    assert not [r for r in caplog.records if "task_stage" in r.getMessage()]
    assert not any(": stage scan_directory" in r.getMessage() for r in caplog.records)


def test_a_recovery_decision_is_a_warning(tmp_path, caplog):
    from dataferry.commit.job.recovery import recover_job

    committer = dataferry.make_committer("manifest", str(tmp_path / "out"))
    job = committer.new_job()
    committer.setup_job(job)
    with caplog.at_level(logging.WARNING, logger="dataferry"):
        assert recover_job(committer, job) == "rolled back"
    assert any(
        r.levelno == logging.WARNING and "rolled back" in r.getMessage() for r in caplog.records
    )


def test_nothing_is_printed_at_the_default_level(tmp_path):
    program = (
        "import pyarrow as pa, dataferry\n"
        "t = pa.table({'day': ['a', 'b'] * 5, 'x': list(range(10))})\n"
        f"dataferry.write_dataset(t, {str(tmp_path / 'out')!r}, partition_by=['day'])\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr == ""
