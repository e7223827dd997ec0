"""A pyiceberg Transaction that builds its metadata once per change, not once per question.

pyiceberg's `Transaction.table_metadata` applies the staged updates to the table's metadata and
deep-copies the result on every read; one fast append reads it about twenty times (the
snapshot producer, our checks), and the copy grows with the table's snapshots: a third of a
job commit's CPU at a few dozen snapshots. A transaction creating the table reads it about
thirty times (its spec, name mapping and fast append), each a copy of the whole new table's
metadata. The answer only changes when the table's metadata or the staged updates change (both
replaced, never changed in place), so it is kept until then; with nothing staged it is the
table's own metadata, as `Table.metadata` gives it to any reader. What is committed is
unchanged: the catalog applies the updates to the table it loads (or creates).
"""

from __future__ import annotations

from functools import cache
from typing import Any


def memo_transaction(tbl: Any) -> Any:
    """A transaction on `tbl` (as `tbl.transaction()`) whose metadata is built once per change."""
    return _memo_classes()[0](tbl)


def memo_create_transaction(tx: Any) -> Any:
    """The create transaction `tx`, just made by pyiceberg's `catalog.create_table_transaction`
    (nothing staged on it beyond its initial changes), as one whose metadata is built once per
    change: the same staged table, the same initial changes. Another kind (a catalog of its
    own) is left as it is."""
    from pyiceberg.table import CreateTableTransaction

    if type(tx) is not CreateTableTransaction:
        return tx
    return _memo_classes()[1](tx._table)


@cache
def _memo_classes() -> tuple[type, type]:
    from pyiceberg.table import CreateTableTransaction, Transaction  # imported when committing

    class Memo:
        """The memo, mixed into pyiceberg's transaction classes."""

        _memo: tuple[Any, Any, Any] = (None, None, None)  # (table's metadata, updates, built)
        _table: Any
        _updates: Any

        @property
        def table_metadata(self) -> Any:
            if not self._updates:  # nothing staged: the table's own (checked as pyiceberg does)
                metadata = self._table.metadata
                metadata.spec().check_compatible(metadata.schema())
                metadata.sort_order().check_compatible(metadata.schema())
                return metadata
            if not isinstance(self._updates, tuple):  # a pyiceberg that changes them in place
                return super().table_metadata  # type: ignore[misc]
            base, updates, built = self._memo
            if base is not self._table.metadata or updates is not self._updates:
                built = super().table_metadata  # type: ignore[misc]
                self._memo = (self._table.metadata, self._updates, built)
            return built

    class MemoTransaction(Memo, Transaction):
        pass

    class MemoCreateTransaction(Memo, CreateTableTransaction):
        pass

    return MemoTransaction, MemoCreateTransaction
