"""Giving up a commit that cannot be finished: the operator's way out of what `cleanup` refuses.

A decided commit whose intent record cannot be read, or whose files to move have vanished, is
left in place by recovery: nothing can prove which way is whole, so nothing is guessed. Left
alone it holds the destination for good (its claim is taken back by every job and by cleanup,
each failing the same way). `dataferry cleanup DEST --give-up ENTRY` is the way out, asked for
by name: the destination stays as the commit left it (readers see what it had published, and
an overwrite's earlier data that it had already deleted stays deleted), and the job's
directory (its record, and the files it had not published) is moved aside, not deleted, to
`_dataferry/given-up/`, where the operator may take files from it or delete it. What is given
up is the commit's all-or-nothing; no file is deleted.
"""

from __future__ import annotations

import logging

from ...errors import NotFound
from ...store import Store, paths
from ..records.claim import CLAIM_DIR

log = logging.getLogger("dataferry.commit")

GIVEN_UP_DIR = f"{CLAIM_DIR}/given-up"


def aside_path(store: Store, entry: str) -> str:
    """Where a given-up entry is kept: its path flattened into one name, never over another."""
    base = f"{GIVEN_UP_DIR}/{entry.strip('/').replace('/', '~')}"
    path, n = base, 1
    while store.exists(path):
        n += 1
        path = f"{base}.{n}"
    return path


def give_up_entry(store: Store, entry: str, why: str) -> str:
    """Move the job directory `entry` aside (kept whole) and return where it now is; '' when
    it is not there any more. `why` is what recovery failed on (logged)."""
    if not store.exists(entry):
        return ""
    kept = aside_path(store, entry)
    store.mkdirs(paths.parent(kept))
    try:
        store.rename(entry, kept)
    except NotFound:
        return ""
    parent = paths.parent(entry)
    if parent:
        store.delete_if_empty(parent)  # the job's own parent (`_temporary/<uuid>`), if bare
    log.warning(
        "cleanup: gave up the commit of %s (%s); kept aside at %s",
        store.full_url(entry),
        why,
        store.full_url(kept),
    )
    return kept
