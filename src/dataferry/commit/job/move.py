"""The one resilient move every renaming committer uses (manifest's rename stage, v1's merge,
the Hive load; the table committers next): a rename that finishes or is found finished.

`move(store, source, destination, size=..., etag=...)` renames, and only when the store's
answer is not a plain success does it look at what is there:

- AmbiguousOutcome (a timeout, a reset): the destination with the source's etag (where renames
  keep etags), or, elsewhere, the source gone and the destination of its size, means the
  request took effect ("recovered", as Hadoop's ABFS resilient rename does); the source still
  there and no destination means it did not, and it is sent again; anything else fails.
- Throttled: backs off and tries again, `attempts` tries in all; every try first takes its
  slot from the committer's `Pacer` (the role of `fs.azure.io.rate.limit`).
- NotFound: the source gone and the destination holding it means it moved before (a resumed
  commit); the source there and no destination means the destination's parent is missing:
  made, and renamed; the source there and part of it at the destination means something
  changed the source while it moved: it fails, never merging the two.
- AlreadyExists: the source gone and the destination holding it again means moved before; the
  destination holding the source's bytes (etag first, the bytes when etags cannot tell) is a
  copy-then-delete rename cut short after its copy, finished by deleting the source; two
  directories (`merge_dirs`) are a directory rename cut short, finished child by child.
  Anything else is someone else's file in the way: DestinationTaken.

Without size and etag (directories, and files whose size the caller did not record) "holding
it" means only "there". Failures are JobCommitError naming source and destination.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ...errors import AlreadyExists, AmbiguousOutcome, JobCommitError, NotFound, Throttled
from ...stats import IOStatistics
from ...store import FileStatus, Store, paths
from ...store.pacing import Pacer

How = Literal["renamed", "recovered", "finished", "found"]
Verdict = Literal["done", "retry", "lost"]


@dataclass(frozen=True)
class MoveOutcome:
    """How the move ended: `renamed` (plainly), `recovered` (an unknown answer had taken
    effect), `finished` (a cut-short copy-rename completed here), `found` (moved before)."""

    how: How

    @property
    def moved(self) -> bool:
        """This call (or its ambiguously answered request) moved it."""
        return self.how != "found"

    @property
    def recovered(self) -> bool:
        """Not a plain rename: found done, resolved or finished."""
        return self.how != "renamed"


RENAMED = MoveOutcome("renamed")
PLAIN_ANSWERS = (AmbiguousOutcome, Throttled, NotFound, AlreadyExists)
"""A rename's failures that `move` resolves: a caller renaming plainly hands these over."""


class DestinationTaken(JobCommitError):
    """Another file stands at the destination and the source still waits to move there."""


def move(
    store: Store,
    source: str,
    destination: str,
    *,
    size: int | None = None,
    etag: str | None = None,
    attempts: int = 3,
    pacer: Pacer | None = None,
    stats: IOStatistics | None = None,
    replace: bool = False,
    merge_dirs: bool = False,
    context: str = "",
    resolve: Callable[[], Verdict] | None = None,
    answered: Exception | None = None,
) -> MoveOutcome:
    """Move `source` to `destination`, resolving what the store's answer leaves open.

    size, etag: the source's, when the caller recorded them (a file), else None.
    attempts: tries of the rename when throttled or not done after an unknown outcome.
    replace: first delete what is at the destination, only while the source still exists (a
        resumed move keeps what it moved), as Hadoop's mergePaths replaces a file in the way.
    merge_dirs: a directory at the destination is finished by merging the source's children.
    context: prefixed to error messages ("load step", "task attempt ...").
    resolve: judges an unknown outcome instead of `ambiguous_verdict` (a committer's seam).
    answered: the store's answer to the plain rename the caller has sent already (a batch
        renames plainly, with nothing built per file, and hands here the first answer that is
        not a success), judged as this call's own first try.
    Counters on `stats`: commit_file_rename_ambiguous, commit_file_rename_recovered_by_size,
    commit_file_rename_throttled; waits for the pacer's slot in store_io_rate_limited (ms)."""
    if answered is not None and (replace or (pacer is not None and pacer.interval)):
        raise ValueError("a plain rename's answer is judged without replace or pacing")
    if replace and store.exists(source):
        store.delete(destination, recursive=True)
    first = answered
    if first is None and (pacer is None or not pacer.interval):
        # the plain rename first, with nothing built for it: at 100,000 files a commit's
        # rename stage is this line, and every object made per file shows in its time
        try:
            store.rename(source, destination)
            return RENAMED
        except PLAIN_ANSWERS as e:
            first = e
    m = _Move(store, source, destination, size, etag, stats or IOStatistics(), context)
    tries = 0
    made_parent = False
    while True:
        tries += 1
        if pacer is not None and pacer.interval:
            m.stats.add_sample("store_io_rate_limited", pacer.acquire() * 1000.0)
        try:
            if first is not None:  # the plain rename's answer, judged here
                e, first = first, None
                raise e
            store.rename(source, destination)
            return RENAMED
        except AmbiguousOutcome:
            m.stats.incr("commit_file_rename_ambiguous")
            verdict = m.verdict() if resolve is None else resolve()
            if verdict == "done":
                return MoveOutcome("recovered")
            if verdict == "lost":
                raise m.lost() from None
        except Throttled:
            m.stats.incr("commit_file_rename_throttled")
            if tries < attempts:
                time.sleep(min(1.0, 0.05 * 2**tries))
        except NotFound:
            src, dst = m.stat(source), m.stat(destination)
            if src is None:
                if dst is not None and m.holds_source(dst):
                    return MoveOutcome("found")  # moved by the run that died
                raise m.vanished(dst) from None
            if dst is not None:
                # part of the source moved, then part of it vanished: something else changed
                # it meanwhile (a zombie attempt replacing a committed task directory on a
                # store whose directory rename is a copy per file); merging would mix the two
                raise JobCommitError(
                    f"{m.prefix}cannot move {m.src_url} to {m.dst_url}: the source changed "
                    "while it moved (part of it is at the destination, part vanished)"
                ) from None
            if made_parent:
                raise JobCommitError(
                    f"{m.prefix}cannot move {m.src_url} to {m.dst_url}: the store says not "
                    "found, although the source and the destination's parent are there"
                ) from None
            store.mkdirs(paths.parent(destination))  # the destination's parent is missing
            made_parent, tries = True, tries - 1
        except AlreadyExists:
            outcome = m.finish_taken(attempts, pacer, merge_dirs)
            if outcome is not None:
                return outcome
        if tries >= attempts:
            raise JobCommitError(
                f"{m.prefix}rename of {m.src_url} to {m.dst_url} failed {attempts} times "
                "(throttled, or not done after an unknown outcome)"
            )


def ambiguous_verdict(
    store: Store,
    source: str,
    destination: str,
    *,
    size: int | None = None,
    etag: str | None = None,
    stats: IOStatistics | None = None,
) -> Verdict:
    """What an unknown rename outcome was: 'done' (the destination has the source's etag where
    renames keep etags; elsewhere the source is gone and the destination has its size, or is
    there when no size is known), 'retry' (the source is there and the destination not), or
    'lost' (neither)."""
    return _Move(store, source, destination, size, etag, stats or IOStatistics(), "").verdict()


class _Move:
    def __init__(
        self,
        store: Store,
        source: str,
        destination: str,
        size: int | None,
        etag: str | None,
        stats: IOStatistics,
        context: str,
    ) -> None:
        self.store, self.source, self.destination = store, source, destination
        self.size, self.etag, self.stats = size, etag, stats
        self.context, self.prefix = context, f"{context}: " if context else ""

    @property
    def src_url(self) -> str:
        return self.store.full_url(self.source)

    @property
    def dst_url(self) -> str:
        return self.store.full_url(self.destination)

    def stat(self, path: str) -> FileStatus | None:
        try:
            return self.store.stat(path)
        except NotFound:
            return None

    def _etag_decides(self, dst: FileStatus) -> bool:
        return bool(self.etag and dst.etag and self.store.capabilities.etags_preserved_by_rename)

    def holds_source(self, dst: FileStatus) -> bool:
        """With the source gone: the destination is the source, moved (the same etag where
        renames keep etags, else the same size; without either, being there)."""
        if self.size is None and self.etag is None:
            return True
        if dst.is_dir:
            return False
        if self._etag_decides(dst):
            return dst.etag == self.etag
        if self.size is not None and dst.size == self.size:
            self.stats.incr("commit_file_rename_recovered_by_size")
            return True
        return False

    def verdict(self) -> Verdict:
        """'done' (the unknown request took effect), 'retry' (it did not), 'lost' (what is
        there cannot tell)."""
        dst, src = self.stat(self.destination), self.stat(self.source)
        if dst is not None:
            if self._etag_decides(dst) and dst.etag == self.etag:
                return "done"
            if src is None and self.holds_source(dst):
                return "done"
        if src is not None and dst is None:
            return "retry"
        return "lost"

    def lost(self) -> JobCommitError:
        src, dst = self.stat(self.source), self.stat(self.destination)
        now = "the source is " + ("gone" if src is None else "still there")
        now += " and the destination " + ("is missing" if dst is None else "does not match it")
        return JobCommitError(
            f"{self.prefix}rename of {self.src_url} to {self.dst_url} had an unknown outcome, "
            f"and now {now}"
        )

    def vanished(self, dst: FileStatus | None) -> JobCommitError:
        there = "does not exist" if dst is None else "does not hold it"
        return JobCommitError(
            f"{self.prefix}cannot move {self.src_url} to {self.dst_url}: the source has "
            f"vanished and the destination {there}"
        )

    def finish_taken(
        self, attempts: int, pacer: Pacer | None, merge_dirs: bool
    ) -> MoveOutcome | None:
        """The store said the destination exists. None: it has gone meanwhile (rename again)."""
        src, dst = self.stat(self.source), self.stat(self.destination)
        if src is None:
            if dst is not None and self.holds_source(dst):
                return MoveOutcome("found")
            raise self.vanished(dst)
        if dst is None:
            return None
        if src.is_dir and dst.is_dir and merge_dirs:
            # a directory rename that copied part of its files before it died: merge the rest
            for child in self.store.list(self.source):
                move(
                    self.store,
                    child.path,
                    paths.join(self.destination, child.name),
                    attempts=attempts,
                    pacer=pacer,
                    stats=self.stats,
                    merge_dirs=True,
                    context=self.context,
                )
            self.store.delete(self.source, recursive=True)
            return MoveOutcome("finished")
        if self._same_bytes(src, dst):
            self.store.delete(self.source)  # a copy-then-delete rename that died after its copy
            return MoveOutcome("finished")
        raise DestinationTaken(
            f"{self.prefix}cannot move {self.src_url} to {self.dst_url}: a file is already "
            "there (in the way), and the source is still waiting to move there"
        )

    def _same_bytes(self, src: FileStatus, dst: FileStatus) -> bool:
        """The destination holds the source's bytes: etags first, the bytes when they cannot
        tell (a copy gets an etag of its own on most stores)."""
        if src.is_dir or dst.is_dir or src.size != dst.size:
            return False
        if self.size is not None and dst.size != self.size:
            return False
        known = self.etag or src.etag
        if known and dst.etag == known:
            return True
        return self.store.read_bytes(self.destination) == self.store.read_bytes(self.source)
