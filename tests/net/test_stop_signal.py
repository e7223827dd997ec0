"""A service process stops on SIGTERM whenever the signal lands.

`dataferry shuffle serve` once ignored a SIGTERM for good: its handler set a
`threading.Event` while the main thread, waiting on that event, held the event's own lock,
and the handler waited on it forever."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# In a process of its own: for every point k of the waiting code, a SIGTERM delivered right
# there (os.kill to oneself runs the handler before it returns, at the k-th traced event).
PROGRAM = textwrap.dedent(
    """
    import os, signal, sys
    from dataferry.net import process

    process.STOP_POLL_S = 0.001  # the wait loop turns fast, so each point is reached soon
    for k in range(1, 40):
        stop = process.stop_on_sigterm()
        seen = [0]

        def trace(frame, event, arg, k=k):
            seen[0] += 1
            if seen[0] == k:
                os.kill(os.getpid(), signal.SIGTERM)
            return trace

        sys.settrace(trace)
        process.wait_for_signal(stop)
        sys.settrace(None)
    print("stopped every time")
    """
)


def test_sigterm_stops_the_wait_wherever_it_lands():
    """Breaking it: a service sent SIGTERM at an unlucky instant never exits (its port and
    directory held until someone kills it -9), and a driver's teardown hangs waiting."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=15
        )
    except subprocess.TimeoutExpired as e:
        raise AssertionError("a SIGTERM was never acted on: the wait deadlocked") from e
    assert done.returncode == 0, done.stderr
    assert "stopped every time" in done.stdout
