"""What a command's path points at, checked before the command uses it.

A file where a directory is wanted, nothing where something must be, or a path through a file
is refused with one line naming the path as the user typed it and what is wrong, in words
("notes.txt: is a file, not a directory (cleanup takes a destination directory)"), instead of
the store operation that tripped over it deep inside (``stat .../_dataferry/claim.json: Not a
directory``). A URL of a scheme no store serves is refused by `open_store`, which names it.
"""

from __future__ import annotations

from typing import Literal

from ..errors import ConfigError, NotADirectory, NotFound

Kind = Literal["directory", "file", "missing", "through a file"]


def kind_of(location: str) -> Kind:
    """What is at `location` (a path or store URL): a directory (an object store's prefix
    holding objects counts), a file, nothing, or a path one of whose parents is a file."""
    from ..store import open_store

    if location.startswith("sim:") and location.count(":") == 1:
        return "directory"  # a store model in a fresh directory of its own: nothing to look at
    store = open_store(location)
    try:
        return "directory" if store.stat("").is_dir else "file"
    except NotFound:
        return "missing"
    except NotADirectory:
        return "through a file"
    # (denied: the store's own error says why, missing credentials say which to set)


def need_directory(location: str, role: str, option: str = "") -> None:
    """Refuse a `location` that is a file or lies under one where the command needs a
    directory; `role` says what it takes there, `option` the option that gave it (if any)."""
    kind = kind_of(location)
    given = f"{option} {location}" if option else location
    if kind == "file":
        raise ConfigError(f"{given}: is a file, not a directory ({role})")
    if kind == "through a file":
        raise ConfigError(f"{given}: a part of this path is a file, not a directory ({role})")


def need_file(location: str, role: str) -> None:
    """Refuse a `location` that is a directory or lies under a file where the command reads
    a file (a missing one is left to the command, which says so)."""
    kind = kind_of(location)
    if kind == "directory":
        raise ConfigError(f"{location}: is a directory, not a file ({role})")
    if kind == "through a file":
        raise NotFound(f"{location}: a part of this path is a file, not a directory ({role})", "")


def need_something(location: str, role: str) -> None:
    """Refuse a `location` where nothing is (a file or a directory must be there)."""
    kind = kind_of(location)
    if kind == "missing":
        raise NotFound(f"{location}: no such file or directory ({role})", "")
    if kind == "through a file":
        raise NotFound(f"{location}: a part of this path is a file, not a directory ({role})", "")
