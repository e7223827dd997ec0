"""TLS between clients and both services: pinned by fingerprint, on by default beyond loopback,
and the token never on the wire in clear text."""

from __future__ import annotations

import os
import random
import socket
import stat
import threading
import time

import pytest
from pyroaring import BitMap

from dataferry.errors import DataferryError
from dataferry.markers import MarkerClient, MarkerService, MarkerServiceConfig, marker_dir
from dataferry.net import is_loopback, load_identity, self_signed_identity
from dataferry.shuffle import (
    PushCode,
    ShuffleClient,
    ShuffleService,
    ShuffleServiceConfig,
    frame,
    register_app,
)
from dataferry.store import open_store

from ..services import (
    TOKEN,
    dial,
    exchange,
    host_port,
    markers_ok,
    no_unhandled_errors,
    read_all,
    shuffle_ok,
)

NAME = "p=1/a-j-t0-a0.parquet.marker.CREATE"


@pytest.fixture(scope="module")
def identity():
    return self_signed_identity(["127.0.0.1"])


class Relay:
    """A TCP relay on loopback that records every byte the client sends through it."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target, self.seen = target, bytearray()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, record: bool) -> None:
        try:
            while data := src.recv(65536):
                if record:
                    with self._lock:
                        self.seen += data
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.listener.close()


def test_the_token_never_travels_in_clear_under_tls(start_service, identity):
    for kind in ("shuffle", "markers"):
        for tls in (None, identity):  # plain first: the relay does see the token then
            proc = start_service(kind, tls=tls)
            relay = Relay(host_port(proc))
            address = f"127.0.0.1:{relay.port}"
            if kind == "shuffle":
                with ShuffleClient(address, TOKEN, fingerprint=proc.fingerprint) as c:
                    assert "counters" in c.service_stats()
            else:
                scheme = "https" if tls else "http"
                c = MarkerClient(f"{scheme}://{address}", TOKEN, fingerprint=proc.fingerprint)
                assert c.health()["ok"]
            relay.close()
            assert (TOKEN.encode() in relay.seen) is (tls is None), (kind, tls)
            proc.kill()


def test_a_wrong_fingerprint_is_refused_before_the_token_is_sent(start_service, identity):
    other = self_signed_identity(["127.0.0.1"]).fingerprint
    shuffle = start_service("shuffle", tls=identity)
    with pytest.raises(DataferryError, match=shuffle.address + ".*refusing"):
        ShuffleClient(shuffle.address, TOKEN, fingerprint=other).service_stats()
    markers = start_service("markers", tls=identity)
    assert markers.address.startswith("https://")
    with pytest.raises(DataferryError, match="refusing to send it the token"):
        MarkerClient(markers.address, TOKEN, fingerprint=other).create(marker_dir("j"), NAME)
    # a TLS client to a plain service fails clearly too (it never speaks in clear)
    plain = start_service("shuffle")
    with pytest.raises(DataferryError, match="TLS handshake failed"):
        ShuffleClient(plain.address, TOKEN, fingerprint=other).service_stats()
    shuffle_ok(shuffle)
    markers_ok(markers)


def test_beyond_loopback_tls_is_on_by_default(tmp_path):
    store = open_store(str(tmp_path))
    config = ShuffleServiceConfig(token=TOKEN)
    with ShuffleService(store, config).start("0.0.0.0") as shuffle:
        assert len(shuffle.fingerprint) == 64
        port = shuffle.address.rpartition(":")[2]
        local = f"127.0.0.1:{port}"
        with ShuffleClient(local, TOKEN, fingerprint=shuffle.fingerprint) as c:
            assert "counters" in c.service_stats()
        with pytest.raises(DataferryError):  # clear text to a TLS service gets nowhere
            ShuffleClient(local, TOKEN, timeout=5).service_stats()
    with MarkerService(store, MarkerServiceConfig(token=TOKEN)).start("0.0.0.0") as markers:
        assert markers.url.startswith("https://") and len(markers.fingerprint) == 64
        port = markers.url.rpartition(":")[2]
        client = MarkerClient(f"https://127.0.0.1:{port}", TOKEN, fingerprint=markers.fingerprint)
        assert client.create(marker_dir("j"), NAME)
    with ShuffleService(store, config).start("127.0.0.1") as on_loopback:
        assert on_loopback.fingerprint == ""  # plain on loopback unless asked
    with MarkerService(store, MarkerServiceConfig()).start("127.0.0.1", tls=None) as plain:
        assert plain.url.startswith("http://")


def test_clients_refuse_clear_text_off_loopback():
    for host in ("192.0.2.7", "10.1.2.3", "example.org"):
        assert not is_loopback(host)
        with pytest.raises(DataferryError, match="clear text"):
            ShuffleClient(f"{host}:7337", TOKEN, timeout=1).service_stats()
        with pytest.raises(DataferryError, match="clear text"):
            MarkerClient(f"http://{host}:7337", TOKEN, timeout=1).create(marker_dir("j"), NAME)
    with pytest.raises(DataferryError, match="fingerprint"):
        MarkerClient("https://127.0.0.1:1", TOKEN)
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.3.2.1", "::1", "localhost"))


def test_service_process_hands_its_identity_over_privately(start_service, identity, tmp_path):
    """The child gets the job's identity in 0600 files, which are gone once it is up (the key
    does not stay on disk); the process's temporary directory goes on stop."""
    proc = start_service("shuffle", tls=identity)
    folder = proc._dir
    assert proc.fingerprint == identity.fingerprint
    assert sorted(os.listdir(folder)) == ["address", "stderr"]  # no key left on disk
    shuffle_ok(proc)  # the child serves with the identity it was handed
    proc.kill()
    assert not os.path.exists(folder)
    # what the child is handed: private files, loadable as the same identity
    proc._dir = str(tmp_path)
    args = proc._arguments()
    cert, key = args[args.index("--tls-cert") + 1], args[args.index("--tls-key") + 1]
    for path in (cert, key):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert load_identity(cert, key).fingerprint == identity.fingerprint
    proc._dir = ""


def test_pushes_merges_and_reads_work_over_tls(start_service, identity):
    """The whole shuffle exchange over TLS (answers with file contents included), on one
    connection kept alive across requests."""
    shuffle = start_service("shuffle", tls=identity)
    blocks = [(m, 0, frame(m, 0, bytes([m]) * 5000)) for m in range(6)]
    creds = register_app("app", [shuffle.address], TOKEN, fingerprint=shuffle.fingerprint)
    with ShuffleClient(shuffle.address, fingerprint=shuffle.fingerprint, credentials=creds) as c:
        assert c.push("app", 0, 0, blocks) == [PushCode.SUCCESS] * 6
        (status,) = c.finalize("app", 0, 0)
        assert status.bitmap == BitMap(range(6))
        index, _ = c.merged_meta("app", 0, 0, 0)
        chunks = [bytes(c.merged_chunk("app", 0, 0, 0, i)) for i in range(len(index) // 8 - 1)]
        assert b"".join(chunks) == b"".join(b for _, _, b in blocks)
        # one connection to register, one kept alive for the application's requests
        assert c.service_stats()["counters"]["connections_accepted"] == 2


def test_failed_handshakes_leak_no_descriptors(start_service, identity):
    """Garbage, silent and half-done TLS clients: the service's descriptors come back."""
    shuffle = start_service("shuffle", tls=identity)
    fds = f"/proc/{shuffle.pid}/fd"
    shuffle_ok(shuffle)
    baseline = len(os.listdir(fds))
    rng = random.Random(5)
    silent = [dial(shuffle) for _ in range(20)]  # never start the handshake (1 s read timeout)
    for _ in range(40):
        exchange(shuffle, rng.randbytes(rng.randint(1, 3000)))
    for _ in range(10):
        with dial(shuffle) as s:  # a handshake begun, then abandoned
            s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    time.sleep(2.5)
    for s in silent:
        assert read_all(s) == b""
        s.close()
    shuffle_ok(shuffle)
    deadline = time.monotonic() + 5
    while len(os.listdir(fds)) > baseline + 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(os.listdir(fds)) <= baseline + 2
    no_unhandled_errors(shuffle)
