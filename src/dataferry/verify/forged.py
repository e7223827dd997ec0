"""Forged markers: anyone who can write a file into a marker directory (or holds the marker
service's token) can make a marker, and a marker names a data file. Nothing committed may be
deleted on a marker's word.

What it models: a destination holding a data set committed by job E; a forger writes markers
naming E's data files (the paths the committed version references), as empty marker files
straight into a marker directory. Schedules, for every committer with write markers (a
`markers_root` on its class, found through the registry):

- `made_up`, `its_tag`, `the_job`: the markers go into the directory of a made-up job (a new
  job id, as the committer names its jobs' directories), of a job whose name shares the first 8
  characters of E's (a uuid's tag, an instant's date), or of E itself; then either
  `cleanup --older-than 0` runs and the next job appends (`cleanup`), or the forged directory
  is two hours old (stores backed by a local directory) and the next job runs at once, in
  `append` (`next_job`) or `overwrite` (`overwrite`), then `cleanup --older-than 0`;
- `live`: the markers go into the live job's own marker directory just before its commit
  (`before_the_plan`: the engine's last call before `commit_job`) or once its commit is
  decided (`after_the_plan`: a store callback at the write of its intent record); the job
  appends and must commit exactly its own files;
- the made-up job's (`cleanup`) and the live job's (`before_the_plan`) forgeries again, written
  as the marker service writes markers (one `MARKERS0` file listing them, and `MARKERS.type`),
  which every deleting path reads beside marker files.

Forged records (kind `forged_records`), what the same forger can write beside markers:
- `intent` (every committer: it needs no markers): an intent record
  (`_commit_intent.json`) in a made-up job's directory, in mode `overwrite`, whose entries to
  replace are E's data files; then `cleanup --older-than 0` and the next job, or (local and
  `sim:` stores) the next job at once, the directory two hours old. Cleanup refusing
  the record (leaving the directory, named) is a safe answer; the directory is then removed as
  its owner would before the leftovers are checked;
- `job_records` (a committer whose job directory holds records besides markers: Hudi's
  `dataferry-job.json`): E's own directory again, those records rewritten to name a made-up
  job, and markers naming E's files; then `cleanup --older-than 0` and the next job.

Checked after each step: every data file E committed is still on the store (until an
`overwrite` job replaces it), the destination read by its own reader holds E's rows exactly
(`earlier_data_kept`), the next job commits and is whole (`write_mode`, `complete_output`,
`exclusive_output`), and nothing is left: no forged directory cleanup takes for a dataferry
job's, no orphan file (`no_leftovers`, `no_orphan_files`). A forged directory cleanup does not
take for a dataferry job's (Hudi's without a dataferry record is Java Hudi's) is its owner's:
removed, as its owner would, before the leftovers are checked.
"""

from __future__ import annotations

import os
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..commit.factory import make_committer
from ..commit.registry import spec
from ..errors import DataferryError
from ..ids import new_job_id
from ..markers.base import marker_name
from ..store import FaultRule, Store, open_store, paths
from . import invariants as inv
from .harness import (
    EXISTING,
    Scenario,
    ScenarioStores,
    allowed_leftovers,
    check_outcome,
    discard,
    quiet_store,
    run_reference,
    seeded_uuid,
)

KIND, RECORDS_KIND = "forged_markers", "forged_records"
PLACES = ("made_up", "its_tag", "the_job")
ACTIONS = ("cleanup", "next_job", "overwrite")
LIVE_MOMENTS = ("before_the_plan", "after_the_plan")
FILES, SERVICE = "marker files", "the marker service's MARKERS files"
OLD_S = 7200.0  # older than cleanup's (and the next job's) hour: a dead job's leftovers
MARKER = re.compile(r"\.marker\.[A-Z]+\Z")  # a marker file's name (not a job's record)


def markers_root(committer: str) -> str | None:
    """Where `committer` keeps its jobs' marker directories (None: it keeps no markers)."""
    s = spec(committer)
    root = getattr(s.committer_class(), "markers_root", None) if s else None
    return root or None


def forge(store: Store, directory: str, targets: list[str], style: str = FILES) -> None:
    """A marker naming each of `targets`, and a sibling of each that is not there but carries
    the same tag (`phantom`: what makes a rollback sweep the target's directory for files of
    that tag), written straight into `directory`: one empty file per marker (`FILES`, as
    direct markers are), or the marker service's `MARKERS0` listing them all (`SERVICE`)."""
    from ..markers.files import MARKERS_TYPE_FILE, SERVICE_TYPE, markers_file

    names = [
        marker_name(paths.parent(t), paths.name(t)) for t in [*targets, *map(phantom, targets)]
    ]
    if style == SERVICE:
        store.write_bytes(markers_file(directory, 0), "".join(f"{n}\n" for n in names).encode())
        store.write_bytes(paths.join(directory, MARKERS_TYPE_FILE), SERVICE_TYPE.encode())
        return
    for name in names:
        store.write_bytes(paths.join(directory, name), b"")


def phantom(path: str) -> str:
    """A file beside `path` that no one wrote: the same name but for its first character, so
    the same job tag at its end."""
    name = paths.name(path)
    first = "1" if name[0] == "0" else "0"
    return paths.join(paths.parent(path), first + name[1:])


def age(url: str, directory: str) -> bool:
    """Make `directory` two hours old (False where the store is not a local directory)."""
    from .damage import local_dir

    root = local_dir(url)
    if root is None:
        return False
    old = time.time() - OLD_S
    top = os.path.join(root, directory)
    for d, _, names in os.walk(top):
        for n in names:
            os.utime(os.path.join(d, n), (old, old))
        os.utime(d, (old, old))
    return True


def data_files(store: Store, reader: Any) -> list[str]:
    """The data files of the destination's committed versions, as the referee reads them: a
    table's referenced files, the commit records' files of a committer that writes in place,
    else every visible file."""
    from .tables import writes_tables

    if writes_tables(reader):
        return sorted(reader.referenced_files())
    if getattr(reader, "writes_in_place", False):
        from ..commit.direct.committer import list_committed

        return sorted(list_committed(store))
    return inv.visible_files(store)


def related(a: str, b: str) -> bool:
    """Whether one of two paths is the other or lies under it."""
    return a == b or paths.is_under(a, b) or paths.is_under(b, a)


def sharing_tag(directory: str) -> str:
    """Another job directory whose name has the same first 8 characters as `directory`'s."""
    name = paths.name(directory)
    rest = "".join(("1" if c == "0" else "0") if c.isalnum() else c for c in name[8:])
    return paths.join(paths.parent(directory), name[:8] + rest)


@dataclass
class Committed:
    """Job E as the forger finds it: what a reader sees, the data files its version
    references, its marker directory and the records (not markers) it kept there."""

    earlier: inv.Snapshot
    files: list[str]
    directory: str
    job_uuid: str
    records: dict[str, bytes]


class Forgery:
    """The schedules of one committer on one store."""

    def __init__(
        self, committer: str, stores: ScenarioStores, options: dict[str, Any], seed: int
    ) -> None:
        self.committer, self.stores, self.options = committer, stores, options
        self.rng = random.Random(f"{seed}:forged")
        self.left: list[str] = []  # forged directories cleanup refused, left to their owner

    def reader(self, store: Store) -> Any:
        return make_committer(self.committer, store, allow_unsafe_rename=True, **self.options)

    def committed(self, url: str) -> Committed:
        """Job E, committed: what a reader sees, the data files its version references, its
        marker directory (as its committer names it) and the records it kept there."""
        store = quiet_store(url)
        seen: list[str] = []
        records: dict[str, bytes] = {}

        def note(job: Any) -> None:
            directory = self.reader(store).job_dir(job)
            seen.append(directory)
            for st in store.walk(directory):
                if not MARKER.search(st.path):
                    records[st.path] = store.read_bytes(st.path)

        uuid = seeded_uuid(self.rng)
        out = run_reference(self.committer, store, "append", self.options, uuid, note)
        if not out.committed:
            raise DataferryError(
                f"{self.committer} cannot commit the reference job into an empty destination "
                f"({store.full_url()}): {out.status} {out.error}"
            )
        files = data_files(store, self.reader(store))
        return Committed(inv.snapshot(store), files, seen[0], uuid, records)

    def made_up_dir(self, store: Store) -> str:
        reader = self.reader(store)
        return reader.job_dir(reader.new_job(new_job_id(job_uuid=seeded_uuid(self.rng))))

    def scenario(self, kind: str, schedule: str, mode: str) -> Scenario:
        return Scenario(
            index=None, when="none", kind=kind, mode=mode, destination=EXISTING, schedule=schedule
        )

    def lost(self, store: Store, files: list[str], when: str) -> list[str]:
        gone = [f for f in files if not store.exists(f)]
        if not gone:
            return []
        return [
            f"{inv.EARLIER_KEPT}: {when}: {len(gone)} of the {len(files)} data files the "
            f"committed version references were deleted, e.g. {gone[0]}"
        ]

    def cleanup(self, store: Store, problems: list[str], when: str, refused: str = "") -> set[str]:
        """`cleanup --older-than 0`; the directories it took for dataferry jobs'. A forged
        record that cleanup refuses to act on, leaving its directory (`refused`), is the safe
        answer: not reported."""
        from ..commit.job.cleanup import cleanup_destination

        try:
            report = cleanup_destination(store, older_than_s=0.0)
        except (DataferryError, OSError) as e:
            problems.append(f"{inv.NO_LEFTOVERS}: {when}: dataferry cleanup failed: {e}")
            return set()
        for path, why in report.failed.items():
            if refused and related(path, refused):
                self.left.append(path)
                continue
            problems.append(f"{inv.NO_LEFTOVERS}: {when}: cleanup left {path}: {why[:300]}")
        return set(report.found)

    def next_job(self, store: Store, mode: str, problems: list[str]) -> tuple[str, str]:
        """The next job into the destination; (its uuid, its status)."""
        out = run_reference(self.committer, store, mode, self.options, seeded_uuid(self.rng))
        if not out.committed:
            problems.append(
                f"{inv.WRITE_MODE}: the next job in mode {mode!r} after the forgery did not "
                f"commit: {out.status} {out.error}"
            )
        return out.job_uuid, out.status

    def finish(
        self,
        store: Store,
        scenario: Scenario,
        job: tuple[str, str],
        e: Committed,
        forged: str,
        mode: str = "append",
        refused: str = "",
    ) -> None:
        """The destination after the next job and a last cleanup, against its write mode. A
        forged directory that cleanup does not take for a dataferry job's (Hudi's without a
        dataferry record is Java Hudi's) is left to its owner: removed here, as its owner
        would, before the leftovers are checked."""
        found = self.cleanup(store, scenario.problems, "after the next job", refused)
        for path in {*self.left, *([forged] if forged not in found else [])}:
            if path and store.exists(path):
                store.delete(path, recursive=True)
                parent = paths.parent(path)
                while parent and store.delete_if_empty(parent):
                    parent = paths.parent(parent)
        self.left.clear()
        if mode != "overwrite":
            scenario.problems += self.lost(store, e.files, "after the next job")
        allow = allowed_leftovers(self.reader(store))
        scenario.problems += check_outcome(store, job[0], mode, e.earlier, job[1], allow)
        scenario.outcome = job[1]

    def after_cleanup(
        self, store: Store, e: Committed, scenario: Scenario, refused: str = ""
    ) -> None:
        self.cleanup(store, scenario.problems, "cleanup", refused)
        scenario.problems += self.lost(store, e.files, "after cleanup")
        scenario.problems += inv.check_kept(store, e.earlier, "after cleanup")

    # --- the schedules ------------------------------------------------------------------------

    def after_commit(self, place: str, action: str, style: str = FILES) -> Scenario | None:
        """Forged markers in a job directory that is not the live job's (None: the action
        needs an old directory, which this store cannot have)."""
        url = self.stores.url(f"fm-{place}-{action}")
        mode = "overwrite" if action == "overwrite" else "append"
        then = action.replace("_", " ")
        scenario = self.scenario(KIND, f"{place} directory, {style}, then {then}", mode)
        e = self.committed(url)
        store = quiet_store(url)
        directory = {
            "made_up": lambda: self.made_up_dir(store),
            "its_tag": lambda: sharing_tag(e.directory),
            "the_job": lambda: e.directory,
        }[place]()
        forge(store, directory, e.files, style)
        if action == "cleanup":
            self.after_cleanup(store, e, scenario)
        elif not age(url, directory):
            discard(store)
            return None
        self.finish(
            store, scenario, self.next_job(store, mode, scenario.problems), e, directory, mode
        )
        discard(store)
        return scenario

    def live(self, moment: str, style: str = FILES) -> Scenario:
        """Forged markers in the live job's own marker directory as it commits."""
        url = self.stores.url(f"fm-live-{moment}-{style[:3]}")
        when = moment.replace("_", " ")
        scenario = self.scenario(KIND, f"live job's directory, {style}, {when}", "append")
        e = self.committed(url)
        store = quiet_store(url)
        forged: list[str] = []

        def forge_once(directory: str) -> None:
            if not forged:
                forge(store, directory, e.files, style)
                forged.append(directory)

        rules: list[FaultRule] = []
        before: Callable[[Any], None] | None = None
        if moment == "before_the_plan":

            def before(job: Any) -> None:
                forge_once(self.reader(store).job_dir(job))

        else:
            rules.append(
                FaultRule(
                    action="callback",
                    path_glob="*_commit_intent.json",
                    callback=lambda _i, _op, path: forge_once(paths.parent(path)),
                )
            )
        job_store = open_store(url, faults=rules, latency_scale=0.0)
        uuid = seeded_uuid(self.rng)
        out = run_reference(self.committer, job_store, "append", self.options, uuid, before)
        if not forged:
            scenario.problems.append(
                f"{inv.WRITE_MODE}: the forgery never ran (the job's commit never reached "
                f"{moment.replace('_', ' ')}): {out.status} {out.error}"
            )
        if not out.committed:
            scenario.problems.append(
                f"{inv.WRITE_MODE}: the job with forged markers in its own directory did not "
                f"commit: {out.status} {out.error}"
            )
        self.finish(store, scenario, (uuid, out.status), e, forged[0] if forged else "")
        discard(store)
        return scenario

    def intent(self, action: str = "cleanup") -> Scenario | None:
        """A forged intent record in a made-up job's directory, replacing E's data files; then
        cleanup and the next job, or (`next_job`) the next job once the directory is two
        hours old (None: this store cannot age it)."""
        from ..commit.records.intent import Intent, save_intent

        url = self.stores.url(f"fr-intent-{action}")
        then = action.replace("_", " ")
        scenario = self.scenario(
            RECORDS_KIND,
            f"made-up job's intent record replacing the committed files, then {then}",
            "append",
        )
        e = self.committed(url)
        store = quiet_store(url)
        reader = self.reader(store)
        job = reader.new_job(new_job_id(job_uuid=seeded_uuid(self.rng)))
        record = Intent(
            job_id=str(job.job_id),
            job_uuid=job.job_uuid,
            committer=reader.name,
            mode="overwrite",
            payload={
                "files": [],
                "stray": [],
                "marked": 0,
                "moves": [],
                "bytes": 0,
                "filenames": [],
            },
            replace=e.files,
        )
        job_dir = reader.job_dir(job)
        save_intent(store, job_dir, record)
        if action == "cleanup":
            self.after_cleanup(store, e, scenario, job_dir)
        elif not age(url, job_dir):
            discard(store)
            return None
        next_job = self.next_job(store, "append", scenario.problems)
        self.finish(store, scenario, next_job, e, job_dir, refused=job_dir)
        discard(store)
        return scenario

    def job_records(self) -> Scenario | None:
        """E's own directory again, with the records E kept there (not its markers) naming a
        made-up job, and markers naming E's files (None: E kept no records there)."""
        url = self.stores.url("fr-job")
        scenario = self.scenario(
            RECORDS_KIND, "committed job's directory, its records naming a made-up job", "append"
        )
        e = self.committed(url)
        store = quiet_store(url)
        if not e.records:
            discard(store)
            return None
        other = seeded_uuid(self.rng).encode()
        for path, data in e.records.items():
            store.write_bytes(path, data.replace(e.job_uuid.encode(), other))
        forge(store, e.directory, e.files)
        self.after_cleanup(store, e, scenario)
        job = self.next_job(store, "append", scenario.problems)
        self.finish(store, scenario, job, e, e.directory)
        discard(store)
        return scenario


def run_forged(
    committer: str,
    stores: ScenarioStores,
    options: dict[str, Any],
    *,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> tuple[list[Scenario], dict[str, str]]:
    """Every forged-marker and forged-record schedule for `committer`, with what was skipped
    and why (a committer without markers; the aged directories on a store that is not a
    local directory; the job records of a committer that keeps none in a job's directory)."""
    forgery = Forgery(committer, stores, options, seed)
    runs: list[tuple[str, Callable[[], Scenario | None]]] = [
        ("intent", forgery.intent),
        ("intent_next_job", lambda: forgery.intent("next_job")),
    ]
    skipped: dict[str, str] = {}
    if markers_root(committer) is None:  # the forged intent record needs no markers
        skipped[KIND] = f"{committer} keeps no write markers"
    else:
        runs += [
            *((a, lambda p=p, a=a: forgery.after_commit(p, a)) for p in PLACES for a in ACTIONS),
            *(("live", lambda m=m: forgery.live(m)) for m in LIVE_MOMENTS),
            ("cleanup", lambda: forgery.after_commit("made_up", "cleanup", SERVICE)),
            ("live", lambda: forgery.live("before_the_plan", SERVICE)),
            ("job_records", forgery.job_records),
        ]
    why = {
        "next_job": f"{stores.base} is not a local directory: a forged directory cannot be "
        "made old, so only cleanup --older-than 0 meets it",
        "job_records": f"{committer} keeps no records beside its markers in a job's directory",
    }
    why["overwrite"] = why["intent_next_job"] = why["next_job"]
    out: list[Scenario] = []
    for name, run in runs:
        s = run()
        if s is None:
            kind = RECORDS_KIND if name in ("job_records", "intent_next_job") else KIND
            skipped[f"{kind} {name}"] = why[name]
        else:
            out.append(s)
        if progress:
            progress(len(runs))
    return out, skipped
