"""Reading commit records safely: one capped read, and typed field checks.

Every record a committer reads back (task manifests, `.pending` and `.pendingset`, uploads
records, `_SUCCESS`, the direct committer's commit records) is read through `read_record`
with a size cap of its own kind and parsed field by field with the checks below. Whatever is
wrong with the file (too big, a directory where the file should be, not UTF-8, truncated JSON,
a field missing or of the wrong type, an unknown version) gives exactly one `ValidationError`
naming the file's full URL and the field at fault; `NotFound` alone passes through, so a caller
can tell an absent record from a damaged one and never treats the second as the first.

Records are written whole, in one `Store.write_bytes` (or a write then a rename), so a reader
sees a record complete or not at all.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ...errors import IsADirectory, RecordTooLarge, ValidationError
from ...store import Store

KiB = 1024
MiB = 1024 * KiB

# The caps, by kind. Records that scale with a task's files get a large cap; small fixed-shape
# records a small one. Each is far above anything a real writer produces.
SMALL_RECORD_MAX_BYTES = 1 * MiB
"""Small fixed-shape records (a `_SUCCESS` holds at most 100 file names)."""
TASK_RECORD_MAX_BYTES = 64 * MiB
"""Records that list one task's files (manifests, pendingsets, uploads records): about 300
bytes a file, so some 200,000 files per task."""


def read_record(store: Store, path: str, max_bytes: int) -> bytes:
    """The bytes of the record at `path`, at most `max_bytes` of them.

    Raises NotFound when nothing is there, ValidationError naming the file's URL when it is
    larger than `max_bytes` or is a directory."""
    source = store.full_url(path)
    try:
        return store.read_bytes(path, max_bytes=max_bytes)
    except IsADirectory:
        raise ValidationError("is a directory, not a record file", source) from None
    except RecordTooLarge as e:
        raise ValidationError(f"{e.size} bytes, larger than {max_bytes}", source) from None


def parse_json(raw: bytes, source: str) -> Any:
    """JSON text -> value; ValidationError naming `source` if it is not UTF-8 JSON (cut short,
    binary, a number out of range, nesting deeper than the parser takes)."""
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValidationError(f"not valid JSON: {e}", source) from None
    except RecursionError:
        raise ValidationError("not valid JSON: nested too deeply", source) from None


def parse_object(
    raw: bytes, source: str, what: str, error: type[ValidationError] = ValidationError
) -> dict[str, Any]:
    """A record that must be one JSON object (`what`: "a claim record"); `error` naming
    `source` when it is not JSON or not an object."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise error(f"not {what} (JSON: {e})", source) from None
    except RecursionError:
        raise error(f"not {what} (JSON nested too deeply)", source) from None
    if not isinstance(data, dict):
        raise error(f"not {what} (not a JSON object)", source)
    return data


def load_json_record(store: Store, path: str, max_bytes: int) -> tuple[Any, str]:
    """Read (capped) and parse a JSON record; returns the value and the file's URL."""
    source = store.full_url(path)
    return parse_json(read_record(store, path, max_bytes), source), source


# --- typed fields ------------------------------------------------------------------------------


def need_object(data: Any, source: str, where: str = "") -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ValidationError("not a JSON object", source, where)
    return data


_REQUIRED: Any = object()  # a field with no default: missing (or null) is an error


def _field(
    data: dict[str, Any],
    key: str,
    source: str,
    kinds: type | tuple[type, ...],
    expected: str,
    default: Any,
    where: str,
) -> tuple[Any, str]:
    """The field's value (or `default` when missing or null) and its name for errors; a value
    not of `kinds` (a JSON true never counts as a number) is a ValidationError naming it."""
    value = data.get(key)
    name = f"{where}.{key}" if where else key
    if value is None:
        if default is _REQUIRED:
            raise ValidationError("missing", source, name)
        return default, name
    if not isinstance(value, kinds) or (isinstance(value, bool) and kinds is not bool):
        raise ValidationError(f"expected {expected}, got {type(value).__name__}", source, name)
    return value, name


def get_str(
    data: dict[str, Any],
    key: str,
    source: str,
    *,
    default: str | None = None,
    nonempty: bool = False,
    where: str = "",
) -> str:
    """A string field; missing (or null) gives `default`, or an error when there is none."""
    fallback = _REQUIRED if default is None else default
    value, name = _field(data, key, source, str, "a string", fallback, where)
    if nonempty and not value:
        raise ValidationError("empty", source, name)
    return value


def get_int(
    data: dict[str, Any],
    key: str,
    source: str,
    *,
    default: int | None = None,
    minimum: int | None = 0,
    where: str = "",
) -> int:
    """An integer field (not a bool, not a float); missing or null gives `default`."""
    fallback = _REQUIRED if default is None else default
    value, name = _field(data, key, source, int, "an integer", fallback, where)
    if minimum is not None and value < minimum:
        raise ValidationError(f"{value} is below {minimum}", source, name)
    return value


def is_finite_number(value: Any) -> bool:
    """An int or a finite float (not a bool: JSON's true is no number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return not isinstance(value, float) or math.isfinite(value)


def get_number(data: dict[str, Any], key: str, source: str, *, default: float) -> float:
    """A finite number field (int or float, not a bool); missing or null gives `default`."""
    value = data.get(key)
    if value is None:
        return default
    if not is_finite_number(value):
        raise ValidationError(f"expected a finite number, got {value!r}", source, key)
    return value


def get_bool(
    data: dict[str, Any], key: str, source: str, *, default: bool, where: str = ""
) -> bool:
    return _field(data, key, source, bool, "true or false", default, where)[0]


def get_list(
    data: dict[str, Any], key: str, source: str, *, required: bool = False, where: str = ""
) -> list[Any]:
    """A list field; missing or null is an empty list unless `required`."""
    fallback = _REQUIRED if required else []
    return _field(data, key, source, list, "a list", fallback, where)[0]


def get_dict(data: dict[str, Any], key: str, source: str, *, where: str = "") -> dict[str, Any]:
    """An object field; missing or null is an empty dict."""
    return _field(data, key, source, dict, "an object", {}, where)[0]


def get_str_map(data: dict[str, Any], key: str, source: str, *, where: str = "") -> dict[str, str]:
    """An object field whose values are all strings (Hadoop's `Map<String, String>`)."""
    value = get_dict(data, key, source, where=where)
    if not all(isinstance(v, str) for v in value.values()):
        raise ValidationError("values must be strings", source, f"{where}.{key}" if where else key)
    return dict(value)


def str_list(value: list[Any], source: str, field: str, *, nonempty: bool = False) -> list[str]:
    """Every item a string (and non-empty with `nonempty`)."""
    for i, item in enumerate(value):
        if not isinstance(item, str) or (nonempty and not item):
            raise ValidationError(
                f"expected a {'non-empty ' if nonempty else ''}string, got {item!r}",
                source,
                f"{field}[{i}]",
            )
    return list(value)
