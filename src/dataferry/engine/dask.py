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

from concurrent.futures import Executor
from typing import Any

from .local import LocalEngine, LocalEngineConfig


class DaskEngine(LocalEngine):
    def __init__(
        self, client: Any = None, config: LocalEngineConfig | None = None, **options: Any
    ) -> None:
        super().__init__(config, **options)
        if client is None:
            from distributed import default_client

            client = default_client()
        self.client = client

    @property
    def workers(self) -> int:
        return max(1, len(self.client.scheduler_info().get("workers", {})))

    def _executor(self) -> Executor:
        return self.client.get_executor(pure=False)

    def _close_executor(self, executor: Executor) -> None:
        executor.shutdown(wait=True)  # the client's executor; the client stays open
