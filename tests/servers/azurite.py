"""Azurite, Microsoft's Azure Storage emulator (its Blob service only), for the `abfs://` tests.

Installed by `make servers` (npm `azurite`, pinned in deps/package.json) into .cache/npm, and
started once for every xdist worker (`shared_server`) on a free loopback port with telemetry off
and its data in memory. It is a Blob account: no hierarchical namespace,
so no Data Lake API (renames there are copies; atomic renames stay on the `sim:abfs` model).

Fixtures:
- `azurite`: the server (`AzuriteServer`: connection string, account name and key,
  `create_container()`), with `AZURE_STORAGE_CONNECTION_STRING` exported for this process so
  `abfs://container/...` opens without storage options (as adlfs reads it);
- `azurite_url`: a fresh, empty `AzuriteUrl` (`abfs://container/dir` and its storage options).
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.servers import CACHE, ServerProcess, free_port, need_tool, port_open, shared_server

# the emulator's well-known development account (published in Azurite's README)
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
BIN = CACHE / "npm" / "node_modules" / ".bin" / "azurite-blob"


def connection_string(port: int) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
        f"BlobEndpoint=http://127.0.0.1:{port}/{ACCOUNT};"
    )


@dataclass(frozen=True)
class AzuriteServer:
    port: int
    connection_string: str
    account_name: str = ACCOUNT
    account_key: str = KEY

    def storage_options(self) -> dict[str, str]:
        return {"connection_string": self.connection_string}

    def create_container(self, name: str | None = None) -> str:
        """A new, empty container; its name."""
        from azure.storage.blob import BlobServiceClient

        name = name or f"t{uuid.uuid4().hex[:12]}"
        with BlobServiceClient.from_connection_string(self.connection_string) as service:
            service.create_container(name)
        return name


@dataclass(frozen=True)
class AzuriteUrl:
    url: str  # abfs://container/dir
    storage_options: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.url


def _start(workdir) -> tuple[int, dict]:
    binary = need_tool(BIN if BIN.exists() else None, "Azurite (npm azurite)")
    port = free_port()
    data = workdir / "data"
    data.mkdir(exist_ok=True)
    server = ServerProcess(
        "azurite",
        [
            binary,
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--skipApiVersionCheck",
            "--disableTelemetry",
            "--silent",
            # blobs and their metadata in memory (it refuses --location with it): Azurite's
            # on-disk metadata is one JSON file rewritten as it grows, slowing a long run
            "--inMemoryPersistence",
        ],
        workdir / "azurite.log",
        ready=lambda: port_open(port),
        cwd=data,  # its workspace, were it to write one
    ).start()
    return server.pid, {"port": port}


@pytest.fixture(scope="session")
def azurite(tmp_path_factory):
    pytest.importorskip("adlfs", reason="the azure extra (adlfs) is not installed")
    pytest.importorskip("azure.storage.blob", reason="the azure extra is not installed")
    with shared_server("azurite", tmp_path_factory, _start) as info:
        server = AzuriteServer(info["port"], connection_string(info["port"]))
        saved = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
        os.environ["AZURE_STORAGE_CONNECTION_STRING"] = server.connection_string
        try:
            yield server
        finally:
            if saved is None:
                os.environ.pop("AZURE_STORAGE_CONNECTION_STRING", None)
            else:
                os.environ["AZURE_STORAGE_CONNECTION_STRING"] = saved


@pytest.fixture
def azurite_url(azurite) -> AzuriteUrl:
    """A fresh, empty `abfs://container/dir` on Azurite, with its storage options."""
    container = azurite.create_container()
    return AzuriteUrl(f"abfs://{container}/{uuid.uuid4().hex[:8]}", azurite.storage_options())
