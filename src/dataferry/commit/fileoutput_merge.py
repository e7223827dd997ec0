"""v1's merge planned: the moves of Hadoop's mergePaths, worked out before any is made.

The moves go into the job's intent record (`Move` rows), so a commit that dies part way is
finished by running the same list again. Planning asks the destination once per directory,
not once per file (`PlannedDestination`).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Annotated

import msgspec

from ..errors import NotFound
from ..store import FileStatus, Store, paths
from .protocol import NonEmpty
from .protocol.inflight import published_name

Flag = Annotated[int, msgspec.Meta(ge=0, le=1)]


class Move(msgspec.Struct, frozen=True, array_like=True, forbid_unknown_fields=True):
    """Move `src` to `dst`: a whole directory when nothing is there yet, else one file
    (replacing a file that was there when planned, as Hadoop's mergePaths does). In the
    intent record it is the row `[src, dst, directory 0/1, replace 0/1]`."""

    src: NonEmpty
    dst: NonEmpty
    directory: Flag
    replace: Flag


@dataclass(frozen=True)
class CommittedTree:
    """Every file of the committed task directories taken for this commit, from one walk,
    sorted by path."""

    files: list[FileStatus]
    tasks_dir: str  # where the taken task directories are

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    def under(self, directory: str) -> list[FileStatus]:
        """The files below `directory` (a taken task directory or one inside it)."""
        prefix = directory + "/"
        start = bisect_left(self.files, prefix, key=lambda f: f.path)
        end = bisect_left(self.files, prefix[:-1] + "0", key=lambda f: f.path)  # "/" + 1
        return self.files[start:end]

    def children(self, directory: str) -> list[FileStatus]:
        """What the walk found directly below `directory`: its files, and a directory for each
        subdirectory holding any (listing each again would cost a request per directory per
        task; a directory holding no file has nothing to publish)."""
        cut = len(directory) + 1
        out: list[FileStatus] = []
        seen: set[str] = set()
        for f in self.under(directory):
            name, below, _ = f.path[cut:].partition("/")
            if not below:
                out.append(f)
            elif name not in seen:
                seen.add(name)
                out.append(FileStatus(f"{directory}/{name}", 0, True))
        return sorted(out, key=lambda s: s.path)

    def published_paths(self) -> list[str]:
        """Each file's path in the destination (below its task directory)."""
        cut = len(self.tasks_dir) + 1
        return [f.path[cut:].partition("/")[2] for f in self.files]


LISTED_ABOVE = 4
"""Children merging into one existing directory above which it is listed once, rather than
each child's target asked for on its own."""


class PlannedDestination:
    """The destination as the moves planned so far leave it, and those moves."""

    def __init__(
        self, store: Store, tree: CommittedTree, replacing_all: bool, publish_names: bool
    ) -> None:
        self.store, self.tree = store, tree
        self.replacing_all, self.publish_names = replacing_all, publish_names
        self.moves: list[Move] = []
        self.planned: dict[str, bool] = {}  # path -> is a directory, once the moves are made
        self.listed: dict[str, dict[str, FileStatus]] = {}  # existing directories, listed

    def exists(self, path: str) -> FileStatus | None:
        is_dir = self.planned.get(path)
        if is_dir is not None:
            return FileStatus(path, 0, is_dir)
        parent = paths.parent(path)
        if self.replacing_all or self.planned.get(parent):
            return None  # inside a directory the plan moves in: only what it planned is there
        listing = self.listed.get(parent)
        if listing is not None:
            return listing.get(path)
        try:
            return self.store.stat(path)
        except NotFound:
            return None

    def merge(self, src: FileStatus, dst: str) -> None:
        if not src.is_dir:
            dst = published_name(dst) if self.publish_names else dst
            self.moves.append(Move(src.path, dst, 0, int(self.exists(dst) is not None)))
            self.planned[dst] = False
            return
        target = self.exists(dst) if dst else FileStatus("", 0, True)
        if target is None or not target.is_dir:
            self.moves.append(Move(src.path, dst, 1, int(target is not None)))
            self._plan_tree(src.path, dst)
            return
        children = self.tree.children(src.path)
        if len(children) > LISTED_ABOVE and not self.replacing_all and dst not in self.planned:
            self.listed[dst] = {s.path: s for s in self.store.list(dst)}
        for child in children:
            self.merge(child, paths.join(dst, child.name))

    def _plan_tree(self, src: str, dst: str) -> None:
        """A directory moved whole: it and what the tree holds below it are planned, and each
        file written under an in-flight name is renamed in place to its own."""
        self.planned[dst] = True
        cut = len(src) + 1
        for f in self.tree.under(src):
            moved = f"{dst}/{f.path[cut:]}" if dst else f.path[cut:]
            parent = moved.rpartition("/")[0]
            while parent != dst and parent not in self.planned:
                self.planned[parent] = True
                parent = parent.rpartition("/")[0]
            final = published_name(moved) if self.publish_names else moved
            if final != moved:  # its files take their own names, in place
                self.moves.append(Move(moved, final, 0, 0))
            self.planned[final] = False
