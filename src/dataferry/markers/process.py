"""Run the marker service as its own process (`dataferry markers serve`), for tests, benchmarks
and job drivers that want it out of their own process."""

from __future__ import annotations

from typing import Any

from ..net import ServiceProcess as _ServiceProcess


class ServiceProcess(_ServiceProcess):
    """The marker service for one table; `url` once started."""

    def __init__(self, dest: str, token: str = "", **options: Any) -> None:
        super().__init__(
            ["markers", "serve", "--dest", dest],
            token,
            "DATAFERRY_MARKER_TOKEN",
            "marker service",
            **options,
        )

    @property
    def url(self) -> str:
        return self.address
