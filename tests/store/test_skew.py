"""`ClockSkewStore`: every modification time shifted, everything else as the inner store has it."""

from __future__ import annotations

from dataferry.store import open_store
from dataferry.store.skew import ClockSkewStore


def test_every_listing_reports_times_off_by_the_offset_and_the_bytes_untouched(tmp_path):
    """The referee's and the claim tests' model of a taker whose clock runs ahead of the
    store. Were one listing left unshifted, a judge could compare two clocks without the
    tests ever seeing it."""
    inner = open_store(str(tmp_path / "s"))
    inner.write_bytes("d/f", b"abc")
    skewed = ClockSkewStore(inner, -300.0)
    true = inner.stat("d/f").mtime
    assert skewed.stat("d/f").mtime == true - 300.0
    assert [st.mtime for st in skewed.list("d")] == [true - 300.0]
    assert [st.mtime for st in skewed.walk("") if st.path == "d/f"] == [true - 300.0]
    assert skewed.read_bytes("d/f") == b"abc"
    skewed.write_bytes("d/g", b"x")  # written through to the inner store
    assert inner.read_bytes("d/g") == b"x"
