"""`make_committer(name, dest, **options)`: committers by name, with their config classes.

Each registered committer has a frozen config dataclass; options are its field names, and an
unknown name or option is a ConfigError naming it and the choices.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

from ..errors import ConfigError
from ..store import Store, open_store
from .fileoutput import FileOutputCommitter, FileOutputConfig
from .protocol import Committer


@dataclasses.dataclass(frozen=True)
class CommitterKind:
    name: str
    config_type: type
    build: Callable[[Store, Any], Committer]
    summary: str
    defaults: dict[str, Any] = dataclasses.field(default_factory=dict)


REGISTRY: dict[str, CommitterKind] = {}


def register(kind: CommitterKind) -> None:
    REGISTRY[kind.name] = kind


register(
    CommitterKind(
        "v1",
        FileOutputConfig,
        FileOutputCommitter,
        "FileOutputCommitter v1: task commit renames a directory; job commit merges serially",
        {"algorithm": 1},
    )
)
register(
    CommitterKind(
        "v2",
        FileOutputConfig,
        FileOutputCommitter,
        "FileOutputCommitter v2 (UNSAFE baseline): task commit merges into the destination",
        {"algorithm": 2},
    )
)


def _load_optional() -> None:
    """Committers in their own modules register themselves on import."""
    import importlib

    for module in ("manifest", "magic", "hive", "direct"):
        try:
            importlib.import_module(f"{__package__}.{module}")
        except ModuleNotFoundError as e:
            if e.name != f"{__package__}.{module}":
                raise


def known_committers() -> list[str]:
    _load_optional()
    return sorted([*REGISTRY, "auto"])


def build_config(name: str, options: dict[str, Any]) -> Any:
    kind = _kind(name)
    fields = {f.name for f in dataclasses.fields(kind.config_type)}
    unknown = sorted(set(options) - fields)
    if unknown:
        raise ConfigError(
            f"committer {name!r} has no option {unknown[0]!r}; its options: {', '.join(sorted(fields))}"
        )
    return kind.config_type(**{**kind.defaults, **options})


def build_committer(name: str, store: Store, config: Any) -> Committer:
    return _kind(name).build(store, config)


def _kind(name: str) -> CommitterKind:
    _load_optional()
    kind = REGISTRY.get(name)
    if kind is None:
        raise ConfigError(
            f"unknown committer {name!r}; known committers: {', '.join(known_committers())}"
        )
    return kind


def choose_committer(store: Store) -> str:
    """The committer `auto` picks from a store's capabilities."""
    _load_optional()
    caps = store.capabilities
    if caps.atomic_file_rename and "manifest" in REGISTRY:
        return "manifest"
    if caps.multipart_upload and "magic" in REGISTRY:
        return "magic"
    if caps.atomic_dir_rename:
        return "v1"
    if "direct" in REGISTRY:
        return "direct"
    raise ConfigError(
        f"no safe committer for {store.describe()}: it has no atomic rename and no multipart "
        "upload; name a committer explicitly"
    )


RENAME_BASED = ("v1", "v2", "manifest", "hive")


def make_committer(
    name: str,
    dest: str | os.PathLike[str] | Store,
    *,
    allow_unsafe_rename: bool = False,
    **options: Any,
) -> Committer:
    """A committer by name for a destination (URL, path or open Store).

    A rename-based committer on a store without atomic file rename (S3, GCS) is refused
    unless `allow_unsafe_rename=True`: there every rename is a copy, slow and not atomic.
    """
    store = dest if isinstance(dest, Store) else open_store(dest)
    if name == "auto":
        name = choose_committer(store)
    elif (
        name in RENAME_BASED
        and not store.capabilities.atomic_file_rename
        and not allow_unsafe_rename
    ):
        raise ConfigError(
            f"committer {name!r} commits by renaming, and {store.describe()} has no atomic rename "
            "(a rename there is a copy and a delete); use 'magic' or 'auto', or pass "
            "allow_unsafe_rename=True to measure it anyway"
        )
    return build_committer(name, store, build_config(name, options))
