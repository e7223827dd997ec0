"""pyarrow file systems as stores.

A `pyarrow.fs.FileSystem` object (`open_store(path, filesystem=fs)`) is wrapped the way fsspec
wraps one (`ArrowFSWrapper`) and served by an FsspecStore, with capabilities declared per
pyarrow type (`ARROW_CAPABILITIES`): pyarrow's own FileInfo carries no etags and its output
streams always overwrite, so none of them declares etags or an exclusive create.

A HadoopFileSystem object handed in is served here (through libhdfs and its JVM, as the user
made it); `hdfs://` and `viewfs://` URLs open the hdfs-native store instead (store.hdfs).
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

from fsspec.implementations.arrow import ArrowFSWrapper

from ...errors import ConfigError
from ..types import Capabilities
from .store import FsspecStore

# Object stores: no rename (pyarrow's move is a copy and a delete per object), no etags in
# pyarrow's FileInfo, strongly consistent listings (S3 since 2020, GCS always).
_OBJECT_STORE = Capabilities(consistent_listing=True)
_RENAME_FS = Capabilities(
    atomic_file_rename=True, atomic_dir_rename=True, o1_dir_rename=True, consistent_listing=True
)
ARROW_CAPABILITIES: dict[str, Capabilities] = {
    "local": _RENAME_FS,  # rename(2): atomic and O(1) for files and directories
    "s3": _OBJECT_STORE,
    "gcs": _OBJECT_STORE,
    "hdfs": _RENAME_FS,  # one NameNode operation: atomic and O(1) for files and directories
}
# URL schemes that may name a path of each kind of pyarrow file system
ARROW_SCHEMES: dict[str, tuple[str, ...]] = {
    "local": ("file", "local"),
    "s3": ("s3", "s3a"),
    "gcs": ("gs", "gcs"),
    "hdfs": ("hdfs", "viewfs"),
}
_OBJECT_KINDS = ("s3", "gcs")
_CLASSES = {
    "local": "LocalFileSystem",
    "s3": "S3FileSystem",
    "gcs": "GcsFileSystem",
    "hdfs": "HadoopFileSystem",
}


def is_arrow_filesystem(obj: Any) -> bool:
    """Whether `obj` is a pyarrow.fs.FileSystem (without importing pyarrow: no object of its
    types can exist before pyarrow was imported)."""
    module = sys.modules.get("pyarrow._fs")
    return module is not None and isinstance(obj, module.FileSystem)


def arrow_kind(fs: Any) -> str | None:
    """ "local", "s3", "gcs" or "hdfs" for pyarrow's file systems of those types, else None."""
    import pyarrow.fs as pafs

    for kind, name in _CLASSES.items():
        cls = getattr(pafs, name, None)  # a pyarrow built without S3/GCS/HDFS lacks the class
        if cls is not None and isinstance(fs, cls):
            return kind
    return None


def arrow_capabilities(fs: Any) -> Capabilities:
    """What a committer may rely on for a pyarrow file system; any other type (SubTree, Py,
    a mock...) gets the conservative default: nothing atomic."""
    return ARROW_CAPABILITIES.get(arrow_kind(fs) or "", Capabilities())


class ArrowFileSystem(ArrowFSWrapper):
    """fsspec's wrapper of a pyarrow file system, plus directory moves on object stores
    (pyarrow moves single objects only there) and a recursive listing in one call."""

    cachable = False  # one wrapper per store: fsspec's instance cache would keep them all

    def mv(self, path1: str, path2: str, recursive: bool = False, **kwargs: Any) -> None:
        src = self._strip_protocol(path1).rstrip("/")
        dst = self._strip_protocol(path2).rstrip("/")
        if self.fs.type_name not in _OBJECT_KINDS or not self.isdir(src):
            super().mv(src, dst)
            return
        from pyarrow.fs import FileSelector, FileType

        # per object, not atomic: the capabilities of these kinds say so
        for info in self.fs.get_file_info(FileSelector(src, recursive=True)):
            target = f"{dst}/{info.path[len(src) + 1 :]}"
            if info.type == FileType.File:
                self.fs.move(info.path, target)
            elif info.type == FileType.Directory:
                self.fs.create_dir(target)
        self.fs.delete_dir(src)

    def find(
        self,
        path: str,
        maxdepth: int | None = None,
        withdirs: bool = False,
        detail: bool = False,
        **kwargs: Any,
    ) -> Any:
        if maxdepth is not None:
            return super().find(path, maxdepth, withdirs, detail, **kwargs)
        from pyarrow.fs import FileSelector, FileType

        path = self._strip_protocol(path).rstrip("/")
        selector = FileSelector(path, recursive=True, allow_not_found=True)
        found = {
            info.path: self._make_entry(info)
            for info in self.fs.get_file_info(selector)
            if withdirs or info.type != FileType.Directory
        }
        return dict(sorted(found.items())) if detail else sorted(found)


def _split(url: str) -> tuple[str, str, str]:
    """(scheme, authority, path); scheme and authority are "" for a bare path."""
    if "://" not in url:
        return "", "", url
    scheme, rest = url.split("://", 1)
    authority, slash, path = rest.partition("/")
    return scheme, authority, slash + path


def _hdfs_authority(fs: Any) -> str:
    """host:port of a HadoopFileSystem, from what it pickles to; "" for the default FS."""
    try:
        options = fs.__reduce__()[1][0]
        host, port = str(options["host"]), int(options["port"])
    except Exception:  # not pyarrow's HadoopFileSystem shape (a fake): the default FS
        return ""
    host = host.split("://", 1)[-1]
    if host in ("", "default"):
        return ""
    return f"{host}:{port}" if port else host


def arrow_store(fs: Any, url_or_path: str) -> FsspecStore:
    """A store over a pyarrow file system object; `url_or_path` is a path inside it (or a URL
    whose scheme is that file system's)."""
    kind = arrow_kind(fs)
    scheme, authority, path = _split(url_or_path)
    allowed = ARROW_SCHEMES.get(kind or "", ())
    if scheme and scheme not in allowed:
        inside = f"{authority}{path}" or "/"
        raise ConfigError(
            f"filesystem= is a pyarrow {type(fs).__name__} and {url_or_path!r} has another "
            f"scheme ({scheme}://): pass a path inside that file system "
            f"(open_store({inside!r}, filesystem=fs)), or drop filesystem= to open {scheme}:// "
            "itself"
        )
    if kind in _OBJECT_KINDS:
        path = f"{authority}{path}".strip("/")  # bucket/prefix
        if not path:
            raise ConfigError(f"{url_or_path!r}: a path in an object store starts with a bucket")
        root_url = f"{'gs' if kind == 'gcs' else 's3'}://{path}"
    elif kind == "local":
        path = os.path.abspath(os.path.expanduser(path))
        root_url = "file://" + path
    elif kind == "hdfs":
        path = "/" + path.strip("/")
        if not scheme:
            scheme, authority = "hdfs", _hdfs_authority(fs)
        root_url = f"{scheme}://{authority}{path}"
    else:
        name = re.sub(r"[^a-z0-9+.-]+", "-", str(getattr(fs, "type_name", "arrow")).lower())
        root_url = f"pyarrow-{name}://{path.lstrip('/')}"
    return FsspecStore(
        path,
        fs=ArrowFileSystem(fs),
        capabilities=arrow_capabilities(fs),
        root_url=root_url.rstrip("/") or root_url,
    )
