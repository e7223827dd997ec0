"""The `sim:` store models: one profile per modelled store, in one table (`PROFILES`).

A profile gives a store's per-request latency, its requests-per-second ceilings and what it
does over them, its bandwidth, its rename semantics and its multipart limits. These numbers are
models, not measurements: docs/store-models.md holds the same table and the public facts it
rests on. `SimStore` (`store.py`) applies a profile to a local directory.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from typing import Literal

from ...errors import ConfigError
from ..types import Capabilities
from .uploads import MultipartLimits

MB = 1_000_000
MiB = 1024 * 1024
GiB = 1024 * MiB


@dataclass(frozen=True)
class SimProfile:
    """One store model. Ceilings are requests per second (0: none)."""

    name: str
    models: str
    latency_s: float
    write_ops_per_s: float
    read_ops_per_s: float
    per_prefix_ceiling: bool
    bandwidth_bytes_s: float
    copy_bandwidth_bytes_s: float
    rename: Literal["atomic", "copy"]
    list_page: int  # entries per listing request (object stores page listings)
    delete_batch: int  # objects per bulk-delete request on a flat namespace
    etags: bool
    conditional_create: bool
    # over the ceiling: `queue` (the request waits its turn: a NameNode's RPC queue, a client-side
    # rate limiter) or `slowdown` (the service answers 503 Slow Down and the client's SDK retries
    # after an exponential backoff with full jitter, base factor 2, at most 20 s)
    over_ceiling: Literal["queue", "slowdown"] = "queue"
    # multipart upload and its limits, on models of stores that have it (None: no multipart)
    multipart: MultipartLimits | None = None
    # closing a written file waits on the server (HDFS's block report): a job commit writes
    # its records ahead, beside its claim, as on a real NameNode
    slow_close: bool = False

    @property
    def capabilities(self) -> Capabilities:
        atomic = self.rename == "atomic"
        return Capabilities(
            atomic_file_rename=atomic,
            atomic_dir_rename=atomic,
            o1_dir_rename=atomic,
            etags=self.etags,
            etags_preserved_by_rename=self.etags and atomic,
            consistent_listing=True,
            conditional_create=self.conditional_create,
            multipart_upload=self.multipart is not None,
            # HDFS and ABFS (ADLS Gen2) append to a file; object stores rewrite it whole
            native_append=self.rename != "copy",
            native_positional_write=False,  # none of the modelled stores writes in place
            # a namespace (HDFS, ADLS Gen2) deletes a tree in one request (`_delete` charges
            # one); a flat namespace lists and deletes object by object
            tree_delete=atomic,
            slow_close=self.slow_close,
        )


# The one table of the models. Keep docs/store-models.md in step with it.
PROFILES: dict[str, SimProfile] = {
    p.name: p
    for p in (
        SimProfile(
            name="hdfs",
            models="HDFS with a healthy NameNode: ~1 ms per metadata RPC",
            latency_s=0.001,
            write_ops_per_s=20_000,
            read_ops_per_s=20_000,
            per_prefix_ceiling=False,
            bandwidth_bytes_s=400 * MB,
            copy_bandwidth_bytes_s=400 * MB,
            rename="atomic",
            list_page=1_000,
            delete_batch=1,
            etags=False,
            conditional_create=True,
            slow_close=True,
        ),
        SimProfile(
            name="hdfs-loaded",
            models="HDFS whose NameNode is under heavy load (the Hive-insert seed): "
            "25 ms per RPC, ~1,000 RPC/s in all",
            latency_s=0.025,
            write_ops_per_s=1_000,
            read_ops_per_s=1_000,
            per_prefix_ceiling=False,
            bandwidth_bytes_s=200 * MB,
            copy_bandwidth_bytes_s=200 * MB,
            rename="atomic",
            list_page=1_000,
            delete_batch=1,
            etags=False,
            conditional_create=True,
            slow_close=True,
        ),
        SimProfile(
            name="abfs",
            models="Azure ADLS Gen2 (hierarchical namespace): atomic O(1) rename, etags, "
            "15 ms per request, client rate limit 2,000 requests/s",
            latency_s=0.015,
            write_ops_per_s=2_000,
            read_ops_per_s=2_000,
            per_prefix_ceiling=False,
            bandwidth_bytes_s=100 * MB,
            copy_bandwidth_bytes_s=100 * MB,
            rename="atomic",
            list_page=5_000,
            delete_batch=1,
            etags=True,
            conditional_create=True,
        ),
        SimProfile(
            name="gcs",
            models="Google Cloud Storage: rename = rewrite + delete per object, "
            "~1,000 writes/s and ~5,000 reads/s per bucket, 30 ms per request",
            latency_s=0.030,
            write_ops_per_s=1_000,
            read_ops_per_s=5_000,
            per_prefix_ceiling=False,
            bandwidth_bytes_s=100 * MB,
            copy_bandwidth_bytes_s=200 * MB,
            rename="copy",
            list_page=1_000,
            delete_batch=100,
            etags=True,
            conditional_create=True,
            over_ceiling="slowdown",
        ),
        SimProfile(
            name="s3",
            models="Amazon S3: no rename (COPY + DELETE per object), 3,500 writes/s and "
            "5,500 reads/s per prefix, 20 ms per request, multipart upload",
            latency_s=0.020,
            write_ops_per_s=3_500,
            read_ops_per_s=5_500,
            per_prefix_ceiling=True,
            bandwidth_bytes_s=100 * MB,
            copy_bandwidth_bytes_s=150 * MB,
            rename="copy",
            list_page=1_000,
            delete_batch=1_000,
            etags=True,
            conditional_create=True,
            over_ceiling="slowdown",
            # S3's published limits: parts 1..10,000; 5 MiB to 5 GiB each, the last may be less
            multipart=MultipartLimits(
                min_part_size=5 * MiB, max_part_size=5 * GiB, max_parts=10_000
            ),
        ),
    )
}


def parse_sim_url(url: str) -> tuple[SimProfile, str]:
    """`sim:PROFILE[:dir]` -> (profile, directory); no directory gives a fresh temporary one."""
    rest = url[len("sim:") :]
    name, _, directory = rest.partition(":")
    profile = PROFILES.get(name)
    if profile is None:
        raise ConfigError(
            f"unknown store model {name!r} in {url!r}; known: {', '.join(sorted(PROFILES))}"
        )
    if not directory:
        directory = tempfile.mkdtemp(prefix=f"dataferry-sim-{name}-")
    return profile, directory
