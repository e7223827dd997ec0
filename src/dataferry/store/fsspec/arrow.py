"""pyarrow file systems as stores, and HDFS through pyarrow.

A `pyarrow.fs.FileSystem` object (`open_store(path, filesystem=fs)`) is wrapped the way fsspec
wraps one (`ArrowFSWrapper`) and served by an FsspecStore, with capabilities declared per
pyarrow type (`ARROW_CAPABILITIES`): pyarrow's own FileInfo carries no etags and its output
streams always overwrite, so none of them declares etags or an exclusive create.

`hdfs://host:port/path` and `viewfs://cluster/path` URLs open pyarrow's HadoopFileSystem, which
drives Hadoop's Java client through libhdfs and JNI. It needs libhdfs.so, a JVM (JAVA_HOME)
and Hadoop's jars (CLASSPATH); when one is missing, the error says which and how to provide
it (`hdfs_missing`).
"""

from __future__ import annotations

import ctypes.util
import os
import re
import sys
from typing import Any

from fsspec.implementations.arrow import ArrowFSWrapper

from ...errors import ConfigError, StoreError
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
HDFS_OPTIONS = (
    "user",
    "replication",
    "buffer_size",
    "default_block_size",
    "kerb_ticket",
    "extra_conf",
)
HDFS_DEFAULT_PORT = 8020


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


# --- HDFS ------------------------------------------------------------------------------------


def hadoop_store(url: str, storage_options: dict[str, Any] | None = None) -> FsspecStore:
    """The store at `hdfs://host:port/path` (port 8020 when not given; `hdfs:///path` is the
    default file system of the Hadoop configuration) or `viewfs://cluster/path`.
    `storage_options` are HadoopFileSystem's: user, replication, buffer_size,
    default_block_size, kerb_ticket, extra_conf (Hadoop settings, as in hdfs-site.xml)."""
    options = dict(storage_options or {})
    unknown = sorted(k for k in options if k not in HDFS_OPTIONS)
    if unknown:
        raise ConfigError(
            f"HDFS storage option {unknown[0]!r} is not supported; accepted: "
            f"{', '.join(HDFS_OPTIONS)} (pyarrow.fs.HadoopFileSystem's)"
        )
    scheme, authority, _path = _split(url)
    if scheme == "viewfs":
        host, port = f"viewfs://{authority}", 0
    elif not authority:
        host, port = "default", 0
    else:
        host, _, port_text = authority.partition(":")
        try:
            port = int(port_text) if port_text else HDFS_DEFAULT_PORT
        except ValueError:
            raise ConfigError(f"{url!r}: the port {port_text!r} is not a number") from None
    try:
        from pyarrow.fs import HadoopFileSystem
    except ImportError:
        raise ConfigError(f"{url!r} needs pyarrow (pip install pyarrow)") from None
    try:
        fs = HadoopFileSystem(host, port, **options)
    except TypeError as e:
        raise ConfigError(f"{url!r}: HDFS storage options: {e}") from None
    except OSError as e:
        first = (str(e).splitlines() or [""])[0]
        missing = hdfs_missing()
        if missing or "libhdfs" in str(e) or "libjvm" in str(e):
            raise ConfigError(hdfs_message(url, first, missing)) from None
        raise StoreError(f"cannot connect to {url}: {first}") from None
    return arrow_store(fs, url)


_JVM_DIRS = ("", "lib/server", "jre/lib/amd64/server", "lib/amd64/server", "jre/lib/server")


def hdfs_missing(environ: dict[str, str] | None = None) -> list[str]:
    """What libhdfs needs and this process lacks, one line each with how to provide it (the
    places searched are those pyarrow searches)."""
    env = os.environ if environ is None else environ
    missing = []
    libdir, hadoop_home = env.get("ARROW_LIBHDFS_DIR"), env.get("HADOOP_HOME")
    candidates = []
    if libdir:
        candidates.append(os.path.join(libdir, "libhdfs.so"))
    if hadoop_home:
        candidates.append(os.path.join(hadoop_home, "lib", "native", "libhdfs.so"))
    if not any(os.path.isfile(c) for c in candidates) and not ctypes.util.find_library("hdfs"):
        where = "; ".join(
            [f"ARROW_LIBHDFS_DIR={libdir} holds none"] * bool(libdir)
            + [f"HADOOP_HOME={hadoop_home} has none in lib/native"] * bool(hadoop_home)
            + ["ARROW_LIBHDFS_DIR and HADOOP_HOME are not set"] * (not libdir and not hadoop_home)
            + ["none on the library path"]
        )
        missing.append(
            f"libhdfs.so (Hadoop's C client) was not found ({where}): set ARROW_LIBHDFS_DIR "
            "to the directory that holds libhdfs.so, or HADOOP_HOME to the Hadoop installation "
            "(it has lib/native/libhdfs.so)"
        )
    java_home = env.get("JAVA_HOME")
    if not java_home:
        missing.append(
            "JAVA_HOME is not set: set it to the Java installation (JDK or JRE) whose "
            "lib/server/libjvm.so libhdfs loads"
        )
    elif not any(os.path.isfile(os.path.join(java_home, d, "libjvm.so")) for d in _JVM_DIRS):
        looked = ", ".join(d or "." for d in _JVM_DIRS)
        missing.append(
            f"JAVA_HOME={java_home} has no libjvm.so (looked in {looked}): set it to a Java "
            "installation"
        )
    classpath = env.get("CLASSPATH", "")
    if not classpath.strip():
        missing.append(
            "CLASSPATH is not set: libhdfs starts the JVM with Hadoop's jars from it; "
            "export CLASSPATH=$(hadoop classpath --glob)"
        )
    elif "hadoop" not in classpath.lower():
        missing.append("CLASSPATH names no Hadoop jar: export CLASSPATH=$(hadoop classpath --glob)")
    return missing


def hdfs_message(url: str, pyarrow_said: str, missing: list[str]) -> str:
    lines = [f"cannot open {url}: pyarrow could not load HDFS support ({pyarrow_said})."]
    if missing:
        lines.append("Missing:")
        lines.extend(f"  - {m}" for m in missing)
    else:
        lines.append(
            "libhdfs.so, JAVA_HOME and CLASSPATH look set; check that they match "
            "(libhdfs of the same Hadoop as the jars, a 64-bit JVM)"
        )
    return "\n".join(lines)
