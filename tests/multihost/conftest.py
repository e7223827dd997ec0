"""One multi-host cluster, built once: four "hosts" in network namespaces on one bridge.

- `s3`: the S3 test server (moto in server mode) on its own address;
- `driver`: the Dask scheduler, and the job drivers (`driver.py`, run there per test);
- `w1`, `w2`: a Dask worker each (no nanny: killing a host's processes leaves nothing behind).

The pytest process is no host: it builds the namespaces, starts the processes in them and
reads what the drivers print. Everything is removed afterwards, failed tests included. Each
worker host has a temporary directory of its own under the cluster's: what a host killed with
kill -9 could not remove (its shuffle services' process directories) stays in the test's
directory, never in the machine's.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .netns import Lab, LabUnavailable

pytest.importorskip("distributed")
pytest.importorskip("moto")

ROLES = ("s3", "driver", "w1", "w2")
WORKERS = ("w1", "w2")
S3_PORT = 5000
SCHEDULER_PORT = 8786
START_TIMEOUT = 120.0
DRIVER = str(Path(__file__).with_name("driver.py"))


@dataclass
class Cluster:
    lab: Lab
    shared: Path
    env: dict[str, str]

    @property
    def scheduler(self) -> str:
        return f"tcp://{self.lab.hosts['driver'].address}:{SCHEDULER_PORT}"

    @property
    def s3_endpoint(self) -> str:
        return f"http://{self.lab.hosts['s3'].address}:{S3_PORT}"

    def address(self, role: str) -> str:
        return self.lab.hosts[role].address

    def log(self, name: str) -> Path:
        return self.shared / "logs" / f"{name}.log"

    def tmp(self, role: str) -> Path:
        """The host's temporary directory (its TMPDIR)."""
        return self.shared / "tmp" / role

    def start_worker(self, role: str) -> None:
        argv = [sys.executable, "-m", "distributed.cli.dask_worker", self.scheduler,
                "--host", self.address(role), "--nworkers", "1", "--nthreads", "2",
                "--no-nanny", "--no-dashboard", "--name", role,
                "--local-directory", str(self.shared / "workers" / role)]  # fmt: skip
        self.tmp(role).mkdir(parents=True, exist_ok=True)
        env = {**self.env, "TMPDIR": str(self.tmp(role))}
        self.lab.spawn(role, argv, str(self.log(role)), env)

    def driver(self, *args: str, timeout: float = 120.0, background: bool = False) -> Any:
        """Run `driver.py ARGS` on the driver host; its JSON answer (or the process when
        `background`, to be finished with `answer`)."""
        argv = [sys.executable, DRIVER, "--scheduler", self.scheduler,
                "--s3", self.s3_endpoint, *args]  # fmt: skip
        if background:
            ns = self.lab.hosts["driver"].ns
            return subprocess.Popen(
                ["ip", "netns", "exec", ns, *argv],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=self.env,
            )
        done = self.lab.run("driver", argv, timeout, self.env)
        return _answer(done.returncode, done.stdout, done.stderr)

    def answer(self, proc: subprocess.Popen[str], timeout: float = 120.0) -> Any:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"driver timed out: {err[-3000:]}") from None
        return _answer(proc.returncode, out, err)

    def tail(self) -> str:
        parts = []
        for log in sorted((self.shared / "logs").glob("*.log")):
            parts.append(f"--- {log.name}\n{log.read_text(errors='replace')[-1500:]}")
        return "\n".join(parts)


def _answer(code: int, out: str, err: str) -> Any:
    if code != 0:
        raise AssertionError(f"driver failed ({code}):\n{err[-4000:]}")
    return json.loads(out.strip().splitlines()[-1])


def _environment(s3_endpoint: str) -> dict[str, str]:
    from dataferry.testing import CREDENTIALS

    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(CREDENTIALS)
    env["AWS_ENDPOINT_URL"] = s3_endpoint
    env["NO_PROXY"] = env["no_proxy"] = "*"
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture(scope="session")
def cluster(tmp_path_factory) -> Any:
    try:
        lab = Lab.create(ROLES)
    except LabUnavailable as e:
        pytest.skip(f"multi-host tests: {e}")
    shared = tmp_path_factory.mktemp("multihost")
    (shared / "logs").mkdir()
    for role in WORKERS:
        (shared / "workers" / role).mkdir(parents=True)
    try:
        c = Cluster(lab, shared, {})
        c.env = _environment(c.s3_endpoint)
        lab.spawn("s3", [sys.executable, "-m", "moto.server", "-H", c.address("s3"),
                         "-p", str(S3_PORT)], str(c.log("s3")), c.env)  # fmt: skip
        lab.spawn("driver", [sys.executable, "-m", "distributed.cli.dask_scheduler",
                             "--host", c.address("driver"), "--port", str(SCHEDULER_PORT),
                             "--no-dashboard"], str(c.log("scheduler")), c.env)  # fmt: skip
        for role in WORKERS:
            c.start_worker(role)
        started = time.monotonic()
        try:
            c.driver("wait", "--workers", str(len(WORKERS)), timeout=START_TIMEOUT)
        except (AssertionError, subprocess.TimeoutExpired) as e:
            raise AssertionError(f"the cluster did not start: {e}\n{c.tail()}") from None
        print(f"multi-host cluster up in {time.monotonic() - started:.1f} s")
        yield c
    finally:
        lab.destroy()
    assert not _left_in_machine_tmp(str(shared)), (
        "the cluster left service directories in the machine's temporary directory"
    )


def _left_in_machine_tmp(shared: str) -> list[str]:
    """Service process directories in the machine's temporary directory that belong to this
    cluster (their service served a directory under `shared`)."""
    left = []
    for folder in glob.glob(os.path.join(tempfile.gettempdir(), "dataferry-service-*")):
        try:
            with open(os.path.join(folder, "stderr"), errors="replace") as f:
                if shared in f.read():
                    left.append(folder)
        except OSError:
            pass
    return left
