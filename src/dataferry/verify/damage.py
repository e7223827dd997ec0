"""Damaged records and links in the destination.

What it models: a disk or a hand that damaged what dataferry keeps on the store (a claim
written half way, with wrong field types, a directory where the claim should be, a heartbeat
in the future; an intent record cut short after its commit was decided), and a destination
where a user (or an attacker) put symbolic links to directories elsewhere.

`damaged_record`: a destination holding a committed data set gets one damaged claim; then a
job in mode `overwrite` (a driver in a child process, so a hang is seen and ended) and
`cleanup --older-than 0` run. Each must do its work, or fail with the library's own error
(`named_error`: no TypeError, KeyError or decode error, no hang), and lose nothing (the
earlier data set is kept unless the job committed in its place). For the intent record, a
job in `overwrite` and one in `append` are killed half way through applying their decided
commit, the record is cut to half its bytes, and `cleanup --older-than 0` runs: either it
finishes the commit (all of it visible, `_SUCCESS`), or it says it cannot, naming why, and
every file of the job is still on the store (`no_data_loss`); a rollback that leaves the
destination without the earlier data or the job's is a loss.

`links` (stores backed by a local directory: local, `sim:`): a canary directory outside the
destination (files and a subdirectory, two days old) is linked from inside it as
`_temporary`, `_dataferry`, a visible partition `part=p9`, and `_SUCCESS` (to a file of it);
then a plain `cleanup`, `cleanup --older-than 0`, a job in `overwrite` and one in `append`
run. The canary must be byte for byte as it was (`outside_untouched`); each job commits or
fails with a named error. Then, as a user told of the link would, the link is removed and
`cleanup --older-than 0` runs: the job is all there or not at all, the earlier data kept unless
an `overwrite` took effect, nothing left behind.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from ..commit.records.claim import MIN_CLAIM_TIMEOUT_S
from ..errors import DataferryError
from . import invariants as inv
from .child import ChildSpec, carry, run_child
from .earlier import write_earlier
from .harness import (
    EXISTING,
    Scenario,
    ScenarioStores,
    check_outcome,
    discard,
    error_chain,
    leftovers_allowed,
    quiet_store,
    run_reference,
    seeded_uuid,
)
from .race_checks import final_cleanup
from .races import points_of
from .reference import FILES_PER_TASK, TASKS, file_bytes
from .scenario import run_threads
from .tables import parse_table_file

CHILD_TIMEOUT_S = 30.0


def child_limit(job_s: float) -> float:
    """How long a child's job may take before it counts as hung: CHILD_TIMEOUT_S, or three
    times the same job's run on this store just before (`job_s`) when that is longer (on
    Azurite under load a whole job took longer than 30 s; slow is not hung)."""
    return max(CHILD_TIMEOUT_S, 3 * job_s)


CLAIM_DAMAGE = (
    "claim_wrong_types",
    "claim_truncated",
    "claim_empty",
    "claim_directory",
    "claim_future_heartbeat",
)
INTENT_MODES = ("overwrite", "append")
LINK_PLACES = ("_temporary", "_dataferry", "part=p9", "_SUCCESS")
LINK_ACTIONS = ("cleanup", "cleanup_now", "overwrite", "append")
OLD_S = 2 * 86400.0


def _claim_file() -> str:
    from ..commit.records.hold import CLAIM_FILE

    return CLAIM_FILE


def _claim_fields(committer: str, job_uuid: str, alive: float) -> dict[str, Any]:
    """A claim record of a job on another host, as today's records are written."""
    return {
        "job_id": "job_202601010000000000_0001",
        "job_uuid": job_uuid,
        "committer": committer,
        "mode": "overwrite",
        "job_dir": "",
        "attempt": 0,
        "host": "elsewhere.invalid",
        "pid": 1,
        "pid_start": "",
        "acquired": alive,
        "alive": alive,
        "state": "committing",
    }


def damage_claim(store: Any, how: str, committer: str, job_uuid: str) -> None:
    path = _claim_file()
    now = time.time()
    if how == "claim_wrong_types":
        bad = {
            "job_id": 7,
            "job_uuid": None,
            "committer": ["x"],
            "mode": 1,
            "job_dir": {"a": 1},
            "attempt": "zero",
            "host": 5,
            "pid": "one",
            "pid_start": 3,
            "acquired": "yesterday",
            "alive": "soon",
            "state": 2,
        }
        store.write_bytes(path, json.dumps(bad).encode())
    elif how == "claim_truncated":
        raw = json.dumps(_claim_fields(committer, job_uuid, now)).encode()
        store.write_bytes(path, raw[: len(raw) // 2])
    elif how == "claim_empty":
        store.write_bytes(path, b"")
    elif how == "claim_directory":
        store.write_bytes(f"{path}/inside", b"not a claim")
    elif how == "claim_future_heartbeat":
        raw = json.dumps(_claim_fields(committer, job_uuid, now + 10 * 365 * 86400.0))
        store.write_bytes(path, raw.encode())
    else:
        raise ValueError(how)


def _named(what: str, status: str, detail: str, report: dict[str, Any]) -> list[str]:
    """named_error for a child's job or cleanup: it ended, and with the library's error."""
    if status in ("timeout", "child_error"):
        return [f"{inv.NAMED}: {what} {status}: {detail[:200]}"]
    unnamed = report.get("unnamed") or ""
    if unnamed:
        return [f"{inv.NAMED}: {what} failed with {unnamed} ({detail[:200]})"]
    return []


def job_files_anywhere(store: Any, job_uuid: str) -> bool:
    """Every task of the job has one attempt whose files are all somewhere on the store
    (visible, or in a job or staging directory), by their bytes; or, on a store with
    multipart uploads, uploads are still pending (their bytes cannot be read)."""
    pattern = re.compile(rb"^task=(\d+) file=(\d+) attempt=(\d+) job=(\S+)\n")
    found: dict[int, dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))
    for st in store.walk(""):
        try:
            data = store.read_bytes(st.path)
        except Exception:
            continue
        table_file = parse_table_file(data)  # a table committer's reference files: Parquet
        if table_file is not None:
            task, file, attempt, job = table_file
            if job == job_uuid:
                found[task][attempt].add(file)
            continue
        m = pattern.match(data)
        if not m or m.group(4).decode() != job_uuid:
            continue
        task, file, attempt = (int(g) for g in m.groups()[:3])
        if data == file_bytes(task, file, attempt, job_uuid):
            found[task][attempt].add(file)
    complete = all(
        any(len(files) == FILES_PER_TASK for files in found.get(t, {}).values())
        for t in range(TASKS)
    )
    if complete:
        return True
    return bool(store.capabilities.multipart_upload and store.list_uploads(""))


def local_dir(url: str) -> str | None:
    """The local directory behind a destination URL, or None (an object store)."""
    if url.startswith("sim:"):
        parts = url.split(":", 2)
        return parts[2] if len(parts) == 3 else None
    if url.startswith("file://"):
        return url[len("file://") :]
    return None if "://" in url else url


def canary_snapshot(root: str) -> dict[str, bytes | None]:
    """Every entry under `root` (links as themselves): file bytes, None for a directory."""
    out: dict[str, bytes | None] = {}
    for dirpath, dirs, files in os.walk(root):
        for d in dirs:
            out[os.path.relpath(os.path.join(dirpath, d), root) + "/"] = None
        for f in files:
            full = os.path.join(dirpath, f)
            with open(full, "rb") as fh:
                out[os.path.relpath(full, root)] = fh.read()
    return out


def make_canary(root: str) -> dict[str, bytes | None]:
    os.makedirs(os.path.join(root, "sub"), exist_ok=True)
    for rel, data in (
        ("keep.txt", b"outside the destination\n"),
        ("sub/deep.dat", b"x" * 100),
        ("success.json", b'{"name": "not yours"}'),
        ("part=p0/t0-f0-a0.dat", b"a canary, not output\n"),
    ):
        full = os.path.join(root, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as fh:
            fh.write(data)
    old = time.time() - OLD_S
    for dirpath, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            os.utime(os.path.join(dirpath, name), (old, old))
    os.utime(root, (old, old))
    return canary_snapshot(root)


class Damage:
    """The damaged-record and link schedules of one committer on one store."""

    def __init__(
        self,
        committer: str,
        stores: ScenarioStores,
        options: dict[str, Any],
        *,
        seed: int = 0,
        preload: tuple[str, ...] = (),
    ) -> None:
        self.committer, self.stores, self.options = committer, stores, options
        self.preload = tuple(preload)
        self.rng = random.Random(f"{seed}:damage")

    def _spec(
        self, url: str, mode: str, job_uuid: str, options: dict[str, Any] | None = None, **kw: Any
    ) -> ChildSpec:
        opts = self.options if options is None else options
        return ChildSpec(self.committer, url, mode, opts, job_uuid, **kw, **carry(self.preload))

    def _cleanup(self, url: str) -> tuple[str, str, dict[str, Any]]:
        spec = self._spec(url, "append", "", action="cleanup")
        return run_child(spec, CHILD_TIMEOUT_S)

    def claim(self, how: str) -> Scenario:
        url = self.stores.url(f"dr-{how}")
        earlier_uuid, job_uuid, other = (seeded_uuid(self.rng) for _ in range(3))
        began = time.monotonic()
        earlier = write_earlier(self.committer, url, self.options, earlier_uuid)
        limit = child_limit(time.monotonic() - began)
        plain = quiet_store(url)
        damage_claim(plain, how, self.committer, other)
        problems: list[str] = []
        # a claim that looks live makes a waiting commit (an `append`, and Hive's load, which
        # applies every insert as one) wait up to its claim timeout by design: the shortest
        # one, so the wait ends, and is judged, well inside the child's time
        waiting = {**self.options, "claim_timeout_s": MIN_CLAIM_TIMEOUT_S}
        spec = self._spec(url, "overwrite", job_uuid, waiting)
        status, detail, report = run_child(spec, limit)
        problems += _named("the job", status, detail, report)
        if status == "committed":
            allow = leftovers_allowed(self.committer, url, "overwrite", self.options)
            problems += [
                p
                for p in check_outcome(plain, job_uuid, "overwrite", earlier, status, allow)
                if not p.startswith(inv.NO_LEFTOVERS)  # the damaged claim is the user's
            ]
        else:  # giving way to a claim it cannot read is fine; changing the data is not
            problems += inv.check_kept(plain, earlier)
            mine = inv.files_of_job(plain, job_uuid)
            if mine:
                problems.append(
                    f"{inv.NOTHING_OF_FAILED}: the {status} job left {len(mine)} files "
                    f"visible, e.g. {mine[0]}"
                )
        before = inv.snapshot(plain)
        c_status, c_detail, c_report = self._cleanup(url)
        problems += _named("cleanup", c_status, c_detail, c_report)
        changed = inv.diff(before, inv.snapshot(plain))
        if changed:
            problems.append(f"{inv.EARLIER_KEPT}: cleanup changed what readers see: {changed}")
        scenario = Scenario(
            index=None,
            when="none",
            kind="damaged_record",
            mode="overwrite",
            destination=EXISTING,
            outcome=f"job {status}, cleanup {c_status}",
            schedule=f"{how}; job: {detail[:160]}"
            + (f"; cleanup: {c_detail[:160]}" if c_detail else ""),
            problems=problems,
        )
        discard(plain)
        return scenario

    def intent(self, mode: str) -> Scenario:
        from ..commit.records.intent import INTENT_FILE

        earlier_uuid, job_uuid = seeded_uuid(self.rng), seeded_uuid(self.rng)
        base = self.stores.url(f"dr-intent-{mode}-base")
        write_earlier(self.committer, base, self.options, earlier_uuid)
        status, detail, report = run_child(self._spec(base, mode, job_uuid, trace=True))
        discard(quiet_store(base))
        points, _ = points_of(report.get("trace") or [], report.get("commit_end") or 0)
        scenario = Scenario(
            index=None,
            when="none",
            kind="damaged_record",
            mode=mode,
            destination=EXISTING,
            schedule="intent_truncated",
        )
        index = points.get("applying", points.get("decided"))
        if status != "committed" or index is None:
            scenario.outcome = f"baseline {status}"
            scenario.schedule += f": no decided commit to damage ({detail[:120]})"
            if status != "committed":
                scenario.problems.append(
                    f"{inv.WRITE_MODE}: the job alone, in mode {mode!r} over data, ended "
                    f"{status}: {detail[:200]}"
                )
            return scenario
        url = self.stores.url(f"dr-intent-{mode}")
        earlier = write_earlier(self.committer, url, self.options, earlier_uuid)
        status, detail, _ = run_child(self._spec(url, mode, job_uuid, kill_index=index))
        plain = quiet_store(url)
        cut = []
        for st in plain.walk(""):
            if st.path.endswith(INTENT_FILE):
                raw = plain.read_bytes(st.path)
                plain.write_bytes(st.path, raw[: len(raw) // 2])
                cut.append(st.path)
        c_status, c_detail, c_report = self._cleanup(url)
        problems = _named("cleanup", c_status, c_detail, c_report)
        if c_status == "done":  # cleanup says it finished or undid the job: check it all
            allow = leftovers_allowed(self.committer, url, mode, self.options)
            problems += check_outcome(plain, job_uuid, mode, earlier, "killed", allow)
            if not inv.files_of_job(plain, job_uuid) and (
                mode == "overwrite" and inv.check_kept(plain, earlier)
            ):
                problems.append(
                    f"{inv.NO_LOSS}: the decided overwrite was rolled back after it replaced "
                    "the earlier data: neither data set is there"
                )
        elif not job_files_anywhere(plain, job_uuid):
            problems.append(
                f"{inv.NO_LOSS}: cleanup could not finish the decided commit ({c_detail[:160]}) "
                "and the job's files are no longer all on the store"
            )
        if mode == "append":
            problems += inv.check_kept(plain, earlier)
        scenario.index, scenario.when = index, "before"
        scenario.outcome = f"holder {status}, cleanup {c_status}"
        scenario.schedule += f": killed at op {index}, {len(cut)} record(s) cut to half" + (
            f"; cleanup: {c_detail[:160]}" if c_detail else ""
        )
        scenario.problems = problems
        discard(plain)
        return scenario

    def link(self, place: str, action: str) -> Scenario:
        from ..commit.job.cleanup import cleanup_destination

        url = self.stores.url(f"ln-{place.strip('_=')}-{action}")
        scenario = Scenario(
            index=None,
            when="none",
            kind="links",
            mode=action if action in ("overwrite", "append") else "",
            destination=EXISTING,
            schedule=f"{place} -> a directory outside; {action.replace('_', ' ')}",
        )
        root = local_dir(url)
        earlier = write_earlier(self.committer, url, self.options, seeded_uuid(self.rng))
        plain = quiet_store(url)
        assert root is not None
        canary_root = f"{root}.canary"
        canary = make_canary(canary_root)
        link = os.path.join(root, place)
        if os.path.lexists(link):
            (os.remove if not os.path.isdir(link) else shutil.rmtree)(link)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        target = os.path.join(canary_root, "success.json") if place == "_SUCCESS" else canary_root
        os.symlink(target, link)
        os.utime(link, (time.time() - OLD_S,) * 2, follow_symlinks=False)
        problems: list[str] = []
        job_uuid = seeded_uuid(self.rng)
        status = ""
        try:
            if action.startswith("cleanup"):
                report = cleanup_destination(
                    plain, older_than_s=0.0 if action == "cleanup_now" else 3600.0
                )
                status = "cleanup failed" if report.failed else "cleanup done"
            else:
                out = run_reference(self.committer, plain, action, self.options, job_uuid)
                status = out.status
                if out.unnamed:
                    problems.append(f"{inv.NAMED}: the job failed with {out.unnamed}: {out.error}")
                scenario.outcome = out.status
        except DataferryError as e:
            status = f"failed:{type(e).__name__}"
            _, unnamed = error_chain(e)
            if unnamed:
                problems.append(f"{inv.NAMED}: {action} failed with {unnamed}: {e}")
        except Exception as e:
            status = f"failed:{type(e).__name__}"
            problems.append(f"{inv.NAMED}: {action} raised {type(e).__name__}: {e}")
        now = canary_snapshot(canary_root)
        changed = inv.diff(
            {k: v or b"" for k, v in canary.items()}, {k: v or b"" for k, v in now.items()}
        )
        if changed:
            problems.append(f"{inv.OUTSIDE}: the linked directory outside changed: {changed}")
        if os.path.islink(link):
            os.unlink(link)  # the user, told of the link, removes it and runs cleanup
        scenario.outcome = status
        try:
            if action in ("overwrite", "append"):
                final_cleanup(url, problems)
                # refused at the door for the link (not for its write mode): as a failed job,
                # nothing of it may be visible and the earlier data stays as it was
                reported = "committed" if status == "committed" else "failed"
                allow = leftovers_allowed(self.committer, url, action, self.options)
                problems += check_outcome(plain, job_uuid, action, earlier, reported, allow)
            else:
                problems += inv.check_kept(plain, earlier)
        except Exception as e:
            problems.append(f"{inv.EARLIER_KEPT}: the destination cannot be read: {e!r}")
        scenario.problems = problems
        discard(plain)
        shutil.rmtree(canary_root, ignore_errors=True)
        return scenario

    def plan(self, kinds: tuple[str, ...], linkable: bool) -> list[Callable[[], Scenario]]:
        runs: list[Callable[[], Scenario]] = []
        if "damaged_record" in kinds:
            runs += [lambda h=h: self.claim(h) for h in CLAIM_DAMAGE]
            runs += [lambda m=m: self.intent(m) for m in INTENT_MODES]
        if "links" in kinds and linkable:
            runs += [lambda p=p, a=a: self.link(p, a) for p in LINK_PLACES for a in LINK_ACTIONS]
        return runs


def run_damage(
    committer: str,
    stores: ScenarioStores,
    options: dict[str, Any],
    *,
    kinds: tuple[str, ...] = ("damaged_record", "links"),
    seed: int = 0,
    preload: tuple[str, ...] = (),
    workers: int = 2,
    progress: Callable[[int], None] | None = None,
) -> tuple[list[Scenario], dict[str, str]]:
    """The damaged records and the links (on a store backed by a local directory); returns
    the scenarios and, per kind that could not run, why."""
    skipped: dict[str, str] = {}
    linkable = local_dir(stores.base) is not None
    if "links" in kinds and not linkable:
        skipped["links"] = f"{stores.base} is not a local directory: no symbolic links there"
    damage = Damage(committer, stores, options, seed=seed, preload=preload)
    runs = damage.plan(kinds, linkable)
    return run_threads(runs, workers, "damage", progress), skipped
