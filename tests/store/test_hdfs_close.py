"""Closing a written file for its stalled writer (store/hdfs/close.py), against a stand-in
NameNode whose closes stall on demand: the write returns once the NameNode can close the file,
never asks it to close a file still being written, and falls back to waiting for the NameNode's
own recovery when it did. (On the real NameNode: tests/store/test_hdfs.py.)"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pytest

from dataferry.store.hdfs import close
from dataferry.store.hdfs.close import write_closed


@dataclass
class _File:
    data: bytes = b""
    length: int = 0  # what the NameNode shows
    mtime: int = 1000  # the creation's, until the file closes
    committed_at: float | None = None
    closed: bool = False
    recovering_since: float | None = None


class _Info:
    def __init__(self, f: _File) -> None:
        self.length, self.modification_time = f.length, f.mtime


class _NameNode:
    """hdfs-native's create/get_file_info/recover_lease over one file. A close sends its last
    packet (`send_s`), commits the block, and completes at once unless `stall` (then it waits
    `stall_s`, hdfs-native's retry); the block is reported `report_s` after its commit."""

    def __init__(self, stall: bool, send_s: float = 0.01, report_s: float = 0.01) -> None:
        self.stall, self.send_s, self.report_s, self.stall_s = stall, send_s, report_s, 0.5
        self.file = _File()
        self.asked: list[tuple[int, float]] = []  # (length, s since its commit or -1)
        self.recovery_s = 0.2
        self.lock = threading.Lock()

    def create(self, path: str, options: object) -> _Writer:
        return _Writer(self)

    def get_file_info(self, path: str) -> _Info:
        with self.lock:
            return _Info(self.file)

    def _reported(self) -> bool:
        f = self.file
        return f.committed_at is not None and time.monotonic() - f.committed_at >= self.report_s

    def _close(self) -> None:
        self.file.closed, self.file.mtime = True, 2000

    def recover_lease(self, path: str) -> bool:
        with self.lock:
            f = self.file
            since = -1.0 if f.committed_at is None else time.monotonic() - f.committed_at
            self.asked.append((f.length, since))
            if f.closed:
                return True
            if f.recovering_since is not None:
                if time.monotonic() - f.recovering_since >= self.recovery_s:
                    f.length = len(f.data)  # the DataNode's whole replica
                    self._close()
                    return True
                return False
            if f.committed_at is None:  # under construction: the NameNode recovers the block
                f.recovering_since = time.monotonic()
                return False
            if not self._reported():
                raise RuntimeError('RPCError("AlreadyBeingCreatedException", "waiting")')
            self._close()
            return True


class _Writer:
    def __init__(self, nn: _NameNode) -> None:
        self.nn = nn

    def __enter__(self) -> _Writer:
        return self

    def write(self, data: bytes) -> None:
        self.nn.file.data = data

    def __exit__(self, *exc: object) -> None:
        nn, f = self.nn, self.nn.file
        time.sleep(nn.send_s)
        with nn.lock:
            if f.recovering_since is not None:
                raise RuntimeError("Commit or complete block, whereas it is under recovery")
            f.committed_at, f.length = time.monotonic(), len(f.data)
            if not nn.stall and not f.closed:
                time.sleep(nn.report_s)
                nn._close()
                return
        time.sleep(nn.stall_s)
        with nn.lock:
            if f.recovering_since is not None and not f.closed:
                raise RuntimeError("Commit or complete block, whereas it is under recovery")
            nn._close()  # (or finds it closed for it: HDFS-3031)


def test_a_stalled_close_ends_when_the_namenode_can_close_the_file():
    """The writer's close waits half a second (hdfs-native's retry of `complete`): the write
    returns once the block is reported, the NameNode having closed the file for its writer.
    Broken, every record a job commit writes on HDFS costs that half second as often as not
    (the claim, the intent, `_SUCCESS`)."""
    nn = _NameNode(stall=True)
    began = time.perf_counter()
    assert write_closed(nn, "/d/f", b"record", None) is True
    assert time.perf_counter() - began < nn.stall_s  # (about 0.04 s; the stall alone is 0.5)
    assert nn.file.closed and nn.file.length == 6


def test_the_namenode_is_asked_only_once_the_whole_file_is_committed():
    """Every request to close the file for its writer comes after the NameNode showed the
    whole length for SETTLED_S: asked while the block is still
    being written, the NameNode would start recovering it and the writer's close would fail."""
    nn = _NameNode(stall=True, send_s=0.05, report_s=0.1)
    assert write_closed(nn, "/d/f", b"record", None) is True
    assert nn.asked
    for length, since in nn.asked:
        assert length == 6 and since >= close.SETTLED_S


def test_a_close_that_does_not_stall_is_left_to_its_writer(monkeypatch):
    """A close that completes at once is the writer's: the NameNode is never asked. (The
    watch waits longer here than the store does, so a loaded machine that is slow to end the
    writer's thread after its close is not taken for a stall.)"""
    monkeypatch.setattr(close, "SETTLED_S", 0.25)
    nn = _NameNode(stall=False)
    assert write_closed(nn, "/d/f", b"record", None) is False
    assert nn.asked == [] and nn.file.closed


def test_a_writer_held_up_is_closed_by_the_namenodes_recovery(monkeypatch):
    """Asked while the block was still being written (a writer held up past SETTLED_S), the
    NameNode recovers the block and closes the file itself; the writer's close fails, and the
    write waits for the NameNode's close and checks the length. Broken, such a write fails
    (or returns before the file is closed)."""
    monkeypatch.setattr(close, "SETTLED_S", 0.0)
    nn = _NameNode(stall=True, send_s=0.05)
    monkeypatch.setattr(nn, "get_file_info", lambda p: _Info(_File(length=6)))  # shows early
    assert write_closed(nn, "/d/f", b"record", None) is True
    assert nn.file.closed and nn.file.recovering_since is not None


def test_a_file_closed_short_fails_the_write(monkeypatch):
    """A file the NameNode closed with fewer bytes than were written is no write."""
    monkeypatch.setattr(close, "SETTLED_S", 0.0)
    nn = _NameNode(stall=True, send_s=0.05)
    monkeypatch.setattr(
        nn, "get_file_info", lambda p: _Info(_File(length=6 if not nn.asked else 2))
    )
    with pytest.raises(OSError, match="2 bytes of 6"):
        write_closed(nn, "/d/f", b"record", None)


def test_a_file_is_not_watched_while_its_bytes_are_sent(monkeypatch):
    """A large file takes a while to send: the NameNode is not asked about it (one request
    each few milliseconds) until its writer is closing it."""
    nn = _NameNode(stall=False)
    looked: list[float] = []
    info = nn.get_file_info
    monkeypatch.setattr(nn, "get_file_info", lambda p: looked.append(1) or info(p))
    monkeypatch.setattr(_Writer, "write", lambda self, data: time.sleep(0.2))
    assert write_closed(nn, "/d/f", b"record", None) is False
    assert len(looked) < 10  # its close only (20 ms here); 40 looks if watched while sending


def test_a_failed_write_raises_its_error():
    """A create or write the NameNode refuses is the write's error; nothing is asked."""
    nn = _NameNode(stall=False)

    def refuse(path: str, options: object) -> _Writer:
        raise PermissionError("denied")

    nn.create = refuse  # type: ignore[method-assign]
    with pytest.raises(PermissionError, match="denied"):
        write_closed(nn, "/d/f", b"record", None)
    assert nn.asked == []
