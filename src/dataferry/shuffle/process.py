"""Run a node's shuffle service as its own process (`dataferry shuffle serve`)."""

from __future__ import annotations

from typing import Any

from ..net import ServiceProcess, TLSChoice


class ShuffleServiceProcess(ServiceProcess):
    """One node's shuffle service over `directory`; `address` (host:port) once started, and
    `fingerprint` when it serves TLS (`tls`, an identity shared by the job's services).

    restart() brings a dead service back on the same directory and port, as a node manager
    restarts its shuffle service: map outputs survive on disk, unfinished merges are dropped.
    """

    def __init__(
        self,
        directory: str,
        token: str = "",
        port: int = 0,
        *,
        host: str = "",
        tls: TLSChoice = "auto",
        **options: Any,
    ) -> None:
        super().__init__(
            ["shuffle", "serve", "--dir", directory],
            token,
            "DATAFERRY_SHUFFLE_TOKEN",
            "shuffle service",
            host=host,
            tls=tls,
            port=port,
            **options,
        )
        self.directory = directory

    def start(self, timeout: float = 30.0) -> ShuffleServiceProcess:
        super().start(timeout)
        self.options["port"] = int(self.address.rpartition(":")[2])  # restarts keep the port
        return self

    def restart(self, timeout: float = 30.0) -> ShuffleServiceProcess:
        self.kill()
        return self.start(timeout)
