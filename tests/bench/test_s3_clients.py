"""The S3 client comparison counts what each client sends, checked against what the server
received (moto's request recorder, on for each timed run alone); no timing assertions."""

from __future__ import annotations

import importlib.util
import json
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from dataferry.bench.s3_client_drivers import DRIVERS
from dataferry.bench.s3_clients import (
    ClientBenchSpec,
    S3Target,
    expected_requests,
    run_client_bench,
)

pytest.importorskip("moto")
pytest.importorskip("boto3")


class RecordingServer:
    """A moto server of this module's own whose request recorder writes to `recording`."""

    def __init__(self, server, recording: Path) -> None:
        self.server = server
        self.recording = recording
        self.seen: dict[tuple[str, str], list[int]] = {}

    def _call(self, action: str) -> None:
        url = f"{self.server.endpoint}/moto-api/recorder/{action}"
        urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=10).read()

    @contextmanager
    def window(self, client: str, scenario: str) -> Iterator[None]:
        """Record the requests of one timed run and keep how many the server received."""
        self._call("reset-recording")
        self._call("start-recording")
        try:
            yield
        finally:
            self._call("stop-recording")
            received = [json.loads(line) for line in self.recording.read_text().splitlines()]
            self.seen.setdefault((client, scenario), []).append(len(received))


@pytest.fixture(scope="module")
def recording_server(tmp_path_factory) -> Iterator[RecordingServer]:
    from dataferry.testing import LocalS3Server

    recording = tmp_path_factory.mktemp("moto") / "requests.jsonl"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MOTO_RECORDER_FILEPATH", str(recording))  # read when the server starts
        server = LocalS3Server().start()
    try:
        yield RecordingServer(server, recording)
    finally:
        server.stop()


def _installed(client: str) -> bool:
    return importlib.util.find_spec(DRIVERS[client].library) is not None


def test_counts_match_the_server_and_ratios_are_against_boto3(recording_server):
    server = recording_server.server
    target = S3Target(
        server.create_bucket(),
        server.endpoint,
        server.env["AWS_ACCESS_KEY_ID"],
        server.env["AWS_SECRET_ACCESS_KEY"],
        server.env["AWS_DEFAULT_REGION"],
    )
    spec = ClientBenchSpec(files=20, repeats=1, warmup=2, threads=8)
    report = run_client_bench(spec, target, window=recording_server.window)

    boto3_rps = {s: report.result("boto3", s).median_rps for s in spec.scenarios}
    assert all(boto3_rps.values())
    for r in report.results:
        ratio = report.ratio_to_baseline(r.client, r.scenario)
        if not _installed(r.client):
            assert r.status == "skipped" and not r.runs and ratio is None
            continue
        if r.scenario in DRIVERS[r.client].unsupported:
            assert r.status == "unsupported" and not r.runs and ratio is None
            assert (r.client, r.scenario) not in recording_server.seen
            continue
        assert r.status == "ok" and len(r.runs) == 1, r
        # what the client counted is what the server received, and what the mix implies
        assert [run.requests for run in r.runs] == recording_server.seen[r.client, r.scenario]
        assert r.runs[0].requests == expected_requests(r.scenario, 20)
        assert ratio == pytest.approx(r.median_rps / boto3_rps[r.scenario])
        assert r.version
    assert report.ratio_to_baseline("boto3", "magic") == 1.0
    rows = {(row["client"], row["scenario"]): row for row in report.to_json()["results"]}
    assert rows["boto3", "rename"]["ratio_to_boto3"] == 1.0
    # nothing is left on the server: every run cleans up after itself
    import boto3

    leftover = boto3.client("s3", **target.boto3_options()).list_objects_v2(Bucket=target.bucket)
    assert leftover["KeyCount"] == 0


def test_a_missing_library_is_skipped_not_an_error(monkeypatch):
    for module in ("obstore", "obstore.store", "s3fs"):
        monkeypatch.setitem(sys.modules, module, None)  # import raises ImportError
    spec = ClientBenchSpec(clients=("s3fs", "obstore"), files=5, repeats=1)
    report = run_client_bench(spec, S3Target("no-such-bucket", "http://127.0.0.1:9"))
    assert {r.status for r in report.results} == {"skipped"}
    assert all("not installed" in r.reason and r.median_rps is None for r in report.results)
    assert report.ratio_to_baseline("obstore", "rename") is None
