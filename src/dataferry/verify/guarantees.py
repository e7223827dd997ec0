"""The referee's schedules for one guarantee each, beside the races of a live holder
(`races.py`) and the damaged claims and links (`damage.py`): each run by `verify_crash` when
its name is among the race schedules asked for (`--race-schedule NAME`, or all of them with
`--races`).

- `damaged_intent` (`intents.py`): a decided commit's intent record damaged in every way
  after each phase, then a cleanup: never taken for "no decision";
- `cleanup_writing` (`writing.py`, stores backed by a local directory): `cleanup
  --older-than` while a job with no driver record has tasks writing under old directories:
  the job is left alone and commits;
- `table_landed` (`landed.py`, table committers): a table commit that landed and was answered
  with a conflict, a timeout or an error: the job is in the table once, or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from .harness import Scenario, ScenarioStores

SCHEDULES = ("damaged_intent", "cleanup_writing", "table_landed")


def run_guarantees(
    committer: str,
    stores: ScenarioStores,
    options: dict[str, Any],
    *,
    schedules: Collection[str] = SCHEDULES,
    seed: int = 0,
    preload: tuple[str, ...] = (),
    workers: int = 2,
    progress: Callable[[int], None] | None = None,
) -> tuple[list[Scenario], dict[str, str]]:
    """The schedules of `schedules` this module knows; returns the scenarios and, per
    schedule that could not run here, why."""
    found: list[Scenario] = []
    skipped: dict[str, str] = {}
    kw: dict[str, Any] = {"seed": seed, "preload": preload, "workers": workers}
    if "damaged_intent" in schedules:
        from .intents import run_damaged_intents

        found += run_damaged_intents(committer, stores, options, progress=progress, **kw)
    if "cleanup_writing" in schedules:
        from .damage import local_dir
        from .writing import run_cleanup_writing

        if local_dir(stores.base) is None:
            skipped["cleanup_writing"] = (
                f"{stores.base} is not a local directory: the ages of its files cannot be set"
            )
        else:
            found += run_cleanup_writing(
                committer, stores, options, seed=seed, workers=workers, progress=progress
            )
    if "table_landed" in schedules:
        from .landed import run_table_landed
        from .tables import is_table

        if not is_table(committer):
            skipped["table_landed"] = f"{committer} commits no table transaction"
        else:
            found += run_table_landed(
                committer, stores, options, seed=seed, workers=workers, progress=progress
            )
    return found, skipped
