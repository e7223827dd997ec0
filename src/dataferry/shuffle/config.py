"""Configuration of the push-based shuffle: the service (merger), the pusher and the driver.

Each option that mirrors a Spark option names it; defaults are Spark's unless said otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ConfigError
from ..net import ConnectionLimits

MiB = 1024 * 1024


@dataclass(frozen=True)
class ShuffleServiceConfig:
    """The shuffle service: its merge side, its frames and its connections.

    min_chunk_size: `spark.shuffle.push.server.minChunkSizeInMergedShuffleFile` (2m): a merged
        chunk closes at the first block boundary past this size.
    io_exceptions_threshold: `spark.shuffle.push.server.ioExceptionsThresholdDuringMerge` (4):
        past this many failed writes a partition stops merging.
    max_deferred_bytes: memory for blocks waiting while another block of the same partition is
        written. Spark leaves this unbounded (SPARK-38965); here a push past it is answered
        BUSY, which the pusher retries later.
    max_frame_bytes: largest request payload accepted (a push batch is at most 3 MiB).
    token: the service-wide secret ("" for none): it only registers applications (and reads
        statistics); each registered application gets its own credential, which every request
        on its data needs (`tenancy.py`). Never shown by repr().
    max_apps: live applications registered at once (10000); past it REGISTER is refused
        (429). Applications past their lease do not count.
    app_lease_s: an application that makes no request for this long (3600 s) is expired: its
        files and its registration are removed and its id is free again. Any request of the
        application renews it, and its driver renews it every third of the lease while a
        shuffle is open (`LeaseKeeper`). Spark's external shuffle service has no such option
        (YARN tells it when an application ends).
    app_max_merged_bytes: merged bytes on disk per application (64 GiB); a push past it is
        answered QUOTA (its blocks are read from the map outputs). Spark has no such option.
    app_max_connections: open connections per application (512); past it HELLO is refused
        (429; pushers leave the merger alone, readers retry).
    app_max_pending_merges: merges per application holding files and not finalized (64); a
        push that would begin one more is answered QUOTA.
    limits: timeouts, the cap of connections per client address, and what a connection may
        send before it has authenticated.
    merge_by_reference: a block pushed by reference (its map output on this host) is merged
        as a stub naming where it lies, so its bytes are written once, in the map output; the
        reader resolves the stub (mapped from the file on the host, or fetched from the
        service holding it). False: its bytes are copied into the merged file, which then
        stands alone as Spark's does.
    """

    min_chunk_size: int = 2 * MiB
    io_exceptions_threshold: int = 4
    max_deferred_bytes: int = 64 * MiB
    max_frame_bytes: int = 16 * MiB
    token: str = field(default="", repr=False)
    limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    max_apps: int = 10_000
    app_lease_s: float = 3600.0
    app_max_merged_bytes: int = 64 * 1024 * MiB
    app_max_connections: int = 512
    app_max_pending_merges: int = 64
    merge_by_reference: bool = True

    def __post_init__(self) -> None:
        if min(self.max_apps, self.app_max_connections, self.app_max_pending_merges) < 1:
            raise ConfigError("max_apps, app_max_connections, app_max_pending_merges must be >= 1")
        if not self.app_lease_s > 0:
            raise ConfigError(f"app_lease_s must be > 0, not {self.app_lease_s}")
        if self.app_max_merged_bytes < 0:
            raise ConfigError("app_max_merged_bytes must be >= 0")
        if self.min_chunk_size < 1 or self.max_deferred_bytes < 0 or self.max_frame_bytes < 1024:
            raise ConfigError(
                "min_chunk_size must be >= 1, max_deferred_bytes >= 0, max_frame_bytes >= 1024"
            )


@dataclass(frozen=True)
class PushConfig:
    """The map side.

    max_block_size_to_push: `spark.shuffle.push.maxBlockSizeToPush` (1m): larger blocks are
        only fetched from the map output.
    max_block_batch_size: `spark.shuffle.push.maxBlockBatchSize` (3m): largest push request.
    max_bytes_in_flight: `spark.reducer.maxSizeInFlight` (48m), which Spark's pusher reuses.
    push_threads: `spark.shuffle.push.numPushThreads`: pushes to different mergers in parallel.
    retries / retry_wait_s: `spark.shuffle.io.maxRetries` (3) and `spark.shuffle.io.retryWait`
        (5s; here 0.05 s, the ceiling of the first wait, doubling up to 5 s, each wait a random
        fraction of its ceiling: `net.retry.Backoff`) for retriable answers (BUSY, IO_ERROR).
    background: a map task hands its output to its process's pusher and returns, so pushes
        overlap the next map's work (Spark's `ShuffleBlockPusher` runs beside the executor);
        the pusher tells the mergers when a map's pushes are complete, and the driver
        collects that before it finalizes. False: the map task returns when it has pushed.
    max_held_bytes: map outputs waiting in a process's pusher are pushed from the buffers
        the map task encoded them into while they add up to at most this; past it they are
        read back from their map output files (Spark's pusher always reads the files), so a
        worker's memory is bounded by this and `max_bytes_in_flight`, not by the data.
    by_reference: a merger on the host of the service holding the map output is sent the
        blocks' places in the map output, not their bytes: it reads them from the file (its
        own directory's, or a peer service's on the host that it was introduced to), so they
        never cross a socket. A merger that does not know that service is sent the bytes.
        Spark has no such option (its pusher always sends bytes).
    """

    max_block_size_to_push: int = 1 * MiB
    max_block_batch_size: int = 3 * MiB
    max_bytes_in_flight: int = 48 * MiB
    push_threads: int = 4
    retries: int = 3
    retry_wait_s: float = 0.05
    background: bool = True
    max_held_bytes: int = 256 * MiB
    by_reference: bool = True

    def __post_init__(self) -> None:
        if self.max_block_batch_size < 1 or self.max_bytes_in_flight < self.max_block_batch_size:
            raise ConfigError("max_bytes_in_flight must be >= max_block_batch_size >= 1")
        if self.max_held_bytes < 0:
            raise ConfigError(f"max_held_bytes must be >= 0, not {self.max_held_bytes}")


@dataclass(frozen=True)
class DriverConfig:
    """The driver side.

    min_shuffle_size_to_wait: `spark.shuffle.push.minShuffleSizeToWait` (500m): smaller shuffles
        finalize at once and their merge results are not used.
    min_completed_push_ratio: `spark.shuffle.push.minCompletedPushRatio` (1.0): finalize early
        once this fraction of maps has finished pushing.
    finalize_timeout_s: `spark.shuffle.push.finalize.timeout` (10s): longest wait after the
        last map before finalizing.
    results_timeout_s: `spark.shuffle.push.results.timeout` (10s): longest wait for merge
        results; a merger that does not answer in time is treated as having merged nothing.
    mergers_min_static_threshold / mergers_min_threshold_ratio:
        `spark.shuffle.push.mergersMinStaticThreshold` (5) and `...mergersMinThresholdRatio`
        (0.05): with fewer services than needed, push is turned off for the shuffle. The static
        threshold defaults to 1 here, since a single machine has few services.
    reduces_per_merger: reduce partitions a merger should take before another one is used.
    """

    min_shuffle_size_to_wait: int = 500 * MiB
    min_completed_push_ratio: float = 1.0
    finalize_timeout_s: float = 10.0
    results_timeout_s: float = 10.0
    mergers_min_static_threshold: int = 1
    mergers_min_threshold_ratio: float = 0.0
    reduces_per_merger: int = 1

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_completed_push_ratio <= 1.0:
            raise ConfigError(
                f"min_completed_push_ratio must be in [0, 1], not {self.min_completed_push_ratio}"
            )


@dataclass(frozen=True)
class ReadConfig:
    """The reduce side.

    fetch_retries / fetch_retry_wait_s: `spark.shuffle.io.maxRetries` (3) and
        `spark.shuffle.io.retryWait`; the wait's ceiling doubles (up to 5 s, each wait a random
        fraction of it: `net.retry.Backoff`). A node's service that is being restarted is waited
        for up to the sum of the ceilings (6.3 s by default, about half that on average) before
        the read fails.
    max_merged_read_bytes: a merged partition up to this size is read in one request (its
        index, meta and every chunk; each chunk is still checked on its own and falls back on
        its own); a larger one is read chunk by chunk, as Spark always does, so the bytes
        in flight stay bounded. Spark has no such option (`spark.reducer.maxSizeInFlight`,
        48m, bounds its fetches).
    host_local: `spark.shuffle.readHostLocalDisk` (true): a merged partition whose merger's
        directory is on the reducer's host (`ReduceInput.local_dirs`) is read from that
        directory through a store, not fetched through the service; any failure there falls
        back to the service's fetch.
    keep_open: a block merged by reference is read from its map output kept open across the
        reduces of one merge in this process (`open_outputs.py`), not opened per block. For
        engines that release the files when the shuffle's are removed (the Dask engine does,
        in `remove_shuffles`; a reduce of another merge does too): an open map output keeps
        its disk space after it is deleted.
    """

    fetch_retries: int = 6
    fetch_retry_wait_s: float = 0.1
    max_merged_read_bytes: int = 48 * MiB
    host_local: bool = True
    keep_open: bool = False
