"""Helpers for testing code that uses dataferry: a real S3-protocol endpoint on loopback.

`LocalS3Server` runs moto's server mode in its own process (not in-process mocking), on a free
port, with throwaway credentials; the tests and `dataferry bench` use it, and so can users'
own tests. It needs moto: `pip install 'dataferry[testserver]'`.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

from .errors import ConfigError
from .extras import require

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def free_port() -> int:
    """A TCP port free on loopback now (the caller binds it soon after)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalS3Server:
    """Start with `with LocalS3Server() as s3:`; `s3.endpoint` and `s3.env` describe it."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def env(self) -> dict[str, str]:
        return {**CREDENTIALS, "AWS_ENDPOINT_URL": self.endpoint}

    def start(self) -> LocalS3Server:
        require("moto.server", "the local S3 test server")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ConfigError(f"moto server exited with code {self.proc.returncode}")
            try:
                urllib.request.urlopen(self.endpoint + "/moto-api/", timeout=1).read()
                return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise ConfigError(f"moto server did not answer on {self.endpoint} within 30 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None

    def __enter__(self) -> LocalS3Server:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def export(self) -> None:
        """Point this process's AWS variables (and so boto3) at this server."""
        os.environ.update(self.env)

    @contextlib.contextmanager
    def exported(self) -> Iterator[LocalS3Server]:
        """`export` for the duration of a block; the variables are put back after it."""
        saved = {k: os.environ.get(k) for k in self.env}
        self.export()
        try:
            yield self
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def create_bucket(self, name: str | None = None) -> str:
        boto3 = require("boto3", "the local S3 test server")

        bucket = name or f"dataferry-{uuid.uuid4().hex[:12]}"
        boto3.client("s3", endpoint_url=self.endpoint, **_boto_credentials()).create_bucket(
            Bucket=bucket
        )
        return bucket


def _boto_credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "region_name": CREDENTIALS["AWS_DEFAULT_REGION"],
    }
