"""A bench peer's small Java program: compiled once into a temporary directory, run in a fresh
JVM per job, its last line of output read as JSON. What Hadoop's peers (`commit_hadoop.py`,
`commit_hadoop_s3a.py`) share; each brings its own source and jars."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def java_missing() -> str | None:
    """Why Java 17 cannot compile and run a driver here, or None."""
    if not (shutil.which("java") and shutil.which("javac")):
        return "needs java and javac (17 or later) on PATH"
    out = subprocess.run(["javac", "-version"], capture_output=True, text=True, timeout=60)
    m = re.search(r"javac (\d+)", out.stdout + out.stderr)
    if not m or int(m.group(1)) < 17:
        return "needs javac 17 or later"
    return None


class JavaDriver:
    """`source` (the class `main_class`) compiled against `compile_cp`, run against `run_cp`;
    its classes removed by `close`."""

    def __init__(
        self, main_class: str, source: str, compile_cp: str, run_cp: str, timeout_s: float
    ) -> None:
        self.main_class = main_class
        self.run_cp = run_cp
        self.timeout_s = timeout_s
        self.classes = Path(tempfile.mkdtemp(prefix="dataferry-bench-java-"))
        path = self.classes / f"{main_class}.java"
        path.write_text(source)
        out = subprocess.run(
            ["javac", "-nowarn", "-d", str(self.classes), "-cp", compile_cp, str(path)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        if out.returncode != 0:
            self.close()
            raise RuntimeError(f"javac failed: {out.stderr[-2000:]}")

    def run(self, args: Sequence[str], what: str) -> dict[str, Any]:
        """The driver run with `args`: the JSON object it printed last. `what` names the
        driver in the error when the JVM fails."""
        cmd = ["java", "-cp", f"{self.run_cp}:{self.classes}", self.main_class, *args]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout_s)
        if out.returncode != 0:
            raise RuntimeError(f"{what} failed: {out.stderr[-2000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])

    def close(self) -> None:
        shutil.rmtree(self.classes, ignore_errors=True)


class PeerRuns:
    """A Java peer over a bench's repeats: its compiled driver when it can run here, else why
    it is skipped. Subclasses run the jobs and give their medians (`medians`)."""

    def __init__(self) -> None:
        self.peer: Any = None
        self.skipped: str | None = None

    def start(
        self, not_here: str | None, missing: Callable[[], str | None], make: Callable[[], Any]
    ) -> None:
        """Compile the peer (`make`) unless the bench's store is not its (`not_here`) or the
        machine lacks what it needs (`missing`)."""
        self.skipped = not_here or missing()
        if self.skipped is None:
            self.peer = make()

    def close(self) -> None:
        if self.peer is not None:
            self.peer.close()

    def summary(self) -> dict[str, Any] | None:
        """The runs' medians, why the peer was skipped, or None when it ran no job."""
        if self.skipped is not None:
            return {"skipped": self.skipped}
        return self.medians()

    def medians(self) -> dict[str, Any] | None:
        raise NotImplementedError
