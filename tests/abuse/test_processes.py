"""Service processes leave nothing behind, and clients outlive the services' idle timeouts."""

from __future__ import annotations

import glob
import os
import tempfile
import time

from dataferry.markers import MarkerClient, MarkerServiceProcess, marker_dir
from dataferry.shuffle import ShuffleClient, ShuffleServiceProcess

from .conftest import TOKEN


def _service_dirs() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "dataferry-service-*")))


def test_service_processes_remove_their_temporary_directories(tmp_path, monkeypatch):
    """Each service process's directory (its address, TLS files, stderr) is gone once it
    stops, a restart's included. The directories are made in this test's own temporary
    directory: in the shared one, a service another test started at the same moment (another
    xdist worker) was counted as one of these."""
    own = tmp_path / "tmp"
    own.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(own))
    before = _service_dirs()
    shuffle = ShuffleServiceProcess(str(tmp_path / "node"), TOKEN).start()
    markers = MarkerServiceProcess(str(tmp_path / "table"), TOKEN).start()
    try:
        assert len(_service_dirs() - before) == 2
        assert ShuffleClient(shuffle.address, TOKEN).service_stats()
        shuffle.restart()  # a restart keeps none of the old one's either
        assert len(_service_dirs() - before) == 2
    finally:
        shuffle.kill()
        markers.kill()
    assert _service_dirs() - before == set()


def test_clients_reconnect_after_an_idle_close(start_service):
    """The services close connections idle past 1.5 s here; a client's next request opens a
    new one instead of failing."""
    shuffle = start_service("shuffle")
    markers = start_service("markers")
    with ShuffleClient(shuffle.address, TOKEN) as c:
        first = c.service_stats()["counters"]["connections_accepted"]
        m = MarkerClient(markers.address, TOKEN)
        assert m.create(marker_dir("j"), "p/a-j-t0-a0.parquet.marker.CREATE")
        time.sleep(2.5)
        assert c.service_stats()["counters"]["connections_accepted"] == first + 1
        assert m.create(marker_dir("j"), "p/b-j-t0-a0.parquet.marker.CREATE")
