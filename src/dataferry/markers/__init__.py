"""Write markers: direct (one file per marker) and the batching marker service."""

from .base import (
    BadMarker,
    IOType,
    WriteMarkers,
    check_marker_name,
    data_path,
    marker_dir,
    marker_name,
)
from .client import MarkerClient, RequestTooLarge, ServiceMarkers, ServiceUnavailable
from .direct import DirectMarkers
from .process import MarkerServiceProcess
from .service import MarkerService, MarkerServiceConfig

__all__ = [
    "BadMarker",
    "DirectMarkers",
    "IOType",
    "MarkerClient",
    "MarkerService",
    "MarkerServiceConfig",
    "MarkerServiceProcess",
    "RequestTooLarge",
    "ServiceMarkers",
    "ServiceUnavailable",
    "WriteMarkers",
    "check_marker_name",
    "data_path",
    "marker_dir",
    "marker_name",
]
