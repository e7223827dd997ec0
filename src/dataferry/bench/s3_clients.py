"""`bench commit --s3-local --clients`: which S3 client library sends a job commit fastest.

Each client (`boto3` as dataferry's `S3Store` uses it, s3fs's aiobotocore client, `obstore`)
replays the request mix of two job commits on the same S3 server, at the same concurrency
(the pool size of dataferry's job commits):
- `magic`: the magic committer's job commit: complete N multipart uploads that tasks initiated
  (initiated, with one small part each, during setup, which is not timed), then list the
  destination;
- `rename`: the renaming commit's per-file work on S3: copy and delete N small objects (what a
  rename is there), then list the destination.

Each client warms up once per scenario (untimed); then every repeat runs every client, in an
order that rotates from repeat to repeat. Reported per client and scenario: the median requests
per second of the timed part, the ratio to boto3's median, and the client process's CPU time per
request (`time.process_time`, all its threads): where the server is the bottleneck, all clients
come out alike in requests per second, and CPU per request is what differs on a real S3.
"""

from __future__ import annotations

import importlib.metadata
import os
import statistics
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

from ..commit.s3a.magic.config import MagicConfig
from ..errors import ConfigError, DataferryError
from ..store.pool import IOPool
from .machine import machine_info
from .s3_client_drivers import DRIVERS, POOL_CONNECTIONS, Driver, S3Target, Upload, list_pages

SCENARIOS = {
    "magic": "magic job commit: complete N uploads, list",
    "rename": "renaming commit on S3: copy + delete N objects, list",
}
BASELINE = "boto3"

Progress = Callable[[str], None]
# wraps each timed run, given (client, scenario): e.g. to record what the server received
Window = Callable[[str, str], AbstractContextManager[object]]


@dataclass(frozen=True)
class ClientBenchSpec:
    """files: N, the objects each run commits; threads: the job commit's pool (the magic
    committer's `fs.s3a.committer.threads`); warmup: objects in each untimed warm-up run."""

    clients: tuple[str, ...] = tuple(DRIVERS)
    scenarios: tuple[str, ...] = tuple(SCENARIOS)
    files: int = 1000
    threads: int = MagicConfig().threads
    repeats: int = 5
    file_size: int = 1024
    warmup: int = 100

    def __post_init__(self) -> None:
        for name in self.clients:
            if name not in DRIVERS:
                raise ConfigError(f"unknown S3 client {name!r}; known: {', '.join(DRIVERS)}")
        for name in self.scenarios:
            if name not in SCENARIOS:
                raise ConfigError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
        for name in ("files", "threads", "repeats", "file_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class ClientRun:
    """One timed run: the requests it sent, its wall time and the process's CPU time."""

    requests: int
    seconds: float
    cpu_s: float

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_us_per_request(self) -> float:
        return 1e6 * self.cpu_s / self.requests if self.requests else 0.0


@dataclass
class ClientResult:
    """One client on one scenario: its runs, or why it did not run (`skipped`: the library is
    not installed; `unsupported`: it cannot send this scenario's requests)."""

    client: str
    scenario: str
    status: str = "ok"
    reason: str = ""
    version: str | None = None
    runs: list[ClientRun] = field(default_factory=list)

    @property
    def median_rps(self) -> float | None:
        return statistics.median(r.rps for r in self.runs) if self.runs else None

    @property
    def cpu_us_per_request(self) -> float | None:
        return statistics.median(r.cpu_us_per_request for r in self.runs) if self.runs else None

    def to_json(self) -> dict[str, Any]:
        rps, cpu = self.median_rps, self.cpu_us_per_request
        return {
            "client": self.client,
            "scenario": self.scenario,
            "status": self.status,
            "reason": self.reason,
            "version": self.version,
            "runs": [{**asdict(r), "rps": round(r.rps, 1)} for r in self.runs],
            "median_rps": None if rps is None else round(rps, 1),
            "cpu_us_per_request": None if cpu is None else round(cpu, 1),
        }


@dataclass
class ClientBenchReport:
    spec: ClientBenchSpec
    endpoint: str | None
    results: list[ClientResult]
    machine: dict[str, Any]

    def result(self, client: str, scenario: str) -> ClientResult | None:
        return next(
            (r for r in self.results if r.client == client and r.scenario == scenario), None
        )

    def ratio_to_baseline(self, client: str, scenario: str) -> float | None:
        """The client's median requests/s over boto3's on the same scenario."""
        mine, base = self.result(client, scenario), self.result(BASELINE, scenario)
        if mine is None or base is None or not mine.median_rps or not base.median_rps:
            return None
        return mine.median_rps / base.median_rps

    def to_json(self) -> dict[str, Any]:
        rows = []
        for r in self.results:
            ratio = self.ratio_to_baseline(r.client, r.scenario)
            rows.append(
                {**r.to_json(), "ratio_to_boto3": None if ratio is None else round(ratio, 3)}
            )
        return {
            "benchmark": "s3-clients",
            "spec": asdict(self.spec),
            "endpoint": self.endpoint,
            "scenarios": SCENARIOS,
            "machine": self.machine,
            "results": rows,
        }


def run_client_bench(
    spec: ClientBenchSpec,
    target: S3Target,
    progress: Progress | None = None,
    window: Window | None = None,
) -> ClientBenchReport:
    """Compare the clients on `target` (an existing bucket); see the module's docstring."""
    say = progress or (lambda _m: None)
    load_before = os.getloadavg()[0]  # other work on the machine shares its CPUs
    results = {(c, s): ClientResult(c, s) for s in spec.scenarios for c in spec.clients}
    drivers = _open_drivers(spec, target, results)
    root = f"bench-clients/{uuid.uuid4().hex[:8]}"
    try:
        if drivers:
            with _Setup(target, spec) as setup:
                warm = min(spec.warmup, spec.files)
                for s in spec.scenarios if warm > 0 else ():
                    for name in _runnable(list(drivers.values()), s):
                        say(f"warm-up: {name} {s}")
                        _timed(drivers[name], s, setup, f"{root}/warmup", warm, None)
                for rep in range(spec.repeats):
                    shift = rep % len(drivers)  # each repeat starts with the next client
                    order = [*drivers.values()][shift:] + [*drivers.values()][:shift]
                    for s in spec.scenarios:
                        for name in _runnable(order, s):
                            say(f"repeat {rep + 1} of {spec.repeats}: {name} {s}")
                            ctx = window(name, s) if window else None
                            run = _timed(drivers[name], s, setup, f"{root}/r{rep}", spec.files, ctx)
                            results[name, s].runs.append(run)
    finally:
        for d in drivers.values():
            d.close()
    machine = {**machine_info(), "load_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)]}
    return ClientBenchReport(spec, target.endpoint, list(results.values()), machine)


def _open_drivers(
    spec: ClientBenchSpec, target: S3Target, results: dict[tuple[str, str], ClientResult]
) -> dict[str, Driver]:
    """A driver per client whose library is there; the others' results say `skipped`, and a
    scenario a library cannot send says `unsupported`."""
    drivers: dict[str, Driver] = {}
    for name in spec.clients:
        cls = DRIVERS[name]
        try:
            drivers[name] = cls(target, spec.threads)
        except (ImportError, ConfigError) as e:
            for s in spec.scenarios:
                results[name, s].status, results[name, s].reason = "skipped", str(e)
            continue
        for s in spec.scenarios:
            results[name, s].version = _version(cls.library)
            if s in cls.unsupported:
                results[name, s].status = "unsupported"
                results[name, s].reason = cls.unsupported[s]
    return drivers


def _runnable(drivers: list[Driver], scenario: str) -> list[str]:
    return [d.name for d in drivers if scenario not in d.unsupported]


def _version(library: str) -> str | None:
    try:
        return importlib.metadata.version(library)
    except importlib.metadata.PackageNotFoundError:
        return None


def _timed(
    driver: Driver,
    scenario: str,
    setup: _Setup,
    base: str,
    n: int,
    window: AbstractContextManager[object] | None,
) -> ClientRun:
    """Set up `n` objects (untimed), run the client's timed part, check it, clean up."""
    prefix = f"{base}/{scenario}/{driver.name}"
    dest = f"{prefix}/dst/"
    if scenario == "magic":
        work = partial(driver.complete, setup.uploads(dest, n), dest)
    else:
        work = partial(driver.rename, setup.objects(prefix, n), dest)
    try:
        with window or nullcontext():
            sent, wall, cpu = driver.sent, time.perf_counter(), time.process_time()
            listed = work()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            sent = driver.sent - sent
    finally:
        setup.clear(prefix)
    if listed != n:
        raise DataferryError(f"{driver.name} {scenario}: listed {listed} keys, expected {n}")
    return ClientRun(sent, wall, cpu)


def expected_requests(scenario: str, n: int) -> int:
    """What one run sends without retries: a complete, or a copy and a delete, per object, and
    one listing of the n objects."""
    per_object = 1 if scenario == "magic" else 2
    return per_object * n + list_pages(n)


class _Setup:
    """The untimed part: a plain boto3 client of its own (never the one measured) that creates
    what each run starts from and removes what it leaves."""

    def __init__(self, target: S3Target, spec: ClientBenchSpec) -> None:
        import boto3
        from botocore.config import Config

        self.bucket = target.bucket
        self.body = b"x" * spec.file_size
        config = Config(max_pool_connections=max(POOL_CONNECTIONS, spec.threads))
        self.client = boto3.session.Session().client("s3", config=config, **target.boto3_options())
        self.pool = IOPool(spec.threads, name="bench-setup")

    def __enter__(self) -> _Setup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.pool.close()

    def uploads(self, dest: str, n: int) -> list[Upload]:
        """n multipart uploads under `dest`, as tasks leave them: initiated, one part up."""

        def one(i: int) -> Upload:
            key = f"{dest}part-{i:06d}"
            uid = self.client.create_multipart_upload(Bucket=self.bucket, Key=key)["UploadId"]
            part = self.client.upload_part(
                Bucket=self.bucket, Key=key, UploadId=uid, PartNumber=1, Body=self.body
            )
            return Upload(key, uid, part["ETag"])

        return self.pool.map(one, range(n))

    def objects(self, prefix: str, n: int) -> list[tuple[str, str]]:
        """n objects under `prefix/src/`, each paired with its name under `prefix/dst/`."""
        pairs = [(f"{prefix}/src/f-{i:06d}", f"{prefix}/dst/f-{i:06d}") for i in range(n)]
        self.pool.for_each(
            lambda p: self.client.put_object(Bucket=self.bucket, Key=p[0], Body=self.body), pairs
        )
        return pairs

    def clear(self, prefix: str) -> None:
        """Delete every object and abort every upload under `prefix`, so the server's state
        is the same for every run (moto lists by scanning the bucket)."""
        for page in self.client.get_paginator("list_multipart_uploads").paginate(
            Bucket=self.bucket, Prefix=prefix
        ):
            uploads = page.get("Uploads", [])
            self.pool.for_each(
                lambda u: self.client.abort_multipart_upload(
                    Bucket=self.bucket, Key=u["Key"], UploadId=u["UploadId"]
                ),
                uploads,
            )
        keys = [
            {"Key": o["Key"]}
            for page in self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=prefix
            )
            for o in page.get("Contents", [])
        ]
        for i in range(0, len(keys), 1000):
            self.client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": keys[i : i + 1000], "Quiet": True}
            )


__all__ = [
    "SCENARIOS",
    "ClientBenchReport",
    "ClientBenchSpec",
    "ClientResult",
    "ClientRun",
    "S3Target",
    "expected_requests",
    "run_client_bench",
]
