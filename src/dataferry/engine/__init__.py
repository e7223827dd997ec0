"""Engines: who runs the tasks. `local` is the embedded default."""

from .attempt import AttemptDied, AttemptFailure, TaskOutput
from .local import JobRun, LocalEngine, LocalEngineConfig

__all__ = [
    "AttemptDied",
    "AttemptFailure",
    "JobRun",
    "LocalEngine",
    "LocalEngineConfig",
    "TaskOutput",
]
