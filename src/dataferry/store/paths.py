"""Store-relative paths: posix, no leading or trailing slash, "" is the store's root.

Every path that reaches a store goes through `normalize`, which refuses `..`, absolute paths
and other schemes: a committer can never be talked into touching something outside its store.
"""

from __future__ import annotations

from ..errors import ConfigError


def normalize(path: str) -> str:
    """Canonical form of a store-relative path; raises ConfigError naming a path that escapes."""
    if type(path) is str:
        # fast path: most paths are canonical already (no empty, "." or ".." part, no scheme,
        # no backslash or NUL); a job commit normalizes every path several times
        wrapped = f"/{path}/"
        if (
            "//" not in wrapped
            and "/./" not in wrapped
            and "/../" not in wrapped
            and "\\" not in path
            and "\x00" not in path
        ):
            return path
    if not isinstance(path, str):
        raise ConfigError(f"path must be a string, got {type(path).__name__}: {path!r}")
    if "://" in path or path.startswith("/") or "\\" in path or "\x00" in path:
        raise ConfigError(f"path {path!r} is not a relative store path")
    parts = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            raise ConfigError(f"path {path!r} escapes its store ('..' is not allowed)")
        parts.append(part)
    return "/".join(parts)


def join(*parts: str) -> str:
    return normalize("/".join(p for p in parts if p))


def parent(path: str) -> str:
    path = normalize(path)
    return path.rsplit("/", 1)[0] if "/" in path else ""


def name(path: str) -> str:
    return normalize(path).rsplit("/", 1)[-1]


def is_under(path: str, ancestor: str) -> bool:
    """True if `path` is `ancestor` or lies below it."""
    path, ancestor = normalize(path), normalize(ancestor)
    return ancestor == "" or path == ancestor or path.startswith(ancestor + "/")


def relative_to(path: str, ancestor: str) -> str:
    path, ancestor = normalize(path), normalize(ancestor)
    if not is_under(path, ancestor):
        raise ConfigError(f"path {path!r} is not under {ancestor!r}")
    return path[len(ancestor) :].lstrip("/") if ancestor else path


def depth(path: str) -> int:
    path = normalize(path)
    return 0 if not path else path.count("/") + 1


def is_hidden(path: str) -> bool:
    """Hidden from data readers, as Hive/Spark/pyarrow treat names starting with `_` or `.`."""
    return any(part.startswith(("_", ".")) for part in normalize(path).split("/") if part)


# Whole-file writes on local disks go to a hidden name beside the file and are renamed into
# place, so a file is complete or absent; a writer that died leaves only such a name behind.
TEMP_PREFIX = ".dataferry-tmp-"


def is_temporary(path: str) -> bool:
    """True for the hidden name of a write in flight (or one a dead writer left): cleanup may
    delete it once its writer is gone; no data glob (`**/*.parquet`) matches it."""
    return path.rsplit("/", 1)[-1].startswith(TEMP_PREFIX)


NAME_LIMIT = 255
"""Bytes in one name: NAME_MAX of local file systems, HDFS's default component limit, ABFS's
path segments."""


def fits_one_name(name: str) -> bool:
    """True where `name` (UTF-8) is short enough to be one name on any store (NAME_LIMIT)."""
    return len(name.encode("utf-8", "surrogateescape")) <= NAME_LIMIT


def temporary_name(name: str, token: str) -> str:
    """The hidden name beside `name` that a write of it goes to first (at most NAME_LIMIT
    bytes; it ends with `token`, never with `name`'s own extension)."""
    full = f"{TEMP_PREFIX}{name}.{token}"
    if fits_one_name(full):
        return full
    return f"{TEMP_PREFIX}{token}"
