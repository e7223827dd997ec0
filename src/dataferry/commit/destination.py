"""Write modes for a destination (as Spark's SaveMode), checked early before a job starts.

- `error` (default): refuse a destination that already holds data or a committed job;
- `append`: keep existing data, add this job's files;
- `overwrite`: replace existing data with this job's output;
- `overwrite-partitions` (pyarrow's `delete_matching`, Spark's dynamic partition overwrite):
  replace the contents of each directory the job writes files into, keep every other.

This check only fails early and creates the destination: nothing is deleted here. The mode is
decided when the job commits, while it holds the destination's claim (`job/commit.py`), so a
job that fails leaves the earlier data exactly as it was and two jobs cannot both win.
Hidden entries other than `_SUCCESS` (`_temporary`, staging directories of other jobs, ...)
belong to jobs in flight, and `dataferry cleanup` deals with dead ones.
"""

from __future__ import annotations

from typing import Literal

from ..errors import AccessDenied, ConfigError, DestinationError, NotFound
from ..store import Store, paths
from .protocol import MODES
from .records.success import SUCCESS_FILE

Mode = Literal["error", "append", "overwrite", "overwrite-partitions"]


def prepare_destination(store: Store, mode: str = "error") -> None:
    """Check the destination for a new job in `mode` (creating it if absent); raises naming
    the path. A destination held by a dead job's commit is recovered first."""
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
    from .job.recovery import recover_dead_claim

    recover_dead_claim(store)  # "before it starts": finish or undo a dead job's commit
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
