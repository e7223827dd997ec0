"""CPU time and peak memory of the processes a benchmark runs: this one and its descendants.

A sampler thread reads every process's resident set size a few times a second and keeps the
peak; CPU time (user + system) is taken when a process is first seen and at the end, so what
a process did before the measurement began is not counted. Processes are grouped by role:
the driver (this process), workers (Dask's worker processes, the embedded engine's pool),
shuffle services, and other helpers. Needs psutil (a dependency of Dask's distributed, and in
the `bench` extra); without it nothing is measured.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MiB = 1024 * 1024
ROLES = ("driver", "worker", "service", "other")


@dataclass
class _Seen:
    role: str
    cpu_start: float
    cpu_last: float = 0.0
    peak_rss: int = 0


@dataclass
class ProcessSampler:
    """Use as a context manager around the work measured; `result()` after it."""

    interval_s: float = 0.1
    role_of: Callable[[Any], str] | None = None  # psutil.Process -> role; default by cmdline
    _seen: dict[int, _Seen] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _own_cpu: float = 0.0  # the sampler thread's own CPU seconds, not the driver's work

    def __enter__(self) -> ProcessSampler:
        try:
            import psutil
        except ImportError:
            return self
        self._psutil = psutil
        self._sample(first=True)
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(5)
        self._sample()

    def _run(self) -> None:
        started = time.thread_time()
        while not self._stop.wait(self.interval_s):
            self._sample()
        self._own_cpu = time.thread_time() - started

    def _sample(self, first: bool = False) -> None:
        me = self._psutil.Process()
        try:
            processes = [me, *me.children(recursive=True)]
        except self._psutil.Error:
            return
        for p in processes:
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    cpu = t.user + t.system
                    rss = p.memory_info().rss
                    seen = self._seen.get(p.pid)
                    if seen is None:
                        # a process born during the measurement counts from its start
                        seen = self._seen[p.pid] = _Seen(self._role(p), cpu if first else 0.0)
            except self._psutil.Error:
                continue  # it ended meanwhile: keep what was last seen of it
            seen.cpu_last = cpu
            seen.peak_rss = max(seen.peak_rss, rss)

    def _role(self, p: Any) -> str:
        if p.pid == os.getpid():
            return "driver"
        if self.role_of is not None:
            return self.role_of(p)
        return role_by_command(p)

    def result(self) -> dict[str, dict[str, float]]:
        """role -> {"processes", "cpu_s" (summed), "peak_rss_mib" (of the largest)}."""
        out: dict[str, dict[str, float]] = {}
        for seen in self._seen.values():
            r = out.setdefault(seen.role, {"processes": 0, "cpu_s": 0.0, "peak_rss_mib": 0.0})
            r["processes"] += 1
            cpu = seen.cpu_last - seen.cpu_start
            if seen.role == "driver":  # sampling every process 10 times a second costs CPU
                cpu -= self._own_cpu  # of its own (0.04 s a second with six processes)
            r["cpu_s"] = round(r["cpu_s"] + max(0.0, cpu), 2)
            r["peak_rss_mib"] = max(r["peak_rss_mib"], round(seen.peak_rss / MiB, 1))
        return {role: out[role] for role in ROLES if role in out}


def role_by_command(p: Any) -> str:
    """A child's role from its command line: a shuffle service, a helper of multiprocessing
    or the like, or a worker (everything else that runs tasks)."""
    try:
        argv = p.cmdline()
    except Exception:
        return "other"
    command = " ".join(argv)
    # by its arguments, not words anywhere in the line (a checkout under a directory named
    # "shuffle" put "shuffle" in every forkserver's line, and "serve" is in "forkserver")
    if "dataferry.shuffle.serve" in argv or _says(argv, "shuffle", "serve"):
        return "service"
    program = os.path.basename(argv[0]) if argv else ""
    if not program.startswith(("python", "ray::")):
        return "other"  # a server beside the run (a JVM, SeaweedFS): it runs no task
    if "forkserver" in command:
        # the fork server's children are pool workers (they keep its command line)
        try:
            parent = p.parent()
            parent_command = " ".join(parent.cmdline()) if parent is not None else ""
        except Exception:
            parent_command = ""
        return "worker" if "forkserver" in parent_command else "other"
    if "distributed.cli.dask_scheduler" in argv:
        return "driver"  # a scheduler of its own (on one host it runs in the driver)
    if "resource_tracker" in command or "semaphore_tracker" in command:
        return "other"
    return "worker"


def _says(argv: list[str], *words: str) -> bool:
    """Whether `words` follow one another as arguments of `argv`."""
    n = len(words)
    return any(tuple(argv[i : i + n]) == words for i in range(len(argv) - n + 1))


class PeakRss:
    """This process's peak resident memory over a block, as Linux keeps it: the high-water
    mark is reset on entry (`/proc/self/clear_refs`) and read on exit (`VmHWM`), so nothing is
    sampled and no peak is missed. `growth_mib`: the peak over the size on entry; None where
    the system does not offer it."""

    growth_mib: float | None = None

    def __enter__(self) -> PeakRss:
        self._start = None
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # reset the peak to the current size
            self._start = _status_kib("VmRSS")
        except OSError:
            pass
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._start is None:
            return
        try:
            peak = _status_kib("VmHWM")
        except OSError:
            return
        self.growth_mib = round(max(0, peak - self._start) / 1024, 1)


def _status_kib(field_name: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    raise OSError(f"no {field_name} in /proc/self/status")
