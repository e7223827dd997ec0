"""The namespace lab cleans up after itself and after runs that died before they could."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from .netns import PREFIX, Lab, LabUnavailable, check_machine, ip, namespace_pids, remove_stale


def namespaces() -> set[str]:
    return {line.split()[0] for line in ip("netns", "list").stdout.splitlines() if line.split()}


@pytest.fixture
def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_crashed_runs_namespaces_are_removed_by_the_next_run(dead_pid):
    try:
        check_machine()
    except LabUnavailable as e:
        pytest.skip(f"multi-host tests: {e}")
    stale = f"{PREFIX}{dead_pid}-1-w9"
    ip("netns", "add", stale)
    sleeper = subprocess.Popen(["ip", "netns", "exec", stale, "sleep", "600"])
    try:
        deadline = time.monotonic() + 10  # `ip netns exec` enters the namespace, then runs
        while not namespace_pids(stale) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert stale in namespaces() and namespace_pids(stale)
        assert stale in remove_stale()
        assert stale not in namespaces()
        assert sleeper.wait(10) != 0  # what ran in it was killed
    finally:
        sleeper.kill()
        ip("netns", "del", stale, check=False)


def test_destroy_removes_every_namespace_and_what_runs_in_it():
    try:
        lab = Lab.create(("a", "b"))
    except LabUnavailable as e:
        pytest.skip(f"multi-host tests: {e}")
    try:
        made = {h.ns for h in lab.hosts.values()} | {lab.switch}
        assert made <= namespaces()
        proc = lab.spawn("a", ["sleep", "600"], "/dev/null")
        probe = f"import socket; socket.create_connection(('{lab.hosts['b'].address}', 9), 2)"
        done = lab.run("a", [sys.executable, "-c", probe], 30)
        assert "Connection refused" in done.stderr  # b answered (nothing listens): one network
    finally:
        lab.destroy()
    assert not made & namespaces()
    assert proc.wait(10) != 0
