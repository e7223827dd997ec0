"""`dataferry.dask.shuffle` on a real LocalCluster, one shuffle service per worker."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dataferry.dask as dfd
from dataferry.engine.dask_shuffle import (
    DaskShuffleReport,
    ensure_services,
    service_host,
    services_identity,
)
from dataferry.net.addresses import host_of
from dataferry.shuffle import DriverConfig

dd = pytest.importorskip("dask.dataframe")

ROWS = 30000


@pytest.fixture(scope="module")
def ddf(client):
    rng = np.random.default_rng(7)
    pdf = pd.DataFrame(
        {"key": rng.integers(0, 700, ROWS), "name": rng.choice(["a", "b", "c"], ROWS)}
    )
    pdf["row"] = np.arange(ROWS)
    return dd.from_pandas(pdf, npartitions=6).persist()


def groups(frame) -> list[frozenset]:
    return [frozenset(part.compute()["key"]) for part in frame.to_delayed()]


@pytest.mark.parametrize("push", [True, False])
def test_same_groups_as_dask_shuffle(client, ddf, push):
    report = DaskShuffleReport(False, 0, 0)
    ours = dfd.shuffle(
        ddf,
        "key",
        npartitions=5,
        push=push,
        client=client,
        driver_config=DriverConfig(min_shuffle_size_to_wait=0),
        report=report,
    )
    theirs = ddf.shuffle("key", npartitions=5)
    assert groups(ours) == groups(theirs)  # the same keys in the same output partitions
    out = ours.compute()
    assert sorted(out["row"]) == list(range(ROWS))  # every row exactly once
    assert list(out.columns) == list(ddf.columns) and out.dtypes.equals(ddf.dtypes)
    assert report.push == push and report.reduce_reads > 0
    if push:
        assert report.finalize["merged_partitions"] == 5
        assert report.reduce_reads < 6 * 5  # fewer reads than one per (map, reduce) block
    else:
        assert report.reduce_reads == 6 * 5


def test_multi_column_keys(client, ddf):
    cfg = DriverConfig(min_shuffle_size_to_wait=0)
    ours = dfd.shuffle(ddf, ["name", "key"], npartitions=4, client=client, driver_config=cfg)
    theirs = ddf.shuffle(["name", "key"], npartitions=4)
    pairs = [
        frozenset(zip(p.compute()["name"], p.compute()["key"], strict=True))
        for p in ours.to_delayed()
    ]
    expected = [
        frozenset(zip(p.compute()["name"], p.compute()["key"], strict=True))
        for p in theirs.to_delayed()
    ]
    assert pairs == expected


@pytest.mark.parametrize("named", [False, True])
def test_every_row_keeps_its_index_label(client, ddf, named):
    source = ddf.set_index("row", sorted=True) if named else ddf
    cfg = DriverConfig(min_shuffle_size_to_wait=0)
    ours = dfd.shuffle(source, "key", npartitions=4, client=client, driver_config=cfg).compute()
    theirs = source.shuffle("key", npartitions=4).compute()
    assert ours.index.name == theirs.index.name and ours.index.dtype == theirs.index.dtype
    assert list(ours.columns) == list(theirs.columns)
    # the same (label, row) pairs, whatever order the rows arrive in
    assert ours.sort_index().equals(theirs.sort_index())


def test_the_index_can_be_left_behind(client, ddf):
    source = ddf.set_index("row", sorted=True)
    cfg = DriverConfig(min_shuffle_size_to_wait=0)
    out = dfd.shuffle(source, "key", 4, client=client, driver_config=cfg, keep_index=False)
    parts = [p.compute() for p in out.to_delayed()]
    assert all(isinstance(p.index, pd.RangeIndex) and p.index.name is None for p in parts)
    assert sum(len(p) for p in parts) == ROWS and list(parts[0].columns) == ["key", "name"]


def test_each_service_listens_on_its_workers_host(client):
    services = ensure_services(client)
    assert sorted(services.addresses) == sorted(client.scheduler_info()["workers"])
    for worker, address in services.addresses.items():
        assert host_of(address) == host_of(worker)  # where Dask reaches the worker
        assert address != worker  # its own port
    assert services.fingerprint == ""  # every worker on loopback: no TLS
    assert ensure_services(client).token == services.token  # one token per client


def test_a_worker_on_every_interface_advertises_the_route_to_the_scheduler():
    assert service_host("tcp://10.1.2.3:4000", "tcp://10.1.2.1:8786") == "10.1.2.3"
    assert service_host("tcp://0.0.0.0:4000", "tcp://127.0.0.1:8786") == "127.0.0.1"


def test_workers_beyond_loopback_share_one_tls_identity():
    assert services_identity(["127.0.0.1"]) is None
    assert services_identity([]) is not None  # workers yet to join may be anywhere
    identity = services_identity(["10.1.2.3", "10.1.2.4"])
    assert identity is not None and len(identity.fingerprint) == 64
    assert identity.fingerprint != services_identity(["10.1.2.3"]).fingerprint  # per client
