"""Writes from Dask on a real LocalCluster, including a worker killed mid-write."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pyarrow.dataset as pads
import pytest

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

import dataferry.dask as dfdask  # noqa: E402
from dataferry.dask import DaskEngine  # noqa: E402
from dataferry.dataset.options import WriteRequest  # noqa: E402
from dataferry.dataset.write import prepare_write, write_result  # noqa: E402

from .dask_work import kill_worker_once  # noqa: E402


def frame(n=20_000, parts=8):
    rng = np.random.default_rng(1)
    pdf = pd.DataFrame(
        {
            "id": np.arange(n),
            "day": np.array([f"d{i % 4}" for i in range(n)]),
            "v": rng.random(n),
        }
    )
    return pdf, dd.from_pandas(pdf, npartitions=parts)


def read_back(path):
    return pads.dataset(str(path), format="parquet", partitioning="hive").to_table().to_pandas()


def test_write_dataset_from_dask(client, tmp_path):
    pdf, ddf = frame()
    result = dfdask.write_dataset(ddf, str(tmp_path / "out"), partition_by=["day"], client=client)
    assert result.committer == "manifest" and result.rows == len(pdf)
    back = read_back(tmp_path / "out")
    assert sorted(back["id"]) == list(range(len(pdf)))
    assert result.run.attempts == ddf.npartitions


def test_worker_killed_mid_write_commits_exactly_the_input(client, tmp_path):
    pdf, ddf = frame()
    flag = str(tmp_path / "killed-once")
    engine = DaskEngine(client)
    store, output_committer = prepare_write(
        WriteRequest(str(tmp_path / "out"), ("day",), committer="manifest"),
        __import__("pyarrow").Schema.from_pandas(ddf._meta, preserve_index=False),
    )
    parts = client.compute(ddf.to_delayed())
    work = kill_worker_once(flag, victim=3)
    works = [
        client.submit(functools.partial, work, p, ("day",), "parquet", pure=False) for p in parts
    ]
    run = engine.run_job(output_committer, works)
    result = write_result(store, output_committer, run)
    assert (tmp_path / "killed-once").exists()  # a worker process really died mid-write
    assert run.failed_attempts >= 1 and run.attempts > ddf.npartitions
    back = read_back(tmp_path / "out")
    assert len(back) == len(pdf) and sorted(back["id"]) == list(range(len(pdf)))
    assert result.rows == len(pdf)
    assert not (tmp_path / "out" / "_temporary").exists()
