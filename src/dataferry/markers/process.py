"""Run the marker service as its own process (`python -m dataferry.markers.serve`, see
`serve.py`), for tests, benchmarks and job drivers that want it out of their own process."""

from __future__ import annotations

import sys
from typing import Any

from ..net import ServiceProcess, TLSChoice

# the service's entry point (`serve.py`: it never imports the command line), and the variable
# its shared secret is handed over in
PROGRAM = (sys.executable, "-m", "dataferry.markers.serve")
TOKEN_ENV = "DATAFERRY_MARKER_TOKEN"


class MarkerServiceProcess(ServiceProcess):
    """The marker service for one table; `url` once started (https:// under TLS), and
    `fingerprint` when it serves TLS (`tls`, an identity shared by the job's services)."""

    def __init__(
        self,
        dest: str,
        token: str = "",
        *,
        host: str = "",
        tls: TLSChoice = "auto",
        **options: Any,
    ) -> None:
        super().__init__(
            ["--dest", dest],
            token,
            TOKEN_ENV,
            "marker service",
            host=host,
            tls=tls,
            program=PROGRAM,
            **options,
        )

    @property
    def url(self) -> str:
        return self.address
