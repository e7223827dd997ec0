"""The task manifest, in the JSON shape of Hadoop's manifest committer.

A manifest lists what one task attempt produced: `files` (source, destination, size, etag) and
`directories` (each destination directory, with the state the task saw it in where it looked:
Hadoop's tasks do; dataferry's record it unknown and leave the looking to the job commit). Paths are URIs exactly as Hadoop's `Path.toUri().toString()` prints them (encoded and
decoded in one place, `store/uris.py`), so a manifest written by Hadoop loads here and ours load
there. Unknown keys are ignored on load.

A manifest is read with a cap (MANIFEST_MAX_BYTES) and every field is type-checked: whatever is
wrong with the file gives one ValidationError naming its URL and the field at fault.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Annotated, Any, Literal

import msgspec

from ...errors import ConfigError, ValidationError
from ...store import Store
from ...store.uris import (
    MalformedUri,
    from_hadoop_uri,
    store_url,
    to_hadoop_uri,
    to_hadoop_uris,
    uri_reader,
)
from ..records.recordio import TASK_RECORD_MAX_BYTES, need_object, parse_json, read_record

MANIFEST_TYPE = "org.apache.hadoop.mapreduce.lib.output.committer.manifest.files.TaskManifest/1"
MANIFEST_VERSION = 1
MANIFEST_MAX_BYTES = TASK_RECORD_MAX_BYTES
"""The largest task manifest read (64 MiB): a manifest grows by about 300 bytes per file the
task wrote, so this is some 200,000 files in one task. A larger file is refused, naming it."""

NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
Count = Annotated[int, msgspec.Meta(ge=0)]  # a JSON true is no number here


class EntryStatus(IntEnum):
    """Wire values of Hadoop's EntryStatus (any other value reads as unknown)."""

    UNKNOWN = 0
    NOT_FOUND = 1
    FILE = 2
    DIR = 3
    CREATED_DIR = 4

    @classmethod
    def of(cls, value: int) -> EntryStatus:
        # a look-up, not the enum's own call: a manifest has a directory entry per partition
        return _STATUSES.get(value, EntryStatus.UNKNOWN)


_STATUSES = {int(s): s for s in EntryStatus}


class FileEntry(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """One file to commit: store-relative source and destination, size, etag. In the job's
    entries file it is the row `[source, dest, size, etag]`, decoded and checked in one pass."""

    source: NonEmpty
    dest: NonEmpty
    size: Count
    etag: str | None = None


class DirEntry(msgspec.Struct, frozen=True, gc=False):
    """A directory the task's files need, with the state the task saw it in (unknown where it
    did not look, as dataferry's tasks do not)."""

    dest: str
    status: EntryStatus
    level: int


@dataclass
class TaskManifest:
    job_id: str
    job_attempt_number: int
    task_id: str
    task_attempt_id: str
    task_attempt_dir: str
    files: list[FileEntry] = field(default_factory=list)
    directories: list[DirEntry] = field(default_factory=list)
    extra_data: dict[str, str] = field(default_factory=dict)
    iostatistics: dict[str, Any] = field(default_factory=dict)

    @property
    def total_size(self) -> int:
        return sum(f.size for f in self.files)

    # --- JSON ------------------------------------------------------------------------------

    def to_json(self, store: Store) -> dict[str, Any]:
        # every path's URI in one pass (the store's own URI worked out once): a task commit
        # writes two per file, and one by one they were most of its time
        uris = to_hadoop_uris(
            store,
            [f.source for f in self.files]
            + [f.dest for f in self.files]
            + [d.dest for d in self.directories],
        )
        n = len(self.files)
        files = [
            {"s": s, "d": d, "z": f.size}
            if f.etag is None
            else {"s": s, "d": d, "z": f.size, "e": f.etag}
            for f, s, d in zip(self.files, uris[:n], uris[n : 2 * n], strict=True)
        ]
        return {
            "type": MANIFEST_TYPE,
            "version": MANIFEST_VERSION,
            "jobId": self.job_id,
            "jobAttemptNumber": self.job_attempt_number,
            "taskID": self.task_id,
            "taskAttemptID": self.task_attempt_id,
            "taskAttemptDir": marshal(store, self.task_attempt_dir),
            "files": files,
            "directories": [
                {"d": uri, "t": int(d.status), "l": d.level}
                for d, uri in zip(self.directories, uris[2 * n :], strict=True)
            ],
            "extraData": dict(self.extra_data),
            "iostatistics": self.iostatistics,
        }

    def to_bytes(self, store: Store) -> bytes:
        # UTF-8 as it is, as Hadoop's Jackson writer does (paths are encoded URIs already),
        # indented for a reader; msgspec's encoder is some 5x json's when indenting
        return msgspec.json.format(_ENCODER.encode(self.to_json(store)), indent=1)

    @classmethod
    def from_bytes(cls, raw: bytes, store: Store | None, source: str) -> TaskManifest:
        """Parse and validate; every error names `source` and the field at fault. A good
        manifest is decoded and type-checked in one pass (msgspec); a bad one is read again
        the slow way, which tells what is wrong with it first."""
        if not raw:
            raise ValidationError("not a valid manifest file: empty", source)
        try:
            wire = _DECODER.decode(raw)
        except msgspec.MsgspecError:
            return cls.from_json(parse_json(raw, source), store, source)
        return cls._of(wire, store, source)

    @classmethod
    def from_json(cls, data: Any, store: Store | None, source: str) -> TaskManifest:
        """With a store, paths become store-relative and must lie inside it; without one
        (to show a manifest from anywhere), paths stay the URIs they are."""
        data = need_object(data, source)
        if data.get("type") != MANIFEST_TYPE:
            raise ValidationError(f"wrong type {data.get('type')!r}", source, "type")
        if data.get("version") != MANIFEST_VERSION or isinstance(data.get("version"), bool):
            raise ValidationError(f"wrong version {data.get('version')!r}", source, "version")
        try:
            wire = msgspec.convert(data, _WireManifest)
        except msgspec.ValidationError as e:
            message, _, where = str(e).partition(" - at `$")
            raise ValidationError(message, source, where.rstrip("`").lstrip(".")) from None
        return cls._of(wire, store, source)

    @classmethod
    def _of(cls, wire: _WireManifest, store: Store | None, source: str) -> TaskManifest:
        """The checked wire form as a manifest: its URIs read (each inside the store) and no
        destination written by two entries."""
        read = _reader(store, source)
        wired = wire.files or ()
        dests = read([f.dest for f in wired], "files")
        if len(set(dests)) != len(dests):
            seen: set[str] = set()
            for i, dest in enumerate(dests):
                if dest in seen:
                    raise ValidationError(
                        f"destination {wired[i].dest} is written to by more than one entry",
                        source,
                        f"files[{i}]",
                    )
                seen.add(dest)
        attempt_dir = unmarshal(store, wire.taskAttemptDir or "", source, "taskAttemptDir")
        sources = read([f.source for f in wired], "files", attempt_dir)
        files = [
            FileEntry(s, d, f.size, f.etag or None)
            for s, d, f in zip(sources, dests, wired, strict=True)
        ]
        wired_dirs = wire.directories or ()
        dirs = [
            DirEntry(dest, EntryStatus.of(d.status), d.level)
            for dest, d in zip(
                read([d.dest for d in wired_dirs], "directories"), wired_dirs, strict=True
            )
        ]
        return cls(
            job_id=wire.jobId,
            job_attempt_number=wire.jobAttemptNumber or 0,
            task_id=wire.taskID,
            task_attempt_id=wire.taskAttemptID,
            task_attempt_dir=attempt_dir,
            files=files,
            directories=dirs,
            extra_data=dict(wire.extraData or {}),
            iostatistics=dict(wire.iostatistics or {}),
        )


class _WireFile(msgspec.Struct, gc=False):
    source: NonEmpty = msgspec.field(name="s")
    dest: NonEmpty = msgspec.field(name="d")
    size: Count = msgspec.field(name="z")
    etag: str | None = msgspec.field(default=None, name="e")


class _WireDir(msgspec.Struct, gc=False):
    dest: NonEmpty = msgspec.field(name="d")
    status: Count = msgspec.field(default=0, name="t")
    level: Count = msgspec.field(default=0, name="l")


class _WireManifest(msgspec.Struct):
    """A manifest's JSON as Hadoop writes it (unknown keys ignored; null is as if missing)."""

    type: Literal[MANIFEST_TYPE]
    version: Literal[1]
    jobId: NonEmpty  # Hadoop's names
    taskID: NonEmpty
    taskAttemptID: NonEmpty
    jobAttemptNumber: Count | None = None
    taskAttemptDir: str | None = None
    files: list[_WireFile] | None = None
    directories: list[_WireDir] | None = None
    extraData: dict[str, str] | None = None
    iostatistics: dict[str, Any] | None = None


_DECODER = msgspec.json.Decoder(_WireManifest)
_ENCODER = msgspec.json.Encoder()


def _reader(store: Store | None, source: str) -> Callable[..., list[str]]:
    """`unmarshal` for a list of a manifest's URIs (`files` or `directories`), the store's URI
    prefix worked out once and the common case read in bulk (`under` a directory where they
    lie, its URI is read once: a task's sources, under its attempt directory); a URI at fault
    is named by its index, as `unmarshal` names it."""
    fast = None if store is None else uri_reader(store)

    def read(uris: list[str], kind: str, under: str = "") -> list[str]:
        if fast is not None:
            try:
                return fast.many(uris, under)
            except (MalformedUri, ConfigError):
                pass  # unmarshal names what is wrong and where
        return [unmarshal(store, uri, source, f"{kind}[{i}]") for i, uri in enumerate(uris)]

    return read


def read_manifest(store: Store, path: str) -> TaskManifest:
    """The manifest at `path` of `store` (its paths made store-relative): read with the cap,
    parsed and checked. NotFound if absent; one ValidationError naming the file otherwise."""
    raw = read_record(store, path, MANIFEST_MAX_BYTES)
    return TaskManifest.from_bytes(raw, store, store.full_url(path))


def marshal(store: Store, path: str) -> str:
    """Store-relative path -> the URI Hadoop writes for it (`store.uris`)."""
    return to_hadoop_uri(store, path)


def unmarshal(store: Store | None, uri: str, source: str = "", where: str = "") -> str:
    """URI -> store-relative path, decoded once; refuses a malformed URI or one outside the
    store, naming it. Without a store (to show a manifest from anywhere) the URI comes back
    as a plain store URL."""
    try:
        return store_url(uri) if store is None else from_hadoop_uri(store, uri)
    except MalformedUri as e:
        raise ValidationError(f"path {uri!r} is not a valid URI: {e}", source, where) from None
    except ConfigError:
        assert store is not None
        raise ValidationError(
            f"path {uri!r} is outside the destination {store.full_url()}", source, where
        ) from None


def load_manifest_file(location: str) -> tuple[TaskManifest, int]:
    """Load one manifest file from any location (for display); returns it and its size."""
    from ...store import open_location

    store, name = open_location(location, "")
    if not name:
        raise ValidationError("is a directory, not a manifest file", location)
    raw = read_record(store, name, MANIFEST_MAX_BYTES)
    return TaskManifest.from_bytes(raw, None, store.full_url(name)), len(raw)


def manifest_files_in(location: str) -> list[str]:
    """The manifest files in a directory (names ending `-manifest.json`), or [location]."""
    from ...store import open_location

    store, name = open_location(location, "")
    if name:
        return [location]
    return [
        f"{location.rstrip('/')}/{s.name}"
        for s in store.list("")
        if s.name.endswith("-manifest.json") and not s.is_dir
    ]
