"""Push-based shuffle on a Dask cluster, as a lazy Dask DataFrame.

One shuffle service per worker, started by a worker plugin as a subprocess next to the worker
(its directory under the worker's local directory), bound to the worker's host as Dask knows
it, so a map on one host pushes to the merger it chose on another; beyond loopback, over TLS
with one identity for the client's shuffles. Each shuffle is its own application on the
services, registered by the workers' plugins (which hold the service-wide token; tasks get only
the application's credentials). `shuffle` only plans: it starts the services (once per client),
registers the application and chooses the mergers, then returns a Dask DataFrame whose graph
runs the shuffle when computed. The graph's tasks:
`begin` (one per computation: removes what an earlier computation of the same graph left and
picks a fresh merge id), `map` (one per input partition: write the map output to its worker's
service directory, push), `barrier` (collect the map statuses, finalize the mergers) and
`reduce` (one per output partition: read merged chunks plus original blocks, return pandas).
"""

from __future__ import annotations

import operator
import os
import random
import secrets
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

from ..engine.shuffle import MapTask, run_map_task, run_reduce_task
from ..engine.shuffle.codec import from_pandas, shuffle_schema, to_pandas
from ..errors import ShuffleError
from ..net.addresses import advertised_host, host_of, is_wildcard
from ..net.tls import TLSIdentity, is_loopback, self_signed_identity
from ..shuffle import (
    AppCredentials,
    DriverConfig,
    MapStatus,
    MergedPartition,
    PushConfig,
    PushTarget,
    ReadConfig,
    ReduceInput,
    ShuffleClient,
    ShuffleDriver,
    ShuffleServiceProcess,
    register_app,
)
from ..shuffle.lease import keeper_of
from ..shuffle.open_outputs import release_open_map_outputs
from ..stats import IOStatistics
from .shuffle_report import REPORT_TOPIC, DaskShuffleReport, watch

PLUGIN_NAME = "dataferry-shuffle"
_LATE: dict[tuple[str, str], str] = {}  # (service, app) -> credential a map registered
_LATE_LOCK = threading.Lock()


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
        self.token = token  # the service-wide secret: registers applications, never in a task
        self.tls = tls
        self.service: ShuffleServiceProcess | None = None
        self.peers: dict[str, str] = {}  # the other services on this host: address -> directory

    def app_secret(self, app: str) -> str:
        """The application's credential on this worker's service, registered there once (by
        a worker that joined, or came back, after the shuffle was planned)."""
        with _LATE_LOCK:
            if (self.address, app) not in _LATE:
                creds = register_app(app, [self.address], self.token, fingerprint=self.fingerprint)
                _LATE[(self.address, app)] = creds.secret_for(self.address)
            return _LATE[(self.address, app)]

    def setup(self, worker: Any) -> None:
        directory = os.path.join(worker.local_directory, "dataferry-shuffle")
        os.makedirs(directory, exist_ok=True)
        scheduler = getattr(getattr(worker, "scheduler", None), "address", "") or ""
        host = service_host(worker.address, scheduler)
        self.service = ShuffleServiceProcess(directory, self.token, host=host, tls=self.tls)
        self.service.start()

    def introduce(self, directories: Sequence[tuple[str, str]]) -> int:
        """Tell this worker's service where the map outputs of the other services on its host
        are (from every service's (address, directory)), so maps push to it by reference."""
        self.peers = host_local_dirs(directories, self.address)
        return self._introduce()

    def _introduce(self) -> int:
        with ShuffleClient(self.address, self.token, fingerprint=self.fingerprint) as client:
            return client.introduce(self.peers)

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
    plugin = worker.plugins.get(PLUGIN_NAME)
    if plugin is None:
        raise ShuffleError(
            f"worker {worker.address} has no shuffle service: compute a dataferry shuffle "
            "with the distributed Client that created it"
        )
    if plugin.service is not None and not plugin.service.alive:
        plugin.service.restart()  # the worker's service died: bring it back on its port
        plugin._introduce()  # and tell it its peers again
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

    token: str = field(repr=False)
    fingerprint: str
    addresses: dict[str, str]
    directories: dict[str, str] = field(default_factory=dict)  # service address -> directory


@dataclass
class _ClientState:
    """What the shuffles of one Client share: the services' secret and fingerprint (set once
    the plugin is registered), and the plans whose files may remain on its workers."""

    services: tuple[str, str] | None = None
    plans: dict[str, _Plan] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


# each Client's state, kept here rather than on the Client: it goes when the Client does
_CLIENTS: weakref.WeakKeyDictionary[Any, _ClientState] = weakref.WeakKeyDictionary()
_CLIENTS_LOCK = threading.Lock()


def _state(client: Any) -> _ClientState:
    with _CLIENTS_LOCK:
        state = _CLIENTS.get(client)
        if state is None:
            state = _CLIENTS[client] = _ClientState()
        return state


def ensure_services(client: Any) -> ShuffleServices:
    """Start a service on every worker (once per client: the token and the TLS identity live
    as long as the client's plugin)."""
    state = _state(client)
    with state.lock:
        if state.services is None:
            token = secrets.token_hex(16)
            identity = services_identity(worker_hosts(client))
            client.register_plugin(ShuffleServicePlugin(token, identity), name=PLUGIN_NAME)
            state.services = (token, identity.fingerprint if identity is not None else "")
        token, fingerprint = state.services
    where = client.run(_service_where)
    addresses = {w: a for w, (a, _) in where.items()}
    directories = dict(where.values())
    client.run(_introduce_peers, sorted(directories.items()))
    return ShuffleServices(token, fingerprint, addresses, directories)


def _introduce_peers(directories: list[tuple[str, str]], dask_worker: Any) -> int:
    return _plugin(dask_worker).introduce(directories)


def _service_where(dask_worker: Any) -> tuple[str, str]:
    """(address, directory) of this worker's service."""
    plugin = _plugin(dask_worker)
    return plugin.address, plugin.directory


def host_local_dirs(directories: Sequence[tuple[str, str]], own: str) -> dict[str, str]:
    """The directories of the services on the host of the service at `own`: a reduce task
    reads their merged files directly (`ReadConfig.host_local`)."""
    host = host_of(own)
    return {address: d for address, d in directories if host_of(address) == host}


def _register_app(app: str, dask_worker: Any = None) -> tuple[str, str]:
    """(this worker's service, `app`'s credential there), registered by the worker's plugin."""
    plugin = _plugin(dask_worker)
    return plugin.address, plugin.app_secret(app)


def register_shuffle_app(client: Any, app: str) -> AppCredentials:
    """Register a shuffle's application on every worker's service; its credentials."""
    return AppCredentials(app, tuple(sorted(client.run(_register_app, app).values())))


# --- the report --------------------------------------------------------------------------

_MERGE_IDS = 2**31  # merge ids are u31 on the wire


def _publish(plan: _Plan, event: dict[str, Any]) -> None:
    if plan.report:
        from distributed import get_worker

        get_worker().log_event(REPORT_TOPIC, {"app": plan.app, **event})


# --- the graph's tasks ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    """What every task of one shuffle shares (picklable): its ids, services and options."""

    app: str
    shuffle_id: int
    num_maps: int
    num_reduces: int
    on: tuple[str, ...]
    services: tuple[str, ...]
    credentials: AppCredentials = field(repr=False)
    fingerprint: str
    directories: tuple[tuple[str, str], ...]  # (service address, its directory)
    push: bool
    keep_index: bool
    driver_config: DriverConfig | None
    push_config: PushConfig | None
    report: bool  # whether tasks publish report events

    def driver(self, merge_id: int = 0) -> ShuffleDriver:
        """The driver of one computation (the same mergers for every computation)."""
        return ShuffleDriver(
            self.app,
            self.shuffle_id,
            self.num_maps,
            self.num_reduces,
            self.services,
            credentials=self.credentials,
            fingerprint=self.fingerprint,
            config=self.driver_config,
            push=self.push_config,
            merge_id=merge_id,
            enabled=self.push,
        )


@dataclass(frozen=True)
class _Finalized:
    """The barrier's answer to every reduce task."""

    merge_id: int
    statuses: tuple[MapStatus, ...]
    merged: dict[int, MergedPartition]
    schema: pa.Schema
    credentials: AppCredentials = field(repr=False)  # the plan's, and those maps added


def _begin(plan: _Plan) -> int:
    """Start a computation of the graph: remove what an earlier one left (map outputs and
    merges; nothing of this computation exists yet, as every map waits for this task) and
    pick a merge id. Merge ids grow with time, so a merger that missed the removal discards
    an older computation's merge instead of answering TOO_LATE."""
    plan.driver().remove()
    return time.time_ns() // 1_000_000 % _MERGE_IDS


def _map(pdf: Any, plan: _Plan, map_index: int, merge_id: int) -> dict[str, Any]:
    plugin = _plugin()
    late = None  # a worker that joined after planning registers the app (see the barrier)
    if not plan.credentials.secret_for(plugin.address):
        late = (plugin.address, plugin.app_secret(plan.app))
    driver = plan.driver(merge_id)
    target: PushTarget | None = driver.target if driver.push_enabled else None
    # Dask may run a task again elsewhere after a worker dies: every execution is its own
    # attempt, with its own files; the merge keeps one block per map index
    task = MapTask(
        plan.app,
        plan.shuffle_id,
        map_index,
        random.getrandbits(31),
        plugin.directory,
        plugin.address,
        plan.num_reduces,
        plan.on,
        None,
        target,
    )
    # the index travels as a column (pandas' metadata names it), so every row keeps its label
    started = time.perf_counter()
    table = from_pandas(pdf, preserve_index=plan.keep_index)
    converted = time.perf_counter() - started
    result = run_map_task(task, table)
    stats = IOStatistics(result.stats)
    stats.record_duration("map_from_pandas", converted)
    snapshot = stats.snapshot()
    return {"status": result.status, "schema": result.schema, "stats": snapshot, "credential": late}


def _barrier(plan: _Plan, merge_id: int, results: list[dict[str, Any]]) -> _Finalized:
    """Every map is done: register their outputs, finalize the merge (the driver's stage)."""
    driver = plan.driver(merge_id)
    for r in results:
        driver.map_finished(r["status"])
    merged = driver.finalize()
    maps = IOStatistics()
    for r in results:
        maps.merge(r["stats"])
    _publish(
        plan,
        {
            "kind": "finalize",
            "merge_id": merge_id,
            "push": driver.push_enabled,
            "finalize": asdict(driver.finalize_report),
            "stats": maps.snapshot(),
        },
    )
    creds = plan.credentials
    for r in results:
        if r.get("credential"):
            creds = creds.with_secret(*r["credential"])
    statuses = tuple(driver.map_statuses())
    schema = shuffle_schema([(r["schema"], r["status"].total_size > 0) for r in results])
    return _Finalized(merge_id, statuses, merged, schema, creds)


def _reduce(reduce_id: int, plan: _Plan, done: _Finalized, meta: Any) -> Any:
    inp = ReduceInput(
        plan.app,
        plan.shuffle_id,
        done.merge_id,
        reduce_id,
        done.statuses,
        done.merged.get(reduce_id),
        credentials=done.credentials,
        fingerprint=plan.fingerprint,
        local_dirs=host_local_dirs(plan.directories, _plugin().address),
        config=ReadConfig(keep_open=True),  # released by remove_shuffles and the next merge
    )
    result = run_reduce_task(inp, done.schema)
    stats = IOStatistics(result.stats)
    with stats.duration("reduce_to_pandas"):
        pdf = to_pandas(result.value)
    _publish(
        plan,
        {
            "kind": "reduce",
            "merge_id": done.merge_id,
            "reduce_reads": stats.counter("reduce_reads"),
            "reduce_read_bytes": stats.counter("reduce_read_bytes"),
            "reduce_ref_blocks": stats.counter("reduce_ref_blocks"),
            "stats": stats.snapshot(),
        },
    )
    if list(pdf.columns) == list(meta.columns) and not pdf.dtypes.equals(meta.dtypes):
        pdf = pdf.astype(meta.dtypes.to_dict())  # e.g. an empty partition's object columns
    if pdf.index.dtype != meta.index.dtype:
        pdf.index = pdf.index.astype(meta.index.dtype)
    pdf.index.name = meta.index.name
    return pdf


# --- the public call -----------------------------------------------------------------------


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
    """Shuffle a Dask DataFrame through the shuffle services, lazily: returns a Dask DataFrame
    whose graph runs the shuffle when it is computed (alone or as part of what follows it).
    Nothing runs at call time except starting the services, once per client. Keys land in the
    partitions `ddf.shuffle` would put them in and every row keeps its index label; the result
    has no known divisions. Compute it with `client` (its workers run the services).

    keep_index: False drops the index (each output partition gets a fresh range index) and
        so does not move it: one column fewer through the shuffle.
    report: filled at compute time (see DaskShuffleReport)."""
    import dask
    import dask.dataframe as dd
    from distributed import default_client

    client = client or default_client()
    services = ensure_services(client)
    app = f"dask-{secrets.token_hex(4)}"
    parts = ddf.to_delayed()
    plan = _Plan(
        app,
        random.getrandbits(20),
        len(parts),
        npartitions or ddf.npartitions,
        (on,) if isinstance(on, str) else tuple(on),
        tuple(sorted(services.addresses.values())),
        keeper_of(client, services.fingerprint).keep(register_shuffle_app(client, app)),
        services.fingerprint,
        tuple(sorted(services.directories.items())),
        push,
        keep_index,
        driver_config,
        push_config,
        report is not None,
    )
    push_enabled = plan.driver().push_enabled  # chooses the mergers; no network
    _state(client).plans[app] = plan  # its files may remain on the services
    if report is not None:
        report.push, report.maps, report.reduces = push_enabled, plan.num_maps, plan.num_reduces
        watch(client, app, report)
    meta = ddf._meta if keep_index else ddf._meta.reset_index(drop=True)
    task = dask.delayed  # every key is named: one shuffle, one graph
    begin = task(_begin)(plan, dask_key_name=f"dataferry-shuffle-begin-{app}")
    maps = [
        task(_map)(part, plan, i, begin, dask_key_name=f"dataferry-shuffle-map-{app}-{i}")
        for i, part in enumerate(parts)
    ]
    barrier = task(_barrier)(plan, begin, maps, dask_key_name=f"dataferry-shuffle-barrier-{app}")
    # the reduces are the collection's own partitions, no alias task between (from_delayed put
    # two per reduce: 200 reduces of 8 ms persisted on two workers, 2.0 -> 1.3 s); where Dask
    # fuses (persist, to_delayed) an id and its reduce are one task, `dataferry-shuffle_reduce_..`
    # (the first word of each part's name). Ids are ints: no string conversion to make.
    with dask.config.set({"dataframe.convert-string": False}):
        ids = dd.from_map(operator.index, range(plan.num_reduces), meta=meta, label="dataferry")
    token = f"shuffle_reduce_{app.replace('-', '_')}"
    options = {"meta": meta, "enforce_metadata": False, "align_dataframes": False, "token": token}
    return ids.map_partitions(_reduce, plan, barrier, meta, **options)


def remove_shuffles(client: Any = None) -> int:
    """Remove the files (map outputs and merges) that the shuffles planned through `client`
    left on its workers' services; returns how many shuffles it went through.

    A computation's files stay after it, so that a reduce task Dask runs again finds them;
    the next computation of the same shuffle removes them first, and they go with the
    workers when the client's cluster stops. Call this sooner, between computations (never
    while one of these shuffles is being computed): a shuffle computed after it simply runs
    again from its input, and a later call removes what that computation left."""
    from distributed import default_client

    client = client or default_client()
    plans = list(_state(client).plans.values())
    for plan in plans:
        plan.driver().remove()
    client.run(release_open_map_outputs)  # the reduces' open map outputs hold their space
    return len(plans)
