"""The network tests start real service processes with the fixture the abuse suite uses."""

from __future__ import annotations

from ..services import start_service

__all__ = ["start_service"]
