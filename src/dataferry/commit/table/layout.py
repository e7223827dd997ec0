"""Where a table's data files lie and what their paths say: Hive-style `col=value/`
directories (the values escaped as the dataset layer escapes them), read back into the raw
partition values a table's log records."""

from __future__ import annotations

import re

from ...store import paths

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_ESCAPED = re.compile(r"%([0-9A-Fa-f]{2})")


def unescape_value(text: str) -> str | None:
    """A `col=value` directory's value as written (None for Hive's null partition)."""
    if text == NULL_PARTITION:
        return None
    return _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), text)


def partition_values(relpath: str, start: int = 0) -> dict[str, str | None]:
    """`a=1/b=x%2Fy/file.parquet` -> {"a": "1", "b": "x/y"}; directories from `start` on
    (a table whose data lies under `data/` starts at 1)."""
    values: dict[str, str | None] = {}
    for part in paths.normalize(relpath).split("/")[start:-1]:
        key, eq, value = part.partition("=")
        if eq:
            values[key] = unescape_value(value)
    return values


def partition_dir(relpath: str) -> str:
    """The file's partition directory, relative to the table's data root."""
    return paths.parent(paths.normalize(relpath))
