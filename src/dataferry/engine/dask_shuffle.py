"""Push-based shuffle on a Dask cluster.

One shuffle service per worker, started by a worker plugin as a subprocess next to the worker
(its directory under the worker's local directory). Each service binds to its worker's host as
Dask knows it (the host of `worker.address`) and advertises that address, so a map task on one
host pushes to the merger it chose on another. Beyond loopback the services speak TLS with one
identity for the client's shuffles: its fingerprint travels to the tasks with the token.
Map tasks run where their partitions are and write to their worker's service directory, then
push; the client is the driver (merger choice, finalize); reduce tasks read merged chunks plus
original blocks and return pandas DataFrames.
"""

from __future__ import annotations

import os
import random
import secrets
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import pyarrow as pa

from ..net.addresses import advertised_host, host_of, is_wildcard
from ..net.tls import TLSIdentity, is_loopback, self_signed_identity
from ..shuffle import DriverConfig, PushConfig, ReduceInput, ShuffleDriver, ShuffleServiceProcess
from ..stats import IOStatistics
from .shuffle import MapTask, run_map_task, run_reduce_task

PLUGIN_NAME = "dataferry-shuffle"


def _plugin_base() -> type:
    from distributed import WorkerPlugin

    return WorkerPlugin


def service_host(worker_address: str, scheduler_address: str = "") -> str:
    """The address a worker's shuffle service binds to and advertises: the worker's own host
    (for a worker listening on every interface, the one that reaches the scheduler)."""
    host = host_of(worker_address)
    return advertised_host(host, host_of(scheduler_address)) if is_wildcard(host) else host


class ShuffleServicePlugin(_plugin_base()):  # type: ignore[misc]
    """A Dask worker plugin: start this worker's shuffle service on the worker's host, stop
    it with the worker. `tls` is the identity every service of the client serves (None on
    loopback)."""

    name = PLUGIN_NAME

    def __init__(self, token: str, tls: TLSIdentity | None = None) -> None:
        super().__init__()
        self.token = token
        self.tls = tls
        self.service: ShuffleServiceProcess | None = None
        self.read_stats: dict[str, IOStatistics] = {}  # per shuffle app, until collected

    def setup(self, worker: Any) -> None:
        directory = os.path.join(worker.local_directory, "dataferry-shuffle")
        os.makedirs(directory, exist_ok=True)
        scheduler = getattr(getattr(worker, "scheduler", None), "address", "") or ""
        host = service_host(worker.address, scheduler)
        self.service = ShuffleServiceProcess(directory, self.token, host=host, tls=self.tls)
        self.service.start()

    def teardown(self, worker: Any) -> None:
        if self.service is not None:
            self.service.kill()

    @property
    def address(self) -> str:
        assert self.service is not None
        return self.service.address

    @property
    def fingerprint(self) -> str:
        return self.tls.fingerprint if self.tls is not None else ""

    @property
    def directory(self) -> str:
        assert self.service is not None
        return self.service.directory


def _plugin(worker: Any = None) -> ShuffleServicePlugin:
    if worker is None:
        from distributed import get_worker

        worker = get_worker()
    plugin = worker.plugins[PLUGIN_NAME]
    if plugin.service is not None and not plugin.service.alive:
        plugin.service.restart()  # the worker's service died: bring it back on its port
    return plugin


def worker_hosts(client: Any) -> list[str]:
    """The hosts of the client's workers, as the scheduler knows them."""
    return sorted({host_of(w) for w in client.scheduler_info()["workers"]})


def services_identity(hosts: Sequence[str]) -> TLSIdentity | None:
    """A fresh self-signed identity naming `hosts`, or None when every one is on loopback
    (the token then never leaves the machine). With no worker yet, TLS: the workers that
    join later may be anywhere."""
    if hosts and all(is_loopback(h) for h in hosts):
        return None
    return self_signed_identity(hosts)


@dataclass(frozen=True)
class ShuffleServices:
    """The client's shuffle services: their shared secret, the fingerprint of their TLS
    identity ("" on loopback), and each worker's service address."""

    token: str
    fingerprint: str
    addresses: dict[str, str]


def ensure_services(client: Any) -> ShuffleServices:
    """Start a service on every worker (once per client: the token and the TLS identity live
    as long as the client's plugin)."""
    state = getattr(client, "_dataferry_shuffle", None)
    if state is None:
        token = secrets.token_hex(16)
        identity = services_identity(worker_hosts(client))
        client.register_plugin(ShuffleServicePlugin(token, identity), name=PLUGIN_NAME)
        state = (token, identity.fingerprint if identity is not None else "")
        client._dataferry_shuffle = state
    addresses = client.run(_service_address)
    return ShuffleServices(state[0], state[1], addresses)


def _collect_read_stats(app: str, dask_worker: Any) -> dict[str, Any]:
    stats = _plugin(dask_worker).read_stats.pop(app, None)
    return stats.snapshot() if stats is not None else {}


def _service_address(dask_worker: Any) -> str:
    return _plugin(dask_worker).address


def _map(pdf: Any, task: MapTask, keep_index: bool) -> dict[str, Any]:
    plugin = _plugin()
    # Dask may run a task again elsewhere after a worker dies: every execution is its own
    # attempt, with its own files
    run = replace(
        task,
        node_dir=plugin.directory,
        location=plugin.address,
        attempt=random.getrandbits(31),
    )
    # the index travels as a column (pandas' metadata names it), so every row keeps its label
    result = run_map_task(run, pa.Table.from_pandas(pdf, preserve_index=keep_index))
    return {"status": result.status, "push": result.push, "schema": result.schema}


def _reduce(inp: ReduceInput, schema: Any, meta: Any) -> Any:
    result = run_reduce_task(inp, schema)
    _plugin().read_stats.setdefault(inp.app, IOStatistics()).merge(result.stats)
    pdf = result.value.to_pandas()  # the index comes back from the schema's pandas metadata
    if list(pdf.columns) == list(meta.columns) and not pdf.dtypes.equals(meta.dtypes):
        pdf = pdf.astype(meta.dtypes.to_dict())  # e.g. an empty partition's object columns
    if pdf.index.dtype != meta.index.dtype:
        pdf.index = pdf.index.astype(meta.index.dtype)
    pdf.index.name = meta.index.name
    return pdf


@dataclass
class DaskShuffleReport:
    push: bool
    maps: int
    reduces: int
    finalize: dict[str, Any] = field(default_factory=dict)
    reduce_reads: int = 0
    reduce_read_bytes: int = 0


def shuffle(
    ddf: Any,
    on: str | Sequence[str],
    npartitions: int | None = None,
    *,
    push: bool = True,
    client: Any = None,
    driver_config: DriverConfig | None = None,
    push_config: PushConfig | None = None,
    report: DaskShuffleReport | None = None,
    keep_index: bool = True,
) -> Any:
    """Shuffle a Dask DataFrame through the shuffle services; runs now and returns a Dask
    DataFrame over the reduce results held on the workers. Every row keeps its index label,
    as with `ddf.shuffle`; the result has no known divisions.

    keep_index: False drops the index (each output partition gets a fresh range index) and
        so does not move it: one column fewer through the shuffle."""
    import dask.dataframe as dd
    from distributed import default_client, wait

    client = client or default_client()
    keys = (on,) if isinstance(on, str) else tuple(on)
    n_out = npartitions or ddf.npartitions
    services = ensure_services(client)
    app = f"dask-{secrets.token_hex(4)}"
    shuffle_id = random.getrandbits(20)
    parts = client.compute(ddf.to_delayed())
    driver = ShuffleDriver(
        app,
        shuffle_id,
        len(parts),
        n_out,
        sorted(services.addresses.values()),
        token=services.token,
        fingerprint=services.fingerprint,
        config=driver_config,
        push=push_config,
        enabled=push,
    )
    target = driver.target if driver.push_enabled else None
    maps = [
        client.submit(
            _map,
            part,
            MapTask(app, shuffle_id, i, 0, "", "", n_out, keys, None, target),
            keep_index,
            pure=False,
        )
        for i, part in enumerate(parts)
    ]
    results = client.gather(maps)
    for r in results:
        driver.map_finished(r["status"])
    merged = driver.finalize()
    statuses = tuple(driver.map_statuses())
    schema = results[0]["schema"]
    meta = ddf._meta if keep_index else ddf._meta.reset_index(drop=True)
    reduces = [
        client.submit(
            _reduce,
            ReduceInput(
                app,
                shuffle_id,
                driver.merge_id,
                r,
                statuses,
                merged.get(r),
                token=services.token,
                fingerprint=services.fingerprint,
            ),
            schema,
            meta,
            pure=False,
        )
        for r in range(n_out)
    ]
    wait(reduces)
    driver.remove()
    read = IOStatistics()
    for snapshot in client.run(_collect_read_stats, app).values():
        read.merge(snapshot)
    if report is not None:
        report.reduce_reads = read.counter("reduce_reads")
        report.reduce_read_bytes = read.counter("reduce_read_bytes")
        report.push, report.maps, report.reduces = driver.push_enabled, len(parts), n_out
        report.finalize = asdict(driver.finalize_report)
    return dd.from_delayed(reduces, meta=meta, verify_meta=False)
