"""Run the marker service as its own process (`dataferry markers serve`), for tests, benchmarks
and job drivers that want it out of their own process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

from ..errors import DataferryError
from ..store import LocalStore


class ServiceProcess:
    def __init__(self, dest: str, token: str = "", **options: Any) -> None:
        self.dest, self.token, self.options = dest, token, options
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self._dir = tempfile.mkdtemp(prefix="dataferry-markers-")
        self._files = LocalStore(self._dir)
        self._port_file = os.path.join(self._dir, "url")

    def start(self, timeout: float = 30.0) -> ServiceProcess:
        cmd = [
            sys.executable,
            "-m",
            "dataferry.cli",
            "markers",
            "serve",
            "--dest",
            self.dest,
            "--port-file",
            self._port_file,
        ]
        for k, v in self.options.items():
            cmd += [f"--{k.replace('_', '-')}", str(v)]
        env = {**os.environ, "DATAFERRY_MARKER_TOKEN": self.token}
        self.proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._files.exists("url"):
                self.url = self._files.read_bytes("url").decode().strip()
                return self
            if self.proc.poll() is not None:
                raise DataferryError(
                    f"marker service exited: {self.proc.stderr.read().decode()[-500:]}"
                )  # type: ignore[union-attr]
            time.sleep(0.05)
        self.kill()
        raise DataferryError(f"marker service did not start within {timeout} s")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(10)
        self._files.delete("url")

    def __enter__(self) -> ServiceProcess:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.kill(signal.SIGTERM)
