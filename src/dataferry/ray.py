"""Ray integration: `dataferry.ray.CommitDatasink(dest, ...)` for `Dataset.write_datasink`."""

from .engine.ray import CommitDatasink

__all__ = ["CommitDatasink"]
