"""Push-based shuffle on a Dask cluster.

One shuffle service per worker, started by a worker plugin as a subprocess next to the worker
(its directory under the worker's local directory). Map tasks run where their partitions are and
write to their worker's service directory, then push; the client is the driver (merger choice,
finalize); reduce tasks read merged chunks plus original blocks and return pandas DataFrames.
"""

from __future__ import annotations

import os
import random
import secrets
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import pyarrow as pa

from ..shuffle import DriverConfig, PushConfig, ReduceInput, ShuffleDriver, ShuffleServiceProcess
from ..stats import IOStatistics
from .shuffle import MapTask, run_map_task, run_reduce_task

PLUGIN_NAME = "dataferry-shuffle"


def _plugin_base() -> type:
    from distributed import WorkerPlugin

    return WorkerPlugin


class ShuffleServicePlugin(_plugin_base()):  # type: ignore[misc]
    """A Dask worker plugin: start this worker's shuffle service, stop it with the worker."""

    name = PLUGIN_NAME

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token
        self.service: ShuffleServiceProcess | None = None
        self.read_stats: dict[str, IOStatistics] = {}  # per shuffle app, until collected

    def setup(self, worker: Any) -> None:
        directory = os.path.join(worker.local_directory, "dataferry-shuffle")
        os.makedirs(directory, exist_ok=True)
        self.service = ShuffleServiceProcess(directory, self.token).start()

    def teardown(self, worker: Any) -> None:
        if self.service is not None:
            self.service.kill()

    @property
    def address(self) -> str:
        assert self.service is not None
        return self.service.address

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


def ensure_services(client: Any) -> tuple[str, dict[str, str]]:
    """Start a service on every worker (once per client); (token, worker -> address)."""
    token = getattr(client, "_dataferry_shuffle_token", None)
    if token is None:
        token = secrets.token_hex(16)
        client.register_plugin(ShuffleServicePlugin(token), name=PLUGIN_NAME)
        client._dataferry_shuffle_token = token
    addresses = client.run(_service_address)
    return token, addresses


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
    token, addresses = ensure_services(client)
    app = f"dask-{secrets.token_hex(4)}"
    shuffle_id = random.getrandbits(20)
    parts = client.compute(ddf.to_delayed())
    driver = ShuffleDriver(
        app,
        shuffle_id,
        len(parts),
        n_out,
        sorted(addresses.values()),
        token=token,
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
            ReduceInput(app, shuffle_id, driver.merge_id, r, statuses, merged.get(r), token),
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
