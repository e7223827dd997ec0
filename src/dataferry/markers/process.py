"""Run the marker service as its own process (`dataferry markers serve`), for tests, benchmarks
and job drivers that want it out of their own process."""

from __future__ import annotations

from typing import Any

from ..net import ServiceProcess, TLSChoice


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
            ["markers", "serve", "--dest", dest],
            token,
            "DATAFERRY_MARKER_TOKEN",
            "marker service",
            host=host,
            tls=tls,
            **options,
        )

    @property
    def url(self) -> str:
        return self.address
