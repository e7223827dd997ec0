"""Run a node's shuffle service as its own process (`python -m dataferry.shuffle.serve`, see
`serve.py`)."""

from __future__ import annotations

import os
import sys
from typing import Any

from ..net import ServiceProcess, TLSChoice

# the service's entry point (`serve.py`: it never imports the command line), and the variable
# its shared secret is handed over in
PROGRAM = (sys.executable, "-m", "dataferry.shuffle.serve")
TOKEN_ENV = "DATAFERRY_SHUFFLE_TOKEN"


class ShuffleServiceProcess(ServiceProcess):
    """One node's shuffle service over `directory`; `address` (host:port) once started, and
    `fingerprint` when it serves TLS (`tls`, an identity shared by the job's services).

    restart() brings a dead service back on the same directory and port, as a node manager
    restarts its shuffle service: map outputs survive on disk, unfinished merges are dropped.
    The service stops by itself when the process that created this object dies (a worker
    killed with SIGKILL never runs its teardown).
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
            ["--dir", directory, "--parent-pid", str(os.getpid())],
            token,
            TOKEN_ENV,
            "shuffle service",
            host=host,
            tls=tls,
            program=PROGRAM,
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
