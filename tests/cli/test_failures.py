"""Bad command lines, run as real `dataferry` processes: each fails with exactly one line on
stderr (no traceback, no markup read, no wrapping), exit 1 for a runtime failure and 2 for
bad usage, and creates nothing on disk."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

BLOCKER = str(Path(__file__).parent / "blocked")  # its sitecustomize hides modules
LONG = "a-rather-long-directory-name-that-goes-on-" * 4  # > 80 columns on its own


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    code: int
    says: str  # a piece of the one line (names what is at fault)
    block: str = ""  # modules made impossible to import, as if not installed
    env: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        return " ".join(self.args)[:60] + (f" without {self.block}" if self.block else "")


NO_AWS = (
    ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials"),
    ("AWS_CONFIG_FILE", "/nonexistent/config"),
    ("AWS_EC2_METADATA_DISABLED", "true"),
)

CASES = [
    # records: what is not there, or not what it should be
    Case(("success", "missing"), 1, "missing: no such file or directory"),
    Case(("success", "/nonexistent/dest"), 1, "/nonexistent/dest: no such file or directory"),
    Case(("success", "notes.txt/x"), 1, "notes.txt/x: a part of this path is a file"),
    Case(("success", "out/[/]x"), 1, "out/[/]x"),
    Case(("success", "[bold red]x[/]"), 1, "[bold red]x[/]"),
    Case(("success", f"{LONG}/x"), 1, LONG),
    Case(("manifest", "missing"), 1, "missing: no such file or directory"),
    Case(("manifest", "data"), 1, "no task manifests"),
    Case(("catalog", "list", "missing.sqlite"), 1, "missing.sqlite: no such file"),
    Case(("catalog", "list", "[red]c[/].sqlite"), 1, "[red]c[/].sqlite"),
    Case(("catalog", "list", "notes.txt"), 1, "not a dataferry catalog"),
    Case(("catalog", "list", "data"), 1, "data: is a directory, not a file (catalog list"),
    Case(("catalog", "partitions", "notes.txt/c", "t"), 1, "notes.txt/c: a part of this path"),
    Case(("success", "data"), 1, "data/_SUCCESS: no such file (no job has committed"),
    Case(("catalog", "partitions", "missing.sqlite", "t"), 1, "no such file"),
    Case(("catalog", "partitions", "catalog.sqlite", "nope"), 1, "its tables: sales"),
    # operations
    Case(("cleanup", "missing"), 1, "missing: no such destination"),
    Case(("cleanup", "notes.txt"), 1, "notes.txt: is a file, not a directory (cleanup"),
    Case(("cleanup", "foo://bar"), 1, "unsupported store URL 'foo://bar'"),
    Case(("check-store", "notes.txt"), 1, "notes.txt: is a file, not a directory (check-store"),
    Case(("check-store", "notes.txt/x"), 1, "notes.txt/x: a part of this path is a file"),
    Case(("cleanup", "data", "--older-than", "soon"), 2, "'soon'"),  # bad usage
    Case(("uploads", "list", "data"), 1, "no multipart uploads"),
    Case(("uploads", "abort", "data"), 1, "no multipart uploads"),
    Case(("uploads", "list", "s3://bucket/prefix"), 1, "dataferry[s3]", block="boto3,botocore"),
    Case(("check-store", "s3://bucket/prefix"), 1, "credentials", env=NO_AWS),
    Case(("check-store", "gs://bucket/prefix"), 1, "gcsfs", block="gcsfs"),
    Case(("check-store", "s3://bucket/prefix"), 1, "dataferry[s3]", block="s3fs,boto3"),
    # services: refused before they start
    Case(("markers", "serve", "--dest", "data", "--port", "99999"), 2, "--port"),
    Case(("markers", "serve", "--dest", "data", "--host", "999.1.1.1"), 2, "999.1.1.1"),
    Case(("shuffle", "serve", "--dir", "data", "--port", "-1"), 2, "--port"),
    Case(("shuffle", "serve", "--dir", "data", "--port", "http"), 2, "--port"),
    Case(("shuffle", "serve", "--dir", "notes.txt"), 1, "--dir notes.txt: is a file, not a dir"),
    Case(("markers", "serve", "--dest", "notes.txt"), 1, "--dest notes.txt: is a file, not a"),
    # verify, bench, plan, demo
    Case(("verify", "crash", "--committer", "nope"), 1, "unknown committer 'nope'"),
    Case(
        ("verify", "crash", "--committer", "v1", "--store", "notes.txt"),
        1,
        "--store notes.txt: is a file",
    ),
    Case(("verify", "crash", "--committer", "v1", "--store", "foo://x"), 1, "URL 'foo://x'"),
    Case(("bench", "commit", "--store", "notes.txt"), 1, "--store notes.txt: is a file"),
    Case(("bench", "hive", "--store", "notes.txt"), 1, "--store notes.txt: is a file"),
    Case(("bench", "report", "--out", "notes.txt/r", "--quick"), 1, "--out notes.txt/r: a part"),
    Case(("bench", "commit", "--committers", "nope"), 1, "'nope'"),
    Case(("bench", "commit", "--s3-local"), 1, "dataferry[testserver]", block="moto"),
    Case(("bench", "shuffle", "--size", "lots"), 1, "'lots'"),
    Case(("bench", "hive", "--modes", "nope"), 1, "'nope'"),
    Case(("bench", "markers", "--store", "data"), 1, "sim:PROFILE"),
    Case(("bench", "write", "--stream", "1MiB", "--dask"), 1, "--dask"),
    Case(("plan", "commit", "--store", "nope"), 1, "'nope'"),
    Case(("demo", "--dest", "data"), 1, "--force"),
    Case(("demo", "--dest", "notes.txt/out"), 1, "--dest notes.txt/out: a part of this path"),
    Case(("demo", "--rows", "many"), 2, "--rows"),
    # usage
    Case(("nope",), 2, "No such command 'nope'"),
    Case(("--nope",), 2, "--nope"),
    Case(("success",), 2, "'path'"),
    Case(("manifest", "data", "--files", "-1"), 2, "--files"),
]


def populate(cwd: Path) -> None:
    """What the cases find in their working directory."""
    (cwd / "data").mkdir()
    (cwd / "data" / "part-0.parquet").write_bytes(b"not empty")
    (cwd / "notes.txt").write_text("a text file, not a SQLite database\n" * 40)
    db = sqlite3.connect(cwd / "catalog.sqlite")
    with db:
        db.executescript(
            "CREATE TABLE tables (name TEXT PRIMARY KEY, location TEXT, created REAL);"
            "CREATE TABLE partitions (table_name TEXT, spec TEXT, location TEXT, files INTEGER,"
            " bytes INTEGER, job_id TEXT, updated REAL, PRIMARY KEY (table_name, spec));"
            "INSERT INTO tables VALUES ('sales', 'file:///warehouse/sales', 0);"
        )
    db.close()


def listing(root: Path) -> dict[str, tuple[int, float] | None]:
    """Every directory under root, and every file with its size and modification time."""
    found: dict[str, tuple[int, float] | None] = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs:
            found[str(Path(dirpath, name).relative_to(root))] = None
        for name in files:
            st = Path(dirpath, name).stat()
            found[str(Path(dirpath, name).relative_to(root))] = (st.st_size, st.st_mtime)
    return found


def dataferry_env(case: Case, tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DATAFERRY_"))}
    env.update(case.env)
    env["TMPDIR"] = str(tmp)  # whatever a command puts in a temporary directory shows here
    env["COLUMNS"] = "80"
    if case.block:
        env["PYTHONPATH"] = os.pathsep.join([BLOCKER, env.get("PYTHONPATH", "")])
        env["DATAFERRY_TEST_BLOCK"] = case.block
    return env


@pytest.mark.parametrize("case", CASES, ids=str)
def test_a_bad_command_line_fails_in_one_line_and_leaves_nothing(case, tmp_path):
    cwd, tmp = tmp_path / "cwd", tmp_path / "tmp"
    cwd.mkdir()
    tmp.mkdir()
    populate(cwd)
    before = listing(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "dataferry.cli", *case.args],
        cwd=cwd,
        env=dataferry_env(case, tmp),
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = done.stderr.splitlines()
    assert "Traceback" not in done.stderr, done.stderr
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: "), lines[0]
    assert case.says in lines[0], lines[0]
    assert done.returncode == case.code, lines[0]
    assert listing(tmp_path) == before, "the command changed what is on disk"


def test_the_console_script_is_the_same_command():
    script = Path(sys.executable).with_name("dataferry")
    if not script.exists():
        pytest.skip("no dataferry console script beside this interpreter")
    done = subprocess.run(
        [str(script), "success", "missing"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1 and done.stderr.startswith("error: ")
    assert len(done.stderr.splitlines()) == 1
