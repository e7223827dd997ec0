"""`make_committer(name, dest, **options)`: committers by name, with their config classes.

Each committer in the registry (`registry.py`) has a frozen config dataclass; options are its
field names, and an unknown name or option is a ConfigError naming it and the choices.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from ..errors import ConfigError
from ..store import Store, open_store
from .claim import DEFAULT_CLAIM_TIMEOUT_S
from .protocol import Committer
from .registry import KNOWN, CommitterSpec


def known_committers() -> list[str]:
    return sorted([*KNOWN, "auto"])


def config_type(name: str) -> type:
    return _spec(name).config_class()


def build_config(name: str, options: dict[str, Any]) -> Any:
    spec = _spec(name)
    kind = spec.config_class()
    fields = {f.name for f in dataclasses.fields(kind)}
    unknown = sorted(set(options) - fields)
    if unknown:
        raise ConfigError(
            f"committer {name!r} has no option {unknown[0]!r}; its options: {', '.join(sorted(fields))}"
        )
    return kind(**{**spec.defaults, **options})


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
    if caps.multipart_upload:
        return "magic"
    if caps.atomic_dir_rename:
        return "v1"
    return "direct"


def make_committer(
    name: str,
    dest: str | os.PathLike[str] | Store,
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
        ``v1``, ``v2``, ``manifest``, ``magic``, ``directory``, ``partitioned``, ``hive``,
        ``direct``, or ``auto`` (chosen from the store's capabilities).
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
            "(a rename there is a copy and a delete); use 'magic' or 'auto', or pass "
            "allow_unsafe_rename=True to measure it anyway"
        )
    write_mode, implied = _spec(name).committer_class().prepare_mode(mode)
    committer = build_committer(name, store, build_config(name, {**implied, **options}))
    committer.write_mode = write_mode
    committer.claim_timeout_s = claim_timeout_s
    return committer
