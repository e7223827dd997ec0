"""The one check of data against a table's schema, for every table committer: the same
columns, each of the same type as the format stores it (`norm`: a format's own equivalences,
such as string widths), the first difference named."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from ...errors import ConfigError


def check_same_schema(
    what: str,
    table: pa.Schema,
    data: pa.Schema,
    norm: Callable[[pa.DataType], pa.DataType],
    extra_hint: str = "",
) -> None:
    """Refuse data whose columns differ from `what`'s (e.g. "Delta table s3://...") by name or
    type, naming the first; `extra_hint` says how a new column could be added."""
    table_fields = {f.name: f.type for f in table}
    for f in data:
        if f.name not in table_fields:
            raise ConfigError(
                f"column {f.name!r} is not in {what} (its columns: "
                f"{', '.join(table_fields)}){extra_hint}"
            )
        if norm(table_fields[f.name]) != norm(f.type):
            raise ConfigError(
                f"column {f.name!r} is {f.type} in the data but {table_fields[f.name]} in {what}"
            )
    missing = [n for n in table_fields if n not in data.names]
    if missing:
        raise ConfigError(f"the data has no column {missing[0]!r} of {what}")
