"""The one way a table committer commits its job's transaction: exactly once, whatever the
answer.

    landed?  -> the job's transaction is in the table already (an earlier try whose answer
                was lost, or a recovered commit): done, nothing is made again
    commit   -> through the store (`Store.external_commit`), so it is counted and can be
                broken on purpose like any store operation
    error    -> ask the table again: it may have landed although the answer said otherwise;
                a conflict with another writer is tried again after a jittered backoff
                (rebuilt on the table as it is now); anything else is raised

A job whose commit request is published (group commit) passes `pause`: its wait between tries
ends as soon as a leader carried its request (`requests.await_withdrawal`), and the next try
finds its transaction in the table.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from ...errors import JobCommitError
from ...net.retry import Backoff
from ..protocol import StageContext

log = logging.getLogger("dataferry.commit")

T = TypeVar("T")


def commit_exactly_once(
    ctx: StageContext,
    what: str,
    landed: Callable[[], T | None],
    commit: Callable[[], T],
    is_conflict: Callable[[BaseException], bool],
    retries: int,
    label: str = "",
    pause: Callable[[float], object] | None = None,
) -> tuple[T, bool]:
    """(the commit's result, True if it had landed before this call made it). `landed`
    returns the job's transaction if the table holds it (None if not); `commit` makes it;
    `pause(seconds)` waits between tries (None: a sleep; it may end early, see the module)."""
    found = landed()
    if found is not None:
        ctx.stats.incr("committer_table_commit_found")
        return found, True
    waits = iter(Backoff(base_s=0.05, cap_s=2.0, attempts=retries + 1).waits())
    tries = 0
    while True:
        tries += 1
        try:
            result = ctx.store.external_commit(label or what, commit)
            ctx.stats.incr("committer_table_commits")
            return result, False
        except Exception as e:
            found = landed()  # the answer may be lost: the table says what happened
            if found is not None:
                log.warning("%s: the commit reported %s, but it is in the table", what, e)
                ctx.stats.incr("committer_table_commit_found_after_error")
                return found, False
            if not is_conflict(e):
                raise
            wait = next(waits, None)
            if wait is None:
                raise JobCommitError(
                    f"{what}: the table kept changing under the commit: {tries} tries "
                    f"conflicted with other writers' commits (last: {e}); nothing was "
                    "committed, the job's files are removed by its abort"
                ) from e
            ctx.stats.incr("committer_table_commit_conflicts")
            log.info("%s: conflict with another commit (%s); again in %.2fs", what, e, wait)
            if (pause or time.sleep)(wait):  # woken: a leader carried the job's request
                found = landed()
                if found is not None:
                    ctx.stats.incr("committer_table_commit_found_after_wait")
                    return found, False
