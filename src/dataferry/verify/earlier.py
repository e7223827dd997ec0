"""The earlier data set of a referee scenario: what a destination holds before the job under
test, committed by another job through the same committer."""

from __future__ import annotations

from typing import Any

from ..errors import DataferryError
from . import invariants as inv
from .harness import EXISTING, quiet_store, run_reference
from .reference import PARTITIONS


def earlier_data(
    committer: str, url: str, options: dict[str, Any], destination: str, job_uuid: str
) -> inv.Snapshot:
    """What a variant's destination holds before its job: nothing where it is fresh, else a
    data set committed by the job `job_uuid` (`write_earlier`)."""
    if destination != EXISTING:
        return {}
    return write_earlier(committer, url, options, job_uuid)


def write_earlier(
    committer: str,
    url: str,
    options: dict[str, Any],
    job_uuid: str | None = None,
    partitions: int = PARTITIONS,
) -> inv.Snapshot:
    """Commit a data set into an empty destination with another job through the same
    committer (mode `append`, the same as any mode on an empty destination, and the one a
    committer that shows task output early, v2, does not refuse itself in), over `partitions`
    partition directories; returns what a reader sees of it."""
    store = quiet_store(url)
    out = run_reference(committer, store, "append", options, job_uuid, partitions=partitions)
    if not out.committed:
        raise DataferryError(
            f"{committer} cannot write the earlier data set into an empty destination "
            f"({store.full_url()}): {out.status} {out.error}"
        )
    return inv.snapshot(store)
