"""An Iceberg REST catalog: SeaweedFS's (`weed mini` serves one over its S3 Tables "table
buckets", with compare-and-swap commits), reached as users reach S3 Tables: pyiceberg's REST
catalog with SigV4 signing under the service name `s3tables`.

Fixtures: `iceberg_rest` (the catalog of this run: its `load_catalog` properties, a fresh
table location in its table bucket, the S3 options of that bucket) on the `seaweed` server
(tests/servers/seaweedfs.py), loopback only. Every xdist worker shares the one table bucket
(created if absent: each bucket is a collection of volumes); tables and locations are fresh
per test.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import pytest

from . import port_open
from .seaweedfs import SeaweedFS

TABLE_BUCKET = "dataferry-iceberg"
NAMESPACE = "ns"  # made at the start: every test's tables are in it
READY_S = 60.0


@dataclass(frozen=True)
class IcebergRest:
    """The REST catalog of this run and the SeaweedFS server under it."""

    server: SeaweedFS
    bucket: str = TABLE_BUCKET

    @property
    def uri(self) -> str:
        return self.server.iceberg

    @property
    def warehouse(self) -> str:
        return f"s3://{self.bucket}"

    def properties(self, name: str = "rest") -> dict[str, str]:
        """`load_catalog` properties (with the catalog's name under "name", as dataferry's
        `committer_options={"catalog": ...}` takes them): SigV4-signed REST, and the FileIO's
        S3 endpoint and keys."""
        s = self.server
        return {
            "name": name,
            "type": "rest",
            "uri": self.uri,
            "warehouse": self.warehouse,
            "rest.sigv4-enabled": "true",
            "rest.signing-name": "s3tables",
            "rest.signing-region": s.region,
            "client.access-key-id": s.key,
            "client.secret-access-key": s.secret,
            "client.region": s.region,
            "s3.endpoint": s.endpoint,
            "s3.access-key-id": s.key,
            "s3.secret-access-key": s.secret,
            "s3.region": s.region,
        }

    def catalog(self, name: str = "rest") -> Any:
        """A pyiceberg catalog on it (as a user of pyiceberg opens it)."""
        from pyiceberg.catalog import load_catalog

        props = self.properties(name)
        return load_catalog(props.pop("name"), **props)

    def url(self, namespace: str = NAMESPACE) -> str:
        """A fresh, empty table location in the table bucket (an s3:// URL): a table bucket
        takes objects only under namespace/table/ (`metadata/`, `data/`, `_name/`)."""
        return f"{self.warehouse}/{namespace}/t{uuid.uuid4().hex[:12]}"

    def identifier(self, namespace: str = NAMESPACE) -> str:
        """A fresh table identifier."""
        return f"{namespace}.t{uuid.uuid4().hex[:12]}"

    @property
    def storage_options(self) -> dict[str, Any]:
        return self.server.storage_options


def create_table_bucket(server: SeaweedFS, name: str) -> None:
    """The S3 Tables bucket (kept if it exists: another worker made it)."""
    import boto3
    from botocore.exceptions import ClientError

    client = boto3.client(
        "s3tables",
        endpoint_url=server.endpoint,
        aws_access_key_id=server.key,
        aws_secret_access_key=server.secret,
        region_name=server.region,
    )
    try:
        client.create_table_bucket(name=name)
    except ClientError as e:  # SeaweedFS says BucketAlreadyExists, AWS ConflictException
        if e.response["Error"]["Code"] not in ("BucketAlreadyExists", "ConflictException"):
            raise


@pytest.fixture(scope="session")
def iceberg_rest(seaweed: SeaweedFS) -> IcebergRest:
    """SeaweedFS's Iceberg REST catalog, its table bucket made."""
    port = urlparse(seaweed.iceberg).port
    assert port is not None
    deadline = time.monotonic() + READY_S
    while not port_open(port):
        if time.monotonic() > deadline:
            pytest.fail(f"SeaweedFS's Iceberg REST catalog did not open port {port}")
        time.sleep(0.2)
    create_table_bucket(seaweed, TABLE_BUCKET)
    rest = IcebergRest(seaweed)
    # the namespace exists before any table's files are written under it: a directory the S3
    # side made first is not a namespace to the catalog (SeaweedFS then fails to create it)
    rest.catalog().create_namespace_if_not_exists(NAMESPACE)
    return rest
