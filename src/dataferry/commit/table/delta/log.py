"""A Delta table's log, checked whole before dataferry writes on top of it.

deltalake reads a 0-byte commit file as a commit with no actions (that version's rows vanish
without an error) and raises its own errors, naming no file, for a truncated or garbage one.
A crash on storage without a flush leaves exactly such files. So before a job writes (on the
driver, before any task) and again before its commit is decided, the log is read through the
store:

    every `_delta_log/<N>.json`       not empty (from the listing: no read)
    the latest one                    every line a JSON object holding one Delta action (an
                                      object under one action name)
    `_last_checkpoint`, if readable   the checkpoint it names is there
    the newest checkpoint             a whole Parquet file (its footer reads)

Damage is one `TableDamaged` naming the file and the table and what to do; nothing is written
on top of a version that could not be read. (A damaged `_last_checkpoint` is only a hint that
deltalake, too, ignores: the checkpoints are then found by listing.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from ....errors import (
    CommitError,
    DataferryError,
    DestinationError,
    TableCommitRefused,
    TableDamaged,
)
from ....store import Store, paths
from ....store.types import FileStatus
from .types import first_line

LOG_DIR = "_delta_log"
LAST_CHECKPOINT = f"{LOG_DIR}/_last_checkpoint"
# the largest commit file read whole (a commit of a few million files); past it, a commit is
# only checked for being non-empty
MAX_COMMIT_BYTES = 512 << 20

_COMMIT = re.compile(r"^(\d{20})\.json$")
# classic, multi-part (`.0000000001.0000000003`) and V2 (`.<uuid>`, Parquet or JSON) checkpoints
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.\d+\.\d+|\.[^.]+)?\.(?:parquet|json)$")
ACTIONS = frozenset(
    {
        "add",
        "remove",
        "metaData",
        "protocol",
        "commitInfo",
        "txn",
        "cdc",
        "domainMetadata",
        "checkpointMetadata",
        "sidecar",
    }
)


def damaged(store: Store, path: str, what: str, remedy: str = "") -> TableDamaged:
    return TableDamaged(
        f"Delta table {store.full_url()} is damaged: {store.full_url(path)} {what}; "
        f"{remedy or 'restore the file from a backup'} (dataferry writes nothing on top of "
        "a version it cannot read)",
        path,
    )


def check_log(store: Store) -> int | None:
    """The table's latest version (None if the log holds no commit), after checking the log
    as the module says; raises TableDamaged naming the first damaged file."""
    return check_listed_log(store)[0]


def check_listed_log(
    store: Store,
) -> tuple[int | None, dict[int, FileStatus], list[FileStatus]]:
    """`check_log`'s latest version, and the commit files (by version) and checkpoint files
    of the log's listing it checked."""
    named = [(e.name, e) for e in store.list_or_empty(LOG_DIR)]
    commits = {int(m.group(1)): e for n, e in named if (m := _COMMIT.match(n))}
    checkpoints = [e for n, e in named if _CHECKPOINT.match(n)]
    latest = max(commits) if commits else None
    for version in sorted(commits):
        if commits[version].size == 0 and not commits[version].is_dir:
            remedy = (
                "if the write that made this version never finished, remove the file (the "
                f"table is then version {version - 1}); else restore it from a backup"
                if version == latest and version > 0
                else "restore the file from a backup"
            )
            raise damaged(store, commits[version].path, "is empty (0 bytes)", remedy)
    if latest is not None:
        check_commit(store, commits[latest])
    check_checkpoints(store, checkpoints, {n for n, _ in named})
    return latest, commits, checkpoints


def check_commit(store: Store, entry: FileStatus) -> None:
    """Every line of a commit file is a JSON object holding one Delta action."""
    if entry.size > MAX_COMMIT_BYTES:
        return
    data = store.read_bytes(entry.path)
    if not data.strip():
        raise damaged(store, entry.path, "holds no action")
    for number, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except ValueError as e:
            raise damaged(
                store,
                entry.path,
                f"line {number} is not JSON ({e}): the file is truncated or overwritten",
            ) from None
        if not _is_action(action):
            keys = ", ".join(action) if isinstance(action, dict) else type(action).__name__
            raise damaged(store, entry.path, f"line {number} is not a Delta action ({keys})")


def _is_action(action: object) -> bool:
    """One key naming an action, holding an object (an action a later protocol adds is
    taken by its shape: the reader that knows it judges it)."""
    if not isinstance(action, dict) or len(action) != 1:
        return False
    (name, body), *_ = action.items()
    return isinstance(body, dict) and (name in ACTIONS or name[:1].islower())


def check_checkpoints(store: Store, checkpoints: Sequence[FileStatus], names: set[str]) -> None:
    """The newest checkpoint's files are whole Parquet files, and a readable
    `_last_checkpoint` names a checkpoint that is there (`names`: the log's file names)."""
    from ..footers import read_footer

    hinted = _hinted_version(store) if "_last_checkpoint" in names else None
    if hinted is not None and not any(
        int(_CHECKPOINT.match(c.name).group(1)) == hinted
        for c in checkpoints  # type: ignore[union-attr]
    ):
        raise damaged(
            store,
            LAST_CHECKPOINT,
            f"names checkpoint version {hinted}, which is not in {LOG_DIR}",
            "restore the checkpoint from a backup, or remove _last_checkpoint if every "
            "commit file since version 0 is there",
        )
    if not checkpoints:
        return
    newest = max(int(_CHECKPOINT.match(c.name).group(1)) for c in checkpoints)  # type: ignore[union-attr]
    for c in checkpoints:
        if int(_CHECKPOINT.match(c.name).group(1)) != newest:  # type: ignore[union-attr]
            continue
        if not c.name.endswith(".parquet"):
            continue  # a V2 checkpoint's JSON form: deltalake reads and names it itself
        try:
            read_footer(store, c.path)
        except CommitError as e:
            raise damaged(
                store,
                c.path,
                f"is not a whole Parquet file ({_after_url(str(e))})",
                "restore the checkpoint from a backup, or remove it (and _last_checkpoint) if "
                "every commit file since version 0 is there",
            ) from None


def _hinted_version(store: Store) -> int | None:
    """The version `_last_checkpoint` names (None if it is not readable: a hint only)."""
    try:
        hint = json.loads(store.read_bytes(LAST_CHECKPOINT, max_bytes=1 << 20))
    except Exception:
        return None
    version = hint.get("version") if isinstance(hint, dict) else None
    return version if isinstance(version, int) and version >= 0 else None


def _after_url(text: str) -> str:
    """A footer error without the file's URL (the damage message names it already)."""
    return text.split(" ", 1)[1] if text.startswith(("file:", "s3:", "memory:", "/")) else text


def latest_commit_file(version: int | None) -> str:
    """The commit file of a version (the log directory if there is none)."""
    return LOG_DIR if version is None else paths.join(LOG_DIR, f"{version:020d}.json")


def unreadable(store: Store, latest: int | None, error: BaseException) -> DestinationError:
    """deltalake's error reading the table, naming the table and its latest commit."""
    return DestinationError(
        f"Delta table {store.full_url()} cannot be read (its latest commit: "
        f"{store.full_url(latest_commit_file(latest))}): {first_line(error)}; dataferry "
        "writes nothing on top of a version it cannot read"
    )


def refused(store: Store, latest: int | None, error: BaseException) -> DataferryError:
    """deltalake's error committing a job's transaction, naming the table and the latest
    commit the transaction was to follow. An error of the transaction itself (a schema or a
    protocol the table refuses, an argument deltalake rejects) is final and nothing was
    written: TableCommitRefused, so the job is undone rather than left decided for ever; any
    other (the store's I/O) may have landed and leaves the commit for recovery to settle."""
    message = (
        f"Delta table {store.full_url()} did not take the job's transaction (its latest "
        f"commit: {store.full_url(latest_commit_file(latest))}): {first_line(error)}"
    )
    if _final(error):
        return TableCommitRefused(f"{message}; the job was undone, nothing of it committed")
    return DestinationError(message)


def _final(error: BaseException) -> bool:
    from deltalake.exceptions import DeltaProtocolError, SchemaMismatchError

    final = (SchemaMismatchError, DeltaProtocolError, TypeError, ValueError, LookupError)
    return isinstance(error, final) and not isinstance(error, OSError)
