"""Who gives way at the per-address cap (`dataferry.net.admission`), without a server."""

from __future__ import annotations

from dataferry.net import Admission, Slot


def admitted(admission: Admission, client: str, closed: list[str], name: str) -> Slot:
    slot = admission.admit(client, lambda: closed.append(name))
    assert slot is not None, name
    return slot


def test_the_oldest_silent_connection_gives_way_before_any_idle_one():
    """Silent connections go first, oldest first; then the longest idle authenticated one.
    Closing an idle task before a silent flood would hand the address to the flood."""
    admission, closed = Admission(3), []
    task = admitted(admission, "h", closed, "task")
    task.authenticated()
    task.idle()
    admitted(admission, "h", closed, "silent-1")
    admitted(admission, "h", closed, "silent-2")
    admitted(admission, "h", closed, "silent-3")
    admitted(admission, "h", closed, "silent-4")
    assert closed == ["silent-1", "silent-2"]
    assert admission.total() == 3


def test_the_longest_idle_goes_first_and_a_busy_address_turns_newcomers_away():
    """Between authenticated connections the longest idle gives way; when every one serves a
    request the newcomer is turned away (a request in flight is never cut off)."""
    admission, closed = Admission(2), []
    a = admitted(admission, "h", closed, "a")
    b = admitted(admission, "h", closed, "b")
    for slot in (a, b):
        slot.authenticated()
    b.idle()
    a.idle()  # b has been idle longer
    c = admitted(admission, "h", closed, "c")
    assert closed == ["b"]
    c.authenticated()
    a.busy()
    assert admission.admit("h", lambda: closed.append("d")) is None  # a and c serve requests
    assert admission.admit("other", lambda: None) is not None  # other addresses are apart
    admission.release(b)  # already gone: nothing else is released
    assert admission.total() == 3
    admission.release(a)
    assert admitted(admission, "h", closed, "e") and closed == ["b"]
