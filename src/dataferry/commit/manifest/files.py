"""The task manifest, in the JSON shape of Hadoop's manifest committer.

A manifest lists what one task attempt produced: `files` (source, destination, size, etag) and
`directories` (each destination directory with the state the task saw: not found, a file, a
directory). Paths are URIs exactly as Hadoop's `Path.toUri().toString()` prints them (encoded and
decoded in one place, `store/uris.py`), so a manifest written by Hadoop loads here and ours load
there. Unknown keys are ignored on load.

A manifest is read with a cap (MANIFEST_MAX_BYTES) and every field is type-checked: whatever is
wrong with the file gives one ValidationError naming its URL and the field at fault.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from ...errors import ConfigError, ValidationError
from ...store import Store
from ...store.uris import MalformedUri, from_hadoop_uri, store_url, to_hadoop_uri
from ..records.recordio import (
    TASK_RECORD_MAX_BYTES,
    get_dict,
    get_int,
    get_list,
    get_str,
    get_str_map,
    need_object,
    parse_json,
    read_record,
)

MANIFEST_TYPE = "org.apache.hadoop.mapreduce.lib.output.committer.manifest.files.TaskManifest/1"
MANIFEST_VERSION = 1
MANIFEST_MAX_BYTES = TASK_RECORD_MAX_BYTES
"""The largest task manifest read (64 MiB): a manifest grows by about 300 bytes per file the
task wrote, so this is some 200,000 files in one task. A larger file is refused, naming it."""


class EntryStatus(IntEnum):
    """Wire values of Hadoop's EntryStatus (any other value reads as unknown)."""

    UNKNOWN = 0
    NOT_FOUND = 1
    FILE = 2
    DIR = 3
    CREATED_DIR = 4

    @classmethod
    def of(cls, value: int) -> EntryStatus:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True)
class FileEntry:
    """One file to commit: store-relative source and destination, size, etag."""

    source: str
    dest: str
    size: int
    etag: str | None = None


@dataclass(frozen=True)
class DirEntry:
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
        files = []
        for f in self.files:
            entry: dict[str, Any] = {
                "s": marshal(store, f.source),
                "d": marshal(store, f.dest),
                "z": f.size,
            }
            if f.etag is not None:
                entry["e"] = f.etag
            files.append(entry)
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
                {"d": marshal(store, d.dest), "t": int(d.status), "l": d.level}
                for d in self.directories
            ],
            "extraData": dict(self.extra_data),
            "iostatistics": self.iostatistics,
        }

    def to_bytes(self, store: Store) -> bytes:
        # UTF-8 as it is, as Hadoop's Jackson writer does (paths are encoded URIs already)
        return json.dumps(self.to_json(store), indent=1, ensure_ascii=False).encode()

    @classmethod
    def from_bytes(cls, raw: bytes, store: Store | None, source: str) -> TaskManifest:
        """Parse and validate; every error names `source` and the field at fault."""
        if not raw:
            raise ValidationError("not a valid manifest file: empty", source)
        return cls.from_json(parse_json(raw, source), store, source)

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
            extra = get_str_map(data, "extraData", source)
        except ValidationError:
            raise ValidationError("keys and values must be strings", source, "extraData") from None
        for key in ("jobId", "taskID", "taskAttemptID"):
            if not isinstance(data.get(key), str) or not data[key]:
                raise ValidationError("missing or not a string", source, key)
        attempt_number = get_int(data, "jobAttemptNumber", source, default=0)
        attempt_dir = get_str(data, "taskAttemptDir", source, default="")
        iostatistics = get_dict(data, "iostatistics", source)
        files = []
        seen: set[str] = set()
        for i, f in enumerate(get_list(data, "files", source)):
            where = f"files[{i}]"
            if not isinstance(f, dict):
                raise ValidationError("not an object", source, where)
            for key in ("s", "d"):
                if not isinstance(f.get(key), str) or not f[key]:
                    raise ValidationError(f"empty or missing {key!r}", source, where)
            size = f.get("z")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise ValidationError(f"size {size!r} is not a non-negative integer", source, where)
            etag = f.get("e")
            if etag is not None and not isinstance(etag, str):
                raise ValidationError(f"etag {etag!r} is not a string", source, where)
            dest = unmarshal(store, f["d"], source, where)
            if dest in seen:
                raise ValidationError(
                    f"destination {f['d']} is written to by more than one entry", source, where
                )
            seen.add(dest)
            files.append(
                FileEntry(unmarshal(store, f["s"], source, where), dest, size, etag or None)
            )
        dirs = []
        for i, d in enumerate(get_list(data, "directories", source)):
            where = f"directories[{i}]"
            if not isinstance(d, dict) or not isinstance(d.get("d"), str) or not d["d"]:
                raise ValidationError("empty or missing 'd'", source, where)
            t, lvl = d.get("t", 0), d.get("l", 0)
            if (
                not isinstance(t, int)
                or isinstance(t, bool)
                or t < 0
                or not isinstance(lvl, int)
                or isinstance(lvl, bool)
                or lvl < 0
            ):
                raise ValidationError("type and level must be non-negative integers", source, where)
            dirs.append(DirEntry(unmarshal(store, d["d"], source, where), EntryStatus.of(t), lvl))
        return cls(
            job_id=data["jobId"],
            job_attempt_number=attempt_number,
            task_id=data["taskID"],
            task_attempt_id=data["taskAttemptID"],
            task_attempt_dir=unmarshal(store, attempt_dir, source, "taskAttemptDir"),
            files=files,
            directories=dirs,
            extra_data=extra,
            iostatistics=iostatistics,
        )


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
