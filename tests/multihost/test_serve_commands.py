"""`dataferry markers serve` and `dataferry shuffle serve` across hosts, as docs/operations.md's
two-host example runs them: the services on the driver host's address, a client on a worker
host that knows only the address, the token and the printed fingerprint."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dataferry.net import self_signed_identity

pytestmark = pytest.mark.timeout(200)

FINGERPRINT = re.compile(r"TLS certificate fingerprint \(sha256\): ([0-9a-f]{64})")

CLIENT = """
import json, sys
from dataferry.errors import DataferryError
from dataferry.markers import MarkerClient, marker_dir
from dataferry.shuffle.client import ShuffleClient

url, marker_fp, address, shuffle_fp = sys.argv[1:5]
token_m, token_s = "marker-secret", "shuffle-secret"
answer = {}
markers = MarkerClient(url, token_m, timeout=20, fingerprint=marker_fp)
answer["created"] = markers.create(marker_dir("job"), "day=a/f-job-t0-a0.parquet.marker.CREATE")
answer["all"] = markers.all(marker_dir("job"))
answer["marker_counters"] = markers.health()["service"]
with ShuffleClient(address, token_s, timeout=20, fingerprint=shuffle_fp) as c:
    answer["shuffle_counters"] = c.service_stats()["counters"]
refused = []
for make in (
    lambda: MarkerClient(url.replace("https", "http"), token_m, timeout=5).health(),
    lambda: ShuffleClient(address, token_s, timeout=5).service_stats(),
    lambda: ShuffleClient(address, token_s, timeout=5, fingerprint="0" * 64).service_stats(),
):
    try:
        make()
        refused.append("")
    except DataferryError as e:
        refused.append(str(e))
answer["refused"] = refused
print(json.dumps(answer))
"""


def serve(cluster, name: str, args: list[str], env: dict[str, str]) -> tuple[Any, str, str]:
    """Start `dataferry ARGS` on the driver host; (process, what it announced, fingerprint)."""
    port_file = cluster.shared / f"{name}.address"
    log = cluster.log(name)
    argv = [sys.executable, "-m", "dataferry.cli", *args, "--port-file", str(port_file)]
    proc = cluster.lab.spawn("driver", argv, str(log), {**cluster.env, **env})
    deadline = time.monotonic() + 60
    while not (port_file.exists() and FINGERPRINT.search(log.read_text(errors="replace"))):
        assert proc.poll() is None, log.read_text(errors="replace")[-2000:]
        assert time.monotonic() < deadline, log.read_text(errors="replace")[-2000:]
        time.sleep(0.1)
    fingerprint = FINGERPRINT.search(log.read_text(errors="replace"))
    assert fingerprint is not None
    return proc, port_file.read_text().strip(), fingerprint.group(1)


def test_serve_commands_across_hosts_with_tls_and_the_token(cluster):
    driver, w1 = cluster.address("driver"), cluster.address("w1")
    # the shuffle service with a certificate of its own; the marker service makes one
    identity = self_signed_identity([driver])
    cert, key = cluster.shared / "service.pem", cluster.shared / "service.key"
    for path, data in ((cert, identity.cert_pem), (key, identity.key_pem)):
        path.write_bytes(data)
        os.chmod(path, 0o600)
    procs = []
    try:
        markers, url, marker_fp = serve(
            cluster,
            "markers-serve",
            ["markers", "serve", "--dest", str(cluster.shared / "events"), "--host", driver],
            {"DATAFERRY_MARKER_TOKEN": "marker-secret"},
        )
        procs.append(markers)
        shuffle, address, shuffle_fp = serve(
            cluster,
            "shuffle-serve",
            [
                "shuffle",
                "serve",
                "--dir",
                str(cluster.shared / "node"),
                "--host",
                driver,
                "--tls-cert",
                str(cert),
                "--tls-key",
                str(key),
            ],
            {"DATAFERRY_SHUFFLE_TOKEN": "shuffle-secret"},
        )
        procs.append(shuffle)
        assert url.startswith(f"https://{driver}:")  # beyond loopback: TLS by default
        assert address.startswith(f"{driver}:")
        assert shuffle_fp == identity.fingerprint  # the certificate it was given
        assert marker_fp != identity.fingerprint  # a pair of its own, made as it started

        done = cluster.lab.run(
            "w1",
            [sys.executable, "-c", CLIENT, url, marker_fp, address, shuffle_fp],
            60,
            cluster.env,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        assert answer["created"] is True
        assert answer["all"] == ["day=a/f-job-t0-a0.parquet.marker.CREATE"]
        assert answer["marker_counters"][f"requests_from.{w1}"] >= 2  # from the other host
        assert answer["shuffle_counters"][f"stats_from.{w1}"] == 1
        plain, no_fingerprint, wrong = answer["refused"]
        assert "clear text" in plain and "clear text" in no_fingerprint  # token never sent
        assert "refusing to send it the token" in wrong
        events = Path(cluster.shared / "events" / "_dataferry" / "markers" / "job")
        assert any(events.glob("MARKERS*"))  # the marker is on the driver host's store
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
    assert [p.returncode for p in procs] == [0, 0]  # both stopped cleanly on SIGTERM
