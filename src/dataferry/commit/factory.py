"""`make_committer(name, dest, **options)`: committers by name, with their config classes.

Each committer in the registry (`registry.py`) has a frozen config dataclass; options are its
field names, and an unknown name or option is a ConfigError naming it and the choices.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import difflib
import numbers
import os
import types
import typing
from typing import Any

from ..errors import ConfigError
from ..store import Store, open_store
from .base import Committer
from .records.hold import DEFAULT_CLAIM_TIMEOUT_S
from .registry import KNOWN, CommitterSpec


def known_committers() -> list[str]:
    return sorted([*KNOWN, "auto"])


def config_type(name: str) -> type:
    return _spec(name).config_class()


def build_config(name: str, options: dict[str, Any]) -> Any:
    """The committer's config from `options`, each checked against its field first: an
    unknown name, or a value not of the field's type, is a ConfigError naming the committer,
    the option and the value (values are never converted: "4" is not an int)."""
    spec = _spec(name)
    kind = spec.config_class()
    check_options(name, kind, options)
    return kind(**{**spec.defaults, **options})


def check_options(name: str, kind: type, options: dict[str, Any]) -> None:
    """Each option of committer `name` is a field of its config class `kind`, with a value
    of the field's annotated type (int, float, bool, str, tuples and lists of them,
    Literal, Optional and unions)."""
    hints = typing.get_type_hints(kind)
    fields = sorted(f.name for f in dataclasses.fields(kind) if f.init)
    for option in sorted(options, key=str):
        if option not in fields:
            close = difflib.get_close_matches(str(option), fields, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"its options: {', '.join(fields)}"
            raise ConfigError(f"unknown option {option!r} for committer {name!r}; {hint}")
        expected = hints.get(option, Any)
        value = options[option]
        if not _has_type(value, expected):
            raise ConfigError(
                f"committer option {option!r} for {name!r} must be {_describe(expected)}, "
                f"got {value!r} ({type(value).__name__})"
            )


def _has_type(value: Any, expected: Any) -> bool:
    """Whether `value` fits the annotation `expected` (what cannot be checked passes)."""
    if expected is Any or expected is object:
        return True
    if expected is type(None) or expected is None:
        return value is None
    origin = typing.get_origin(expected)
    args = typing.get_args(expected)
    if origin is typing.Literal:
        return any(value == a and type(value) is type(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return any(_has_type(value, a) for a in args)
    if origin in (tuple, list, collections.abc.Sequence):
        if not isinstance(value, (tuple, list)):
            return False
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return all(_has_type(v, args[0]) for v in value)
        if origin is tuple and args:
            return len(value) == len(args) and all(map(_has_type, value, args))
        return not args or all(_has_type(v, args[0]) for v in value)
    if origin is not None:
        return isinstance(value, origin)
    if expected is bool:
        return isinstance(value, bool)
    if expected is int:  # numpy's integers too; a bool or "4" is not one
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if expected is float:  # an int is a fine float (32 for 32.0); a bool or "0.5" is not
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if isinstance(expected, type):
        return isinstance(value, expected)
    return True


def _describe(expected: Any) -> str:
    """An annotation in words: 'an int', 'a str or None', "one of 'a', 'b'"."""
    names = {bool: "a bool", int: "an int", float: "a float (or an int)", str: "a str"}
    if expected in names:
        return names[expected]
    if expected is type(None):
        return "None"
    origin, args = typing.get_origin(expected), typing.get_args(expected)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in args)
    if origin in (tuple, list, collections.abc.Sequence):
        item = [a for a in args if a is not Ellipsis]
        return "a tuple or list" + (f" of {_plural(item[0])}" if len(set(item)) == 1 else "")
    return f"a {getattr(expected, '__name__', expected)}"


def _plural(expected: Any) -> str:
    return _describe(expected).removeprefix("a ").removeprefix("an ") + " values"


def build_committer(name: str, store: Store, config: Any) -> Committer:
    return _spec(name).committer_class()(store, config)


def _spec(name: str) -> CommitterSpec:
    spec = KNOWN.get(name)
    if spec is None:
        raise ConfigError(
            f"unknown committer {name!r}; known committers: {', '.join(known_committers())}"
        )
    return spec


def choose_committer(store: Store) -> str:
    """The committer `auto` picks from a store's capabilities."""
    caps = store.capabilities
    if caps.atomic_file_rename:
        return "manifest"
    if caps.block_lists:
        return "blocklist"
    if caps.multipart_upload:
        return "magic"
    if caps.resumable_upload:
        return "magic-gcs"
    if caps.atomic_dir_rename:
        return "v1"
    return "direct"


def make_committer(
    name: str,
    dest: str | os.PathLike[str] | Store,
    /,
    *,
    mode: str = "append",
    allow_unsafe_rename: bool = False,
    claim_timeout_s: float = DEFAULT_CLAIM_TIMEOUT_S,
    **options: Any,
) -> Committer:
    """A committer by name for a destination.

    Parameters
    ----------
    name
        ``v1``, ``v2``, ``manifest``, ``magic``, ``blocklist`` (Azure Blob), ``directory``,
        ``partitioned``, ``hive``,
        ``direct``, the table committers ``delta``, ``iceberg``, ``hudi`` (docs/tables.md),
        or ``auto`` (chosen from the store's capabilities).
    dest
        A URL, a path or an open Store.
    mode
        What the job's commit does with data already in the destination: ``append`` keeps
        it, ``overwrite`` replaces it, ``error`` refuses to commit over it. Decided while the
        commit holds the destination's claim, so two jobs cannot both win.
    allow_unsafe_rename
        A rename-based committer on a store without atomic file rename (S3, GCS) is refused
        unless this is True: there every rename is a copy, slow and not atomic.
    claim_timeout_s
        How long a claim holder may go without a heartbeat before another job may take the
        destination over (recovering the dead job's commit first).
    **options
        The fields of the committer's config dataclass (each names the Hadoop option it
        mirrors), e.g. ``io_threads`` for ``manifest``.

    Returns
    -------
    Committer
        The committer, ready for ``new_job``/``setup_job``.
    """
    for option, value, kind in (
        ("allow_unsafe_rename", allow_unsafe_rename, bool),
        ("claim_timeout_s", claim_timeout_s, float),
    ):
        if not _has_type(value, kind):
            raise ConfigError(
                f"make_committer option {option!r} must be {_describe(kind)}, "
                f"got {value!r} ({type(value).__name__})"
            )
    store = dest if isinstance(dest, Store) else open_store(dest)
    if name == "auto":
        name = choose_committer(store)
    elif (
        _spec(name).rename_based
        and not store.capabilities.atomic_file_rename
        and not allow_unsafe_rename
    ):
        raise ConfigError(
            f"committer {name!r} commits by renaming, and {store.describe()} has no atomic rename "
            f"(a rename there is a copy and a delete); use {choose_committer(store)!r} (what "
            "'auto' picks for this store), or pass allow_unsafe_rename=True to measure it anyway"
        )
    write_mode, implied = _spec(name).committer_class().prepare_mode(mode)
    committer = build_committer(name, store, build_config(name, {**implied, **options}))
    committer.write_mode = write_mode
    committer.claim_timeout_s = claim_timeout_s
    return committer
