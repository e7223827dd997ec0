"""The job driver of the multi-host tests, run on the driver host (`ip netns exec`).

    python driver.py --scheduler tcp://A:P --s3 http://B:P COMMAND [options]

Commands: `wait` (the cluster is up), `write` (dataferry.dask.write_dataset, read back),
`shuffle` (dataferry.dask.shuffle, computed back). Each prints one JSON line: what went in,
what came out, and where things ran and which hosts talked to which services.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import sys
import time
import urllib.request
from typing import Any

import numpy as np
import pandas as pd

COLUMNS = ["key", "name", "value", "row"]


def frame(rows: int, seed: int = 11) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "key": rng.integers(0, 60, rows),
            "name": rng.choice(["a", "straße", "東京", "x" * 40], rows),
            "value": rng.random(rows).round(6),
            "row": np.arange(rows),
        }
    )


def digest(pdf: pd.DataFrame) -> dict[str, Any]:
    """The row multiset of `pdf` (its data columns), as a count and a hash of sorted rows."""
    rows = sorted(
        (int(k), str(n), float(v), int(r))
        for k, n, v, r in pdf[COLUMNS].itertuples(index=False, name=None)
    )
    return {"rows": len(rows), "sha256": hashlib.sha256(repr(rows).encode()).hexdigest()}


def connect(scheduler: str) -> Any:
    from distributed import Client

    return Client(scheduler, timeout=60)


def wait(args: argparse.Namespace) -> dict[str, Any]:
    deadline = time.monotonic() + args.timeout
    while True:
        try:
            urllib.request.urlopen(args.s3 + "/moto-api/", timeout=2).read()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    with connect(args.scheduler) as client:
        client.wait_for_workers(args.workers, timeout=max(1.0, deadline - time.monotonic()))
        return {"workers": sorted(client.scheduler_info()["workers"])}


def hosts_of(addresses: Any) -> list[str]:
    from dataferry.net.addresses import host_of

    return sorted({host_of(a) for a in addresses})


def _slow_part(pdf: pd.DataFrame, seconds: float, started: str) -> pd.DataFrame:
    from distributed import get_worker

    from dataferry.net.addresses import host_of

    host = host_of(get_worker().address)
    with open(os.path.join(started, f"{host}-{secrets.token_hex(4)}"), "w"):
        pass
    time.sleep(seconds)
    return pdf


def read_back(dest: str, s3: str) -> pd.DataFrame:
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    if dest.startswith("s3://"):
        fs = pafs.S3FileSystem(
            access_key="testing",
            secret_key="testing",
            endpoint_override=s3,
            region="us-east-1",
        )
        return ds.dataset(dest[5:], filesystem=fs, format="parquet").to_table().to_pandas()
    return ds.dataset(dest, format="parquet").to_table().to_pandas()


def create_bucket(s3: str) -> str:
    import boto3

    bucket = f"multihost-{secrets.token_hex(4)}"
    boto3.client(
        "s3",
        endpoint_url=s3,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    ).create_bucket(Bucket=bucket)
    return bucket


def marker_service(dest: str, here: str) -> tuple[Any, dict[str, Any]]:
    """The job's marker service, on this (the driver's) host's reachable address, under TLS."""
    from dataferry.markers import MarkerService, MarkerServiceConfig
    from dataferry.store import open_store

    token = secrets.token_hex(16)
    service = MarkerService(open_store(dest), MarkerServiceConfig(token=token)).start(here)
    options = {"markers": "service", "service_url": service.url, "service_token": token}
    fingerprint = getattr(service, "fingerprint", "")
    if fingerprint:
        options["service_fingerprint"] = fingerprint
    return service, options


def write(args: argparse.Namespace) -> dict[str, Any]:
    from distributed import get_task_stream

    import dataferry.dask as dfd
    from dataferry.errors import DataferryError
    from dataferry.net.addresses import host_of, route_address

    pdf = frame(args.rows)
    ddf = source(pdf, args)
    dest = args.dest
    if dest == "s3":
        dest = f"s3://{create_bucket(args.s3)}/table"
    # the service listens on the interface this host reaches the cluster by
    here = args.service_host or route_address(host_of(args.scheduler))
    service, options = None, {}
    if args.markers == "service":
        service, options = marker_service(dest, here)
    answer: dict[str, Any] = {"dest": dest}
    try:
        with connect(args.scheduler) as client, get_task_stream(client) as stream:
            try:
                result = dfd.write_dataset(
                    ddf,
                    dest,
                    committer=args.committer,
                    client=client,
                    committer_options=options or None,
                    max_rows_per_file=args.rows // args.partitions,
                )
            except DataferryError as e:
                return {**answer, "error": f"{type(e).__name__}: {e}", "tasks": len(stream.data)}
            answer["workers_now"] = sorted(client.scheduler_info()["workers"])
        answer["task_hosts"] = hosts_of(t["worker"] for t in stream.data)
        answer["files"] = result.files
    finally:
        if service is not None:
            answer["marker_service"] = {"url": service.url, "stats": service.stats.snapshot()}
            service.stop()
    answer["input"] = digest(pdf)
    answer["output"] = digest(read_back(dest, args.s3))
    return answer


def _service_stats(dask_worker: Any) -> dict[str, Any]:
    from dataferry.dask.push_shuffle import _plugin
    from dataferry.shuffle.client import ShuffleClient

    plugin = _plugin(dask_worker)
    with ShuffleClient(plugin.address, plugin.token, fingerprint=plugin.fingerprint) as c:
        return {"address": plugin.address, "stats": c.service_stats()}


def source(pdf: pd.DataFrame, args: argparse.Namespace) -> Any:
    """`pdf` as a Dask DataFrame; with --slow, each partition takes that long to compute and
    notes, in --started, the host it began on."""
    import dask
    import dask.dataframe as dd

    ddf = dd.from_pandas(pdf, npartitions=args.partitions)
    if not args.slow:
        return ddf
    parts = [dask.delayed(_slow_part)(p, args.slow, args.started) for p in ddf.to_delayed()]
    return dd.from_delayed(parts, meta=ddf._meta)


def shuffle(args: argparse.Namespace) -> dict[str, Any]:
    import dask

    import dataferry.dask as dfd
    from dataferry.dask.push_shuffle import DaskShuffleReport
    from dataferry.errors import DataferryError
    from dataferry.shuffle import DriverConfig

    pdf = frame(args.rows)
    with connect(args.scheduler) as client:
        ddf = source(pdf, args)
        if not args.slow:
            ddf = ddf.persist()
        report = DaskShuffleReport(False, 0, 0)
        try:
            out = dfd.shuffle(
                ddf,
                "key",
                npartitions=args.reduces,
                client=client,
                driver_config=DriverConfig(min_shuffle_size_to_wait=0),
                report=report,
            )
            # one computation of the (lazy) shuffle for every partition
            parts = dask.compute(*out.to_delayed())
            groups = [sorted(set(part["key"])) for part in parts]
            result = pd.concat(parts)
        except DataferryError as e:  # a clean failure: dataferry's own error, said plainly
            return {"error": f"{type(e).__name__}: {e}"}
        services = client.run(_service_stats)
    keys_once = len([k for g in groups for k in g]) == len({k for g in groups for k in g})
    return {
        "input": digest(pdf),
        "output": digest(result),
        "keys_in_one_partition": keys_once,
        "report": {
            "push": report.push,
            "maps": report.maps,
            "reduces": report.reduces,
            "finalize": report.finalize,
            "reduce_reads": report.reduce_reads,
        },
        "services": services,
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scheduler", required=True)
    parser.add_argument("--s3", required=True)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("wait")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--timeout", type=float, default=100.0)
    p = sub.add_parser("write")
    p.add_argument("--committer", required=True)
    p.add_argument("--dest", required=True, help="a directory, or `s3` for a fresh bucket")
    p.add_argument("--markers", default="direct")
    p.add_argument("--service-host", default="", help="bind the marker service here")
    p.add_argument("--rows", type=int, default=2000)
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--slow", type=float, default=0.0, help="seconds each partition takes")
    p.add_argument("--started", default="", help="where partitions note that they began")
    p = sub.add_parser("shuffle")
    p.add_argument("--rows", type=int, default=6000)
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--reduces", type=int, default=8)
    p.add_argument("--slow", type=float, default=0.0, help="seconds each partition takes")
    p.add_argument("--started", default="", help="where partitions note that they began")
    args = parser.parse_args(argv)
    answer = {"wait": wait, "write": write, "shuffle": shuffle}[args.command](args)
    print(json.dumps(answer, default=str))


if __name__ == "__main__":
    main(sys.argv[1:])
