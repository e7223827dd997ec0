"""Write modes for a destination, applied before a job starts (as Spark's SaveMode).

- `error` (default): refuse a destination that already holds data or a committed job;
- `append`: keep existing data, add this job's files;
- `overwrite`: delete existing data first, then write.

Hidden entries other than `_SUCCESS` (`_temporary`, staging directories of other jobs, ...) are
never touched here: they belong to jobs in flight, and `dataferry cleanup` deals with dead ones.
"""

from __future__ import annotations

from typing import Literal

from ..errors import AccessDenied, ConfigError, DestinationError, NotFound
from ..store import Store, paths
from .success import SUCCESS_FILE

COMMIT_RECORDS = "_dataferry/commits"  # the direct committer's records of committed jobs

Mode = Literal["error", "append", "overwrite"]
MODES = ("error", "append", "overwrite")


def prepare_destination(store: Store, mode: str = "error", keep_success: bool = False) -> None:
    """Check and prepare the destination for a new job in `mode`; raises naming the path.
    keep_success: leave an existing `_SUCCESS` for the committer to replace (a Hive-style load
    does so only when it has moved everything, so a failed load leaves the table as it was)."""
    if mode not in MODES:
        raise ConfigError(f"unknown write mode {mode!r}; use one of {', '.join(MODES)}")
    url = store.full_url()
    try:
        st = store.stat("")
    except NotFound:
        try:
            store.mkdirs("")
        except AccessDenied as e:
            raise DestinationError(f"destination {url} cannot be created: {e}") from None
        return
    if not st.is_dir:
        raise DestinationError(f"destination {url} is a file, not a directory")
    entries = store.list("")
    data = [e for e in entries if not paths.is_hidden(e.path)]
    success = [e for e in entries if e.path == SUCCESS_FILE]
    if mode == "error" and (data or success):
        what = (
            f"a committed job's {SUCCESS_FILE}"
            if success
            else f"{len(data)} entries, e.g. {data[0].path!r}"
        )
        raise DestinationError(
            f"destination {url} is not empty (it holds {what}); "
            "write with mode='append' or mode='overwrite'"
        )
    try:
        if mode == "overwrite":
            for e in data:
                store.delete(e.path, recursive=True)
            store.delete(COMMIT_RECORDS, recursive=True)  # they describe the data just deleted
        if success and not keep_success:  # the old record will no longer describe the directory
            store.delete(SUCCESS_FILE)
    except AccessDenied as e:
        raise DestinationError(f"destination {url} is not writable: {e}") from None
