"""Write markers: direct (one file per marker) and the batching marker service."""

from .base import IOType, WriteMarkers, data_path, marker_dir, marker_name
from .client import MarkerClient, ServiceMarkers, ServiceUnavailable
from .direct import DirectMarkers
from .service import MarkerService, MarkerServiceConfig

__all__ = [
    "DirectMarkers",
    "IOType",
    "MarkerClient",
    "MarkerService",
    "MarkerServiceConfig",
    "ServiceMarkers",
    "ServiceUnavailable",
    "WriteMarkers",
    "data_path",
    "marker_dir",
    "marker_name",
]
