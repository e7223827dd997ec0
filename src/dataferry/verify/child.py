"""A job's driver in a child process (`sys.executable -c`), as the dead-driver, race and
damaged-record scenarios run it: the reference job (or a `cleanup --older-than 0`) on a
destination, with a pause (SIGSTOP of itself) or a kill (SIGKILL) armed at a store operation,
its wall clock skewed on request; it prints, as its last line, a JSON report of how it ended.

The child knows the committers of the built-in registry; `preload` names modules it imports
first (`module` or `module:function`, see `harness.load_preload`), with this process's import
path (`carry`), so a committer registered at run time (a test's deliberately broken one) runs
there too."""

from __future__ import annotations

import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from ..store import FaultRule, open_store
from ..store import fault_layer as find_fault_layer
from ..store.faults import call_at, kill_at
from .harness import error_chain, load_preload, run_reference, status_of

log = logging.getLogger("dataferry.verify")

CHILD_CODE = (
    "import json, sys, time\n"
    "skew = json.loads(sys.argv[1]).get('skew_s') or 0\n"
    "if skew:\n"
    "    real = time.time\n"
    "    time.time = lambda: real() + skew\n"
    "import faulthandler, signal\n"
    "faulthandler.register(signal.SIGUSR1, all_threads=True)\n"
    "from dataferry.verify.child import child_main\n"
    "sys.exit(child_main(sys.argv[1]))\n"
)
STACK_LINES = 200  # of a hung child's stderr, logged
JOIN_S = 60.0  # how long a child may take (once it runs again, where it was stopped)
PAUSED = "DATAFERRY-PAUSED"


@dataclass(frozen=True)
class ChildSpec:
    """One driver run in a child: the job, its destination, where to stop or die."""

    committer: str
    url: str
    mode: str
    options: dict[str, Any]
    job_uuid: str
    pause_index: int | None = None  # SIGSTOP itself before this operation
    kill_index: int | None = None  # SIGKILL itself at this operation
    kill_when: str = "before"  # or "after" the operation
    skew_s: float = 0.0  # its wall clock (time.time) is off by this much
    action: str = "job"  # or "cleanup": `cleanup_destination(store, older_than_s=0)`
    trace: bool = False  # report the job commit's operations (a baseline)
    preload: tuple[str, ...] = ()  # imported first (module or module:function)
    import_path: tuple[str, ...] = ()  # put before the child's sys.path (the parent's)

    def to_json(self) -> str:
        return json.dumps(self.__dict__)


def carry(preload: Collection[str]) -> dict[str, Any]:
    """ChildSpec fields that give a child the preloads and this process's import path."""
    if not preload:
        return {}
    return {"preload": tuple(preload), "import_path": tuple(p for p in sys.path if p)}


def _stop_self(*_: Any) -> None:
    print(PAUSED, flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)


def child_main(spec_json: str) -> int:
    """The child: run the job (or a cleanup) with its pause or kill armed and print, as its
    last line, how it ended (and which store operations its job commit spanned)."""
    spec = ChildSpec(**json.loads(spec_json))
    if spec.preload:
        sys.path[:0] = [p for p in spec.import_path if p not in sys.path]
        load_preload(spec.preload)
    report: dict[str, Any] = {"status": "", "error": "", "chain": [], "unnamed": ""}
    if spec.action == "cleanup":
        from ..commit.job.cleanup import cleanup_destination

        try:
            done = cleanup_destination(open_store(spec.url, latency_scale=0.0), older_than_s=0)
            report["status"] = "failed:cleanup" if done.failed else "done"
            report["error"] = "; ".join(f"{k}: {v}" for k, v in done.failed.items())
        except Exception as e:
            report["status"], report["error"] = status_of(e), f"{type(e).__name__}: {e}"
            report["chain"], report["unnamed"] = error_chain(e)
        print(json.dumps(report), flush=True)
        return 0
    rules: list[FaultRule] = []
    if spec.pause_index is not None:
        rules.append(call_at(spec.pause_index, _stop_self))
    if spec.kill_index is not None:
        rules.append(kill_at(spec.kill_index, spec.kill_when))  # type: ignore[arg-type]
    store = open_store(spec.url, faults=rules, latency_scale=0.0)
    try:
        out = run_reference(spec.committer, store, spec.mode, spec.options, spec.job_uuid)
        report.update(status=out.status, error=out.error, chain=out.chain, unnamed=out.unnamed)
        report.update(commit_start=out.commit_start, commit_end=out.commit_end)
        report["ended"] = time.monotonic()  # (system-wide on Linux: the parent compares it)
    except Exception as e:  # not the library's own error: named_error sees it
        report["status"], report["error"] = f"failed:{type(e).__name__}", f"{e!r}"
        report["chain"], report["unnamed"] = error_chain(e)
    fault = find_fault_layer(store)
    if spec.trace and fault is not None:
        start = report.get("commit_start") or 0
        report["trace"] = [[t.index, t.op.value, t.path, t.dest] for t in fault.trace[start:]]
    print(json.dumps(report), flush=True)
    return 0


class ChildDriver:
    """A running child driver: wait for it to stop, let it go on, collect how it ended."""

    def __init__(self, spec: ChildSpec) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD_CODE, spec.to_json()],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        self.resumed = False
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, True), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, False), daemon=True),
        ]
        for t in self._readers:
            t.start()

    def _read(self, stream: Any, out: bool) -> None:
        for line in stream:
            (self.out if out else self.err).append(line)
            if out:
                self.lines.put(line)
        if out:
            self.lines.put(None)

    def wait_paused(self, timeout_s: float = JOIN_S) -> bool:
        """True once the child stopped itself; False when it ended (or hung) first."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                return False
            if line is None:
                return False
            if line.strip() == PAUSED:
                return True

    def resume(self) -> None:
        self.resumed = True
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)

    def finish(self, timeout_s: float = JOIN_S) -> tuple[str, str, dict[str, Any]]:
        """(status, detail, report): the job's status, or `killed`, `timeout`, `child_error`."""
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._log_stacks(timeout_s)
            self.kill()
            if self.resumed:
                return "timeout", f"the child did not end {timeout_s:g} s after it went on", {}
            return "timeout", f"the child driver did not finish in {timeout_s:g} s", {}
        for t in self._readers:
            t.join(5)
        if code == -signal.SIGKILL:
            return "killed", "", {}
        lines = [x for x in self.out if x.strip() and x.strip() != PAUSED]
        if code != 0 or not lines:
            tail = (self.err or self.out or ["?"])[-1].strip()
            return "child_error", f"exit {code}: {tail}", {}
        data = json.loads(lines[-1])
        return data["status"], data["error"], data

    def _log_stacks(self, timeout_s: float) -> None:
        """A child that did not end: its threads' stacks (the child dumps them on SIGUSR1)
        and its last lines, logged, so a hang is seen where it hangs."""
        if self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGUSR1)
        time.sleep(1.0)
        log.warning(
            "child driver %d did not end in %g s; its threads and last lines:\n%s",
            self.proc.pid,
            timeout_s,
            "".join(self.err[-STACK_LINES:]),
        )

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def run_child(spec: ChildSpec, timeout_s: float = JOIN_S) -> tuple[str, str, dict[str, Any]]:
    """Run one child driver to its end: (outcome, detail, its report), see `finish`."""
    child = ChildDriver(spec)
    try:
        return child.finish(timeout_s)
    finally:
        child.kill()
