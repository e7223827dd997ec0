"""The parties of a race (`races.py`): the claim holder, a real driver in a child process
that stops itself at a chosen store operation, and the jobs that race it on this side."""

from __future__ import annotations

import json
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

from ..errors import DataferryError
from ..store import FaultRule, open_store
from ..store import fault_layer as find_fault_layer
from ..store.faults import call_at, kill_at
from .harness import (
    EXISTING,
    FRESH,
    MODES,
    PreparedJob,
    error_chain,
    load_preload,
    prepare_job,
    run_reference,
    status_of,
)

CHILD_CODE = (
    "import json, sys, time\n"
    "skew = json.loads(sys.argv[1]).get('skew_s') or 0\n"
    "if skew:\n"
    "    real = time.time\n"
    "    time.time = lambda: real() + skew\n"
    "from dataferry.verify.race_parties import holder_main\n"
    "sys.exit(holder_main(sys.argv[1]))\n"
)
VARIANTS = ((FRESH, "error"), *((EXISTING, m) for m in MODES))
PAUSED_SCHEDULES = ("skewed_clock", "short_timeout", "lease_expired", "cleanup_race")
SCHEDULES = (*PAUSED_SCHEDULES, "two_takers")
POINTS = ("planning", "decided", "applying", "after_success")
SKEWS_S = (-300.0, 300.0)
SHORT_TIMEOUT_S = 0.2
RACE_AFTER_S = 0.5  # the racer starts this long after the holder stopped (> SHORT_TIMEOUT_S)
PAUSE_S = 1.0  # then the holder stays stopped until the racer ends, or this long at most
SLOW_OP_S = 0.02  # each store operation of the slow taker
JOIN_S = 60.0  # how long a job or a child may take once it runs again
PAUSED = "DATAFERRY-PAUSED"


# --- the holder, a driver in a child process -------------------------------------------------


@dataclass(frozen=True)
class HolderSpec:
    """One driver run in a child: the job, its destination, where to stop or die."""

    committer: str
    url: str
    mode: str
    options: dict[str, Any]
    job_uuid: str
    pause_index: int | None = None  # SIGSTOP itself before this operation
    kill_index: int | None = None  # SIGKILL itself before this operation
    skew_s: float = 0.0  # its wall clock (time.time) is off by this much
    action: str = "job"  # or "cleanup": `cleanup_destination(store, older_than_s=0)`
    trace: bool = False  # report the job commit's operations (a baseline)
    preload: tuple[str, ...] = ()
    import_path: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps(self.__dict__)


def _stop_self(*_: Any) -> None:
    print(PAUSED, flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)


def holder_main(spec_json: str) -> int:
    """The child: run the job (or a cleanup) with its pause or kill armed and print, as its
    last line, how it ended."""
    spec = HolderSpec(**json.loads(spec_json))
    if spec.preload:
        sys.path[:0] = [p for p in spec.import_path if p not in sys.path]
        load_preload(spec.preload)
    report: dict[str, Any] = {"status": "", "error": "", "chain": [], "unnamed": ""}
    if spec.action == "cleanup":
        from ..commit.cleanup import cleanup_destination

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
        rules.append(kill_at(spec.kill_index))
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


class Holder:
    """A running child driver: wait for it to stop, let it go on, collect how it ended."""

    def __init__(self, spec: HolderSpec) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD_CODE, spec.to_json()],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
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
        """True once the holder stopped itself; False when it ended (or hung) first."""
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
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)

    def finish(self, timeout_s: float = JOIN_S) -> tuple[str, str, dict[str, Any]]:
        """(status, detail, report): the job's status, or `killed`, `timeout`, `child_error`."""
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return "timeout", f"the child did not end {timeout_s:g} s after it went on", {}
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

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def run_holder(spec: HolderSpec, timeout_s: float = JOIN_S) -> tuple[str, str, dict[str, Any]]:
    holder = Holder(spec)
    try:
        return holder.finish(timeout_s)
    finally:
        holder.kill()


def carry(preload: Collection[str]) -> dict[str, Any]:
    """HolderSpec fields that give a child the preloads and this process's import path."""
    if not preload:
        return {}
    return {"preload": tuple(preload), "import_path": tuple(p for p in sys.path if p)}


# --- the jobs on this side ----------------------------------------------------------------------


@dataclass
class Side:
    """One job in a race and how it ended; `start`/`end` bound its job commit (monotonic)."""

    name: str
    uuid: str
    status: str = ""
    error: str = ""
    job: PreparedJob | None = None
    start: float = 0.0
    end: float = float("inf")

    @property
    def committed(self) -> bool:
        return self.status == "committed"

    def commit(self) -> None:
        self.start = time.monotonic()
        try:
            if self.job is not None:
                self.job.commit()
                self.status, self.error = self.job.status, self.job.error
        finally:
            self.end = time.monotonic()

    def abort(self) -> None:
        """A prepared job that never committed is aborted, as its driver would."""
        if self.job is not None and not self.status:
            try:
                self.job.committer.abort_job(self.job.job)
            except Exception:
                pass


def prepare_side(
    committer: str, url: str, mode: str, options: dict[str, Any], side: Side, rules: list
) -> Side:
    store = open_store(url, faults=rules, latency_scale=0.0)
    try:
        side.job = prepare_job(committer, store, mode, options, side.uuid)
    except DataferryError as e:  # the mode applied up front refused it
        side.status, side.error = status_of(e), f"{type(e).__name__}: {e}"
    return side


def lease_expiry_s() -> float:
    """How long a holder with `claim_timeout_s=0.2` must be silent before a taker with the same
    timeout may judge it dead: the claim's minimum lease where there is one, and 1.5 s more."""
    from ..commit import claim

    return max(SHORT_TIMEOUT_S, float(getattr(claim, "MIN_CLAIM_TIMEOUT_S", 0.0))) + 1.5


def slow_store_rules() -> list[FaultRule]:
    return [FaultRule(action="callback", callback=lambda *_: time.sleep(SLOW_OP_S), times=-1)]
