"""`dataferry check-store URL`: find out by experiment what a store can do, and which committer
is safe and fast on it.

Every probe runs in a scratch prefix that is removed afterwards:
- write and read back; is a new file listed at once (consistent listing)?
- are there etags (from stat and from listings)?
- is create-if-absent honoured (a second create refused)?
- file rename: does it work, and does its time grow with the file's size (a copy) or not
  (a metadata operation, atomic and O(1) on every store we know)? Is the etag kept?
- directory rename: does its time grow with the number of files (per-file, not atomic)?
- multipart upload: can one be started and aborted? (GCS: does a resumable session's object
  stay invisible until the session is finalized?)
"""

from __future__ import annotations

import os
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import DataferryError
from ..store import Capabilities, Store, open_store, paths

SMALL = 1024
LARGE = 16 * 1024 * 1024
DIR_FILES = 32


# a finding's name where the store's declared capability is named otherwise
DECLARED_AS = {
    "atomic_o1_file_rename": "atomic_file_rename",
    "atomic_o1_dir_rename": "atomic_dir_rename",
}


@dataclass
class Finding:
    name: str
    value: bool | None
    detail: str


@dataclass
class ProbeReport:
    url: str
    declared: Capabilities
    findings: list[Finding] = field(default_factory=list)
    recommended: str = ""
    reason: str = ""

    def measured(self) -> dict[str, bool | None]:
        return {f.name: f.value for f in self.findings}

    def declared_value(self, finding: str) -> bool | None:
        """What the store declares about a finding's capability; None when it declares
        nothing about it."""
        return self.declared.as_dict().get(DECLARED_AS.get(finding, finding))

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "declared": self.declared.as_dict(),
            "measured": {f.name: {"value": f.value, "detail": f.detail} for f in self.findings},
            "recommended": self.recommended,
            "reason": self.reason,
        }


def _timed(fn: Callable[[], object], repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _grows(small_s: float, large_s: float, ratio: float, floor_s: float) -> bool:
    return large_s > ratio * small_s and large_s - small_s > floor_s


def probe_store(url: str) -> ProbeReport:
    """Probe the store at `url` in a scratch prefix; afterwards nothing the probe created is
    left, neither the prefix nor, on local disk, the directories above it it had to make."""
    store = open_store(url)
    scratch = f"_dataferry_probe_{uuid.uuid4().hex[:10]}"
    report = ProbeReport(store.full_url(), store.capabilities)
    add = report.findings.append
    made_from = _first_missing_directory(store)
    try:
        _run_probes(store, scratch, add)
    finally:
        try:
            store.delete(scratch, recursive=True)
        except Exception:
            pass
        if made_from is not None:
            _remove_empty_directories(_local_root(store) or "", made_from)
    report.recommended, report.reason = recommend(report.measured(), store.capabilities)
    return report


def _local_root(store: Store) -> str | None:
    url = store.full_url()
    return url[len("file://") :] if url.startswith("file://") else None


def _first_missing_directory(store: Store) -> str | None:
    """On local disk, the highest directory of the store's root that does not exist yet (the
    probe's writes will create it and those below); None when the root exists or the store
    is not local."""
    root = _local_root(store)
    if root is None or os.path.exists(root):
        return None
    missing = root
    while not os.path.exists(os.path.dirname(missing)):
        missing = os.path.dirname(missing)
    return missing


def _remove_empty_directories(root: str, top: str) -> None:
    """Remove `root` and its parents up to `top`, each only while it is empty."""
    directory = root
    while True:
        try:
            os.rmdir(directory)
        except OSError:
            return
        if directory == top or len(directory) <= len(top):
            return
        directory = os.path.dirname(directory)


def _run_probes(store: Store, base: str, add: Callable[[Finding], None]) -> None:
    p = paths.join
    store.write_bytes(p(base, "a"), b"x" * SMALL)
    if store.read_bytes(p(base, "a")) != b"x" * SMALL:
        raise DataferryError(
            f"{store.full_url(base)}: a file read back differs from what was written"
        )
    listed = [s.path for s in store.list(base)]
    add(
        Finding(
            "consistent_listing",
            p(base, "a") in listed,
            "a new file is listed at once"
            if p(base, "a") in listed
            else "a new file was not listed",
        )
    )
    st = store.stat(p(base, "a"))
    add(Finding("etags", bool(st.etag), f"etag {st.etag!r}" if st.etag else "no etag from stat"))
    first = store.create_if_absent(p(base, "once"), b"1")
    second = store.create_if_absent(p(base, "once"), b"2")
    honoured = first and not second and store.read_bytes(p(base, "once")) == b"1"
    add(
        Finding(
            "conditional_create",
            honoured,
            "a second create-if-absent was refused"
            if honoured
            else "a second create-if-absent overwrote or failed",
        )
    )

    # file rename: time against size
    store.write_bytes(p(base, "large"), b"y" * LARGE)
    counter = iter(range(1_000_000))

    def rename_round_trip(name: str) -> Callable[[], None]:
        def go() -> None:
            n = next(counter)
            store.rename(p(base, name), p(base, f"{name}-{n}"))
            store.rename(p(base, f"{name}-{n}"), p(base, name))

        return go

    try:
        small_s = _timed(rename_round_trip("a"))
        large_s = _timed(rename_round_trip("large"))
    except DataferryError as e:
        add(Finding("file_rename", False, f"rename failed: {e}"))
        small_s = large_s = 0.0
    else:
        copies = _grows(small_s, large_s, ratio=1.5, floor_s=0.005)
        add(Finding("file_rename", True, "works"))
        add(
            Finding(
                "atomic_o1_file_rename",
                not copies,
                f"1 KiB: {small_s * 500:.2f} ms, 16 MiB: {large_s * 500:.2f} ms per rename: "
                + (
                    "time grows with size, so rename copies the bytes (not atomic)"
                    if copies
                    else "independent of size: a metadata operation"
                ),
            )
        )
        before = store.stat(p(base, "large")).etag
        store.rename(p(base, "large"), p(base, "large-moved"))
        after = store.stat(p(base, "large-moved")).etag
        add(
            Finding(
                "etags_preserved_by_rename",
                bool(before) and before == after,
                f"{before!r} -> {after!r}",
            )
        )

    # directory rename: time against number of files
    for i in range(DIR_FILES):
        store.write_bytes(p(base, "many", f"f{i}"), b"z")
    store.write_bytes(p(base, "one", "f0"), b"z")

    try:
        one_s = _timed(rename_round_trip("one"))
        many_s = _timed(rename_round_trip("many"))
    except DataferryError as e:
        add(Finding("atomic_o1_dir_rename", False, f"directory rename failed: {e}"))
    else:
        per_file = _grows(one_s, many_s, ratio=4.0, floor_s=0.010)
        add(
            Finding(
                "atomic_o1_dir_rename",
                not per_file,
                f"1 file: {one_s * 500:.2f} ms, {DIR_FILES} files: {many_s * 500:.2f} ms per rename: "
                + (
                    "grows with the files: renamed file by file, not atomic"
                    if per_file
                    else "independent of the files: atomic"
                ),
            )
        )

    if store.capabilities.resumable_upload:
        _probe_session(store, p(base, "session"), add)
        return
    try:
        upload = store.initiate_upload(p(base, "mpu"))
        store.upload_part(p(base, "mpu"), upload, 1, b"part")
        hidden = not store.exists(p(base, "mpu"))
        store.abort_upload(p(base, "mpu"), upload)
        add(
            Finding(
                "multipart_upload",
                hidden,
                "a part was uploaded, invisible, and the upload aborted"
                if hidden
                else "an uploaded part was visible before the upload completed",
            )
        )
    except DataferryError as e:
        add(Finding("multipart_upload", False, str(e)))
    if store.capabilities.block_lists:  # the client's uploads are Azure block lists
        add(Finding("block_lists", True, "uploads are blocks staged under the final name"))


def _probe_session(store: Store, path: str, add: Callable[[Finding], None]) -> None:
    """A resumable upload session (GCS): its bytes sent, then invisible until finalized."""
    data = b"s" * (store.min_part_size + 10)
    try:
        upload = store.initiate_upload(path)
        etag = store.upload_part(path, upload, 1, data)
        hidden = not store.exists(path)
        store.complete_upload(path, upload, [etag])
        works = hidden and store.read_bytes(path) == data
        detail = (
            "a session's bytes stayed invisible until it was finalized"
            if works
            else "a session's object was visible before it was finalized, or differs"
        )
        add(Finding("resumable_upload", works, detail))
    except DataferryError as e:
        add(Finding("resumable_upload", False, str(e)))


def recommend(
    measured: dict[str, bool | None], declared: Capabilities | None = None
) -> tuple[str, str]:
    """The committer for what was measured. A rename that looked fast is trusted only where
    the client declares it atomic too (adlfs's copy is quick on an emulator and still a copy)."""
    trusted = declared is None or declared.atomic_file_rename
    if measured.get("atomic_o1_file_rename") and trusted:
        return (
            "manifest",
            "file rename is a metadata operation: parallel renames at job commit are safe and fast",
        )
    if measured.get("block_lists") and measured.get("multipart_upload"):
        return (
            "blocklist",
            "no real rename, but blocks staged under the final name: job commit puts each "
            "file's block list and copies nothing",
        )
    if measured.get("multipart_upload"):
        return (
            "magic",
            "no real rename, but multipart upload: uploads completed at job commit copy nothing",
        )
    if measured.get("resumable_upload"):
        return (
            "magic-gcs",
            "no real rename, but resumable upload sessions: sessions finalized at job commit "
            "copy nothing",
        )
    return (
        "none",
        "no atomic rename and no multipart upload: no rename-based committer is safe here",
    )
