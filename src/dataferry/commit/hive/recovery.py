"""Finishing a Hive-style load whose job is gone, from its journal alone."""

from __future__ import annotations

from ...store import IOPool, Store
from ...store.catalog import Catalog
from ..success import SUCCESS_FILE
from .journal import load_journal
from .load import LoadPools, register, run_steps
from .staging import JOURNAL


def finish_abandoned_load(
    store: Store, staging: str, *, rollback: bool = False, catalog: Catalog | None = None
) -> str:
    """Complete the journal's moves and register them in `catalog` if one is given (or undo
    the moves with rollback=True); returns what was done."""
    journal = load_journal(store, f"{staging}/{JOURNAL}")
    if journal is None:
        return "no journal"
    pools = LoadPools(IOPool(15), IOPool(15))
    try:
        if rollback:
            if journal.state == "registered":
                return "already complete"
            run_steps(
                store,
                [s for s in reversed(journal.steps) if s.phase == "in"],
                pools,
                backwards=True,
            )
            run_steps(
                store,
                [s for s in reversed(journal.steps) if s.phase == "aside"],
                pools,
                backwards=True,
            )
            return "rolled back"
        run_steps(store, [s for s in journal.steps if s.phase == "aside"], pools)
        run_steps(store, [s for s in journal.steps if s.phase == "in"], pools)
        if catalog is not None and journal.state != "registered":
            register(store, catalog, journal, store.full_url(), pools)
        store.delete(SUCCESS_FILE)  # the old record no longer describes the table
        return "completed"
    finally:
        pools.close()
