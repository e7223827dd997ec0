"""Push-based shuffle (Spark's "Magnet" design): map outputs, the shuffle service that merges
pushed blocks, the pusher, the driver's finalize, and the reader with fallback."""

from .background import BackgroundPusher, process_pusher
from .blocks import Block, frame, unframe
from .client import ServiceRefused, ShuffleClient, register_app, unregister_app
from .config import DriverConfig, PushConfig, ReadConfig, ShuffleServiceConfig
from .driver import FinalizeReport, MergedPartition, ShuffleDriver
from .lease import LeaseKeeper
from .mapoutput import MapStatus, write_map_output
from .merge import MergeManager, MergeStatus, PushCode
from .process import ShuffleServiceProcess
from .pusher import PushReport, PushTarget, plan_requests, push_map_output
from .reader import ReadReport, ReduceInput, read_reduce
from .service import ShuffleService
from .tenancy import AppCredentials

__all__ = [
    "AppCredentials",
    "BackgroundPusher",
    "Block",
    "DriverConfig",
    "FinalizeReport",
    "LeaseKeeper",
    "MapStatus",
    "MergeManager",
    "MergeStatus",
    "MergedPartition",
    "PushCode",
    "PushConfig",
    "PushReport",
    "PushTarget",
    "ReadConfig",
    "ReadReport",
    "ReduceInput",
    "ServiceRefused",
    "ShuffleClient",
    "ShuffleDriver",
    "ShuffleService",
    "ShuffleServiceConfig",
    "ShuffleServiceProcess",
    "frame",
    "plan_requests",
    "process_pusher",
    "push_map_output",
    "read_reduce",
    "register_app",
    "unframe",
    "unregister_app",
    "write_map_output",
]
