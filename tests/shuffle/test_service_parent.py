"""A shuffle service started by a process that is killed (SIGKILL: no teardown runs) stops by
itself instead of living on without a parent, holding its port and directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

# the parent: starts a service, says its pid, then waits to be killed
PARENT = """
import sys, time
from dataferry.shuffle import ShuffleServiceProcess
service = ShuffleServiceProcess(sys.argv[1], "t" * 32).start()
print(service.pid, flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purposes (reaped by whoever adopted it)
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_service_exits_when_its_parent_is_killed(tmp_path):
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        service_pid = int(parent.stdout.readline())
        assert _alive(service_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while _alive(service_pid):
            assert time.monotonic() < deadline, "the service outlived its killed parent"
            time.sleep(0.05)
    finally:
        parent.kill()
        parent.wait(10)
