"""What a race must leave (`races.py`): each job's files all there or none, a reported success
with its rows, one writer per mode, the earlier data kept or wholly replaced, `_SUCCESS` exactly
when some job's output is there, nothing left behind."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from . import invariants as inv
from .harness import (
    quiet_store,
)
from .race_parties import Side
from .reference import job_tag

# --- the checks ---------------------------------------------------------------------------------


def _success_tags(store: Any) -> set[str]:
    """The job tags of the files `_SUCCESS` names (empty when it names none, or is not JSON)."""
    import re

    try:
        data = json.loads(store.read_bytes(inv.SUCCESS))
    except Exception:
        return set()
    names = data.get("filenames") if isinstance(data, dict) else None
    tags = set()
    for name in names if isinstance(names, list) else ():
        m = re.search(r"-j([0-9a-f]{8})\.dat$", str(name))
        if m:
            tags.add(m.group(1))
    return tags


def check_sides(
    store: Any,
    mode: str,
    earlier: inv.Snapshot,
    sides: list[Side],
    allow: tuple[str, ...],
    decided: Collection[str] = (),
) -> list[str]:
    """The destination after every job of a race ended and `cleanup` ran (see the module
    docstring). `decided`: names of sides whose commit was decided before anyone raced them
    (a killed holder's), which recovery must finish."""
    problems: list[str] = []
    visible = inv.visible_files(store)
    files = {s.name: inv.files_of_job(store, s.uuid, visible) for s in sides}
    present = [s for s in sides if files[s.name]]
    has_success = inv.has_success(store)
    problems += inv.check_jobs(store, [s.uuid for s in present], ignore=earlier)
    for s in sides:
        if s.committed and not files[s.name]:
            # replaced by an overwrite that finished after it (the claim ordered them)
            later = [
                o
                for o in sides
                if o is not s
                and mode == "overwrite"
                and o.committed
                and files[o.name]
                and o.end > s.end
            ]
            if not later:
                problems.append(
                    f"{inv.COMPLETE}: job {s.name} reported committed, none of its files are "
                    f"visible ({', '.join(f'{o.name} {o.status}' for o in sides if o is not s)})"
                )
        if s.name in decided and not files[s.name]:
            replaced = mode == "overwrite" and any(o.committed for o in sides if o is not s)
            if not replaced:
                problems.append(
                    f"{inv.NO_LOSS}: job {s.name}'s commit was decided, yet none of its files "
                    "are visible after the takeover and cleanup"
                )
    if mode == "overwrite" and len(present) > 1:
        problems.append(
            f"{inv.ONE_WRITER}: mode 'overwrite' left {len(present)} jobs' output (the union: "
            f"{', '.join(f'{s.name} {len(files[s.name])} files' for s in present)})"
        )
    if mode == "error" and (len(present) > 1 or (earlier and present)):
        problems.append(
            f"{inv.ONE_WRITER}: mode 'error' left the output of "
            f"{', '.join(s.name for s in present)} in a destination that held "
            f"{len(earlier)} files"
        )
    replaced = inv.replaced_by(mode, earlier) if present else set()
    problems += inv.check_earlier(store, earlier, visible, replaced)
    if present and not has_success:
        problems.append(
            f"{inv.NO_FALSE_SUCCESS}: {', '.join(s.name for s in present)}'s output is "
            "visible without _SUCCESS"
        )
    if has_success and not present and (not earlier or replaced):
        problems.append(f"{inv.NO_FALSE_SUCCESS}: _SUCCESS but no job's output is there")
    absent = {job_tag(s.uuid): s.name for s in sides if not files[s.name]}
    named = sorted(absent[t] for t in _success_tags(store) if t in absent)
    if has_success and named:
        problems.append(
            f"{inv.NO_FALSE_SUCCESS}: _SUCCESS names files of job {named[0]}, whose output "
            "is not there"
        )
    problems += inv.check_no_leftovers(store, allow)
    return problems


def final_cleanup(url: str, problems: list[str]) -> None:
    """What a user runs once every job ended: `dataferry cleanup DEST --older-than 0`."""
    from ..commit.job.cleanup import cleanup_destination

    try:
        report = cleanup_destination(quiet_store(url), older_than_s=0.0)
    except Exception as e:
        problems.append(f"{inv.NO_LEFTOVERS}: dataferry cleanup raised {type(e).__name__}: {e}")
        return
    for path, why in report.failed.items():
        problems.append(f"{inv.NO_LEFTOVERS}: dataferry cleanup left {path}: {why}")
