"""The Dask engine: the embedded engine's driver (commit coordinator on the client, retries,
speculation) with Dask's workers running the task attempts.

The coordinator stays on the client, as Spark keeps its OutputCommitCoordinator on the driver:
workers never need to reach it. An attempt writes (phase 1) on a worker; the client authorises
one attempt per task; the authorised attempt commits (phase 2) on a worker. Both phases are
ordinary Dask tasks submitted through the client's executor.

When a worker dies, Dask reruns its tasks elsewhere with the same arguments, so the same attempt
id: committers refuse to set up an attempt twice, the rerun fails, and the driver launches a new
attempt with a new number.
"""

from __future__ import annotations

from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

from ..engine.local import LocalEngine, LocalEngineConfig
from ..errors import ConfigError
from ..extras import require
from ..net.addresses import host_of


class DaskEngine(LocalEngine):
    """The embedded engine's driver with a distributed Client's workers running the attempts.

    Parameters
    ----------
    client
        A ``distributed.Client`` (default: the current one; without one, ConfigError).
    config
        The driver's options (attempts, speculation); or give them as keywords.
    **options
        Fields of `LocalEngineConfig`, when `config` is not given.
    """

    def __init__(
        self, client: Any = None, config: LocalEngineConfig | None = None, **options: Any
    ) -> None:
        super().__init__(config, **options)
        if client is None:
            client = _default_client()
        self.client = client

    @property
    def workers(self) -> int:
        return max(1, len(self.client.scheduler_info().get("workers", {})))

    @property
    def threads(self) -> int:
        """Task slots: the workers' threads together (each runs one write task at a time)."""
        workers = self.client.scheduler_info().get("workers", {})
        return max(1, sum(int(w.get("nthreads", 1) or 1) for w in workers.values()))

    def worker_hosts(self) -> list[str]:
        """The hosts the workers run on, as the scheduler knows them."""
        return sorted({host_of(w) for w in self.client.scheduler_info().get("workers", {})})

    def _executor(self) -> Executor:
        return _DaskExecutor(self.client)

    def _close_executor(self, executor: Executor) -> None:
        executor.shutdown(wait=True)  # the client stays open


def _default_client() -> Any:
    distributed = require("distributed", "the Dask engine")
    try:
        return distributed.default_client()
    except ValueError:
        raise ConfigError(
            "the Dask engine runs on a distributed Client and none is running: start one "
            "(distributed.Client()) or pass client=; dataferry.dask.to_parquet runs on any "
            "Dask scheduler without one"
        ) from None


class _DaskExecutor(Executor):
    """Dask tasks behind the concurrent.futures interface, settled by waiter threads.

    Dask's own executor adapter settles its futures in a callback; when a result is lost with
    a dying worker and the gather fails inside that callback, the future is never settled. Here
    every outcome, a failed gather included, becomes the future's result or exception, so the
    driver sees an attempt fail and launches another.
    """

    def __init__(self, client: Any, waiters: int = 32) -> None:
        self.client = client
        self._waiters = ThreadPoolExecutor(waiters, thread_name_prefix="dataferry-dask-wait")

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[override]
        task = self.client.submit(fn, *args, pure=False, **kwargs)
        settled: Future = Future()

        def wait() -> None:
            try:
                settled.set_result(task.result())
            except BaseException as e:
                settled.set_exception(e)

        self._waiters.submit(wait)
        return settled

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._waiters.shutdown(wait=wait, cancel_futures=cancel_futures)
