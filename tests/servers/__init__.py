"""Real servers for the tests (SeaweedFS, Azurite, fake-gcs-server, HDFS, ...): one module a
server, each with a session-scoped fixture. This module holds what they share:

- `ServerProcess`: a server as a subprocess in its own session, bound to loopback, its output
  in a log file (shown when it fails to start), stopped with SIGTERM then SIGKILL;
- `shared_server`: one server for every pytest-xdist worker of a run. The first worker to ask
  starts it (under a file lock) and writes how to reach it; the others read that; each worker
  holds a reference, and the last to finish stops it. Without xdist it is started and stopped
  by the one process.

A server that cannot be installed here (its tool missing) makes its tests skip with the reason.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache"  # what `make servers` installs: .cache/npm, .cache/jars/SET
START_TIMEOUT_S = 120


def free_port() -> int:
    """A TCP port free on loopback now (the server binds it soon after)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


def need_tool(path: str | Path | None, what: str, how: str = "make servers") -> str:
    """The tool's path, or skip naming what is missing and the command that installs it."""
    found = shutil.which(str(path)) if path and not Path(str(path)).exists() else path
    if not found:
        pytest.skip(f"{what} is not installed here ({how} installs it)")
    return str(found)


@dataclass
class ServerProcess:
    """One server subprocess; `start` waits until `ready()` is true."""

    name: str
    argv: Sequence[str]
    log: Path
    ready: Callable[[], bool]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    pid: int = 0

    def start(self, timeout_s: float = START_TIMEOUT_S) -> ServerProcess:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            proc = subprocess.Popen(
                list(self.argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env},
                cwd=self.cwd,
                start_new_session=True,  # its own group: stopped whole, outlives no test run
            )
        self.pid = proc.pid
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with code {proc.returncode}:\n{self.tail()}"
                )
            if self.ready():
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{self.name} was not ready within {timeout_s:.0f} s:\n{self.tail()}")

    def tail(self, n: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        stop_pid(self.pid)


def stop_pid(pid: int, grace_s: float = 10.0) -> None:
    """SIGTERM the server's process group, SIGKILL what is left after `grace_s`."""
    if not pid:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                return
        except ChildProcessError:  # not our child (another worker started it)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def shared_server(
    name: str,
    tmp_path_factory: pytest.TempPathFactory,
    start: Callable[[Path], tuple[int, dict]],
) -> Iterator[dict]:
    """One server for every xdist worker of the run. `start(workdir)` starts it and returns
    (pid, info); `info` (JSON: ports, endpoints, credentials) is what every worker gets."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    workdir = root / f"server-{name}"
    workdir.mkdir(exist_ok=True)
    state = workdir / "state.json"
    lock = workdir / "lock"
    with _locked(lock):
        if state.exists():
            record = json.loads(state.read_text())
        else:
            pid, info = start(workdir)
            record = {"pid": pid, "info": info, "users": 0}
        record["users"] += 1
        state.write_text(json.dumps(record))
    try:
        yield record["info"]
    finally:
        with _locked(lock):
            record = json.loads(state.read_text())
            record["users"] -= 1
            if record["users"] <= 0:
                stop_pid(record["pid"])
                state.unlink()
            else:
                state.write_text(json.dumps(record))
