"""A reduce's blocks by reference read together: the stubs of a chunk parsed by their headers,
their blocks read from the map outputs kept open (`ReadConfig.keep_open`, as on Dask) into one
buffer, then checked stub by stub as before; the same blocks, the same counts, the same
fallback when a stub lies."""

from __future__ import annotations

import pytest

from dataferry.shuffle import PushConfig, ReadConfig, ReduceInput, read_reduce
from dataferry.shuffle.blocks import HEADER, REF_BODY, BlockRef, frame, ref_stub, stub_refs
from dataferry.shuffle.files import merged_files
from dataferry.shuffle.open_outputs import OpenMapOutputs, open_map_outputs
from dataferry.stats import IOStatistics
from dataferry.store import LocalStore

from .test_push_by_reference import APP, MAPS, introduce, pair, payload, push_maps_of_a

__all__ = ["pair"]  # the services fixture, shared


def test_the_stubs_of_a_chunk_are_parsed_by_their_headers():
    ref = BlockRef(3, 1, 7, 4096, 120, "127.0.0.1:9", 0xABC)
    data = frame(2, 1, b"bytes") + ref_stub(ref) + frame(4, 1, b"more")
    assert stub_refs(data) == [ref]
    assert stub_refs(data[:-3]) == [ref]  # a cut frame ends the scan; unframe reports it
    assert stub_refs(b"XXXX" + data[4:]) == []  # so does a bad magic


def reduce_input(a, driver, merged, shuffle: int, reduce_id: int, keep_open: bool):
    return ReduceInput(
        APP,
        shuffle,
        driver.merge_id,
        reduce_id,
        tuple(driver.map_statuses()),
        merged[reduce_id],
        a.creds,
        config=ReadConfig(keep_open=keep_open),
        local_dirs={a.address: a.directory},
    )


def test_blocks_by_reference_are_read_together_with_the_same_counts(pair, monkeypatch):
    a, _ = pair
    if not a.stubs:
        pytest.skip("copies carry no stubs")
    shuffle = 21
    driver, _, _, merged = push_maps_of_a(a, shuffle, [a.address], PushConfig(background=False))
    counts = {}
    for keep_open in (False, True):
        if keep_open:  # every block from read_many: none asked for one at a time
            monkeypatch.setattr(OpenMapOutputs, "read", lambda *a, **k: pytest.fail("one by one"))
        stats = IOStatistics()
        blocks, report = read_reduce(reduce_input(a, driver, merged, shuffle, 1, keep_open), stats)
        assert [(x.map_index, bytes(x.payload)) for x in blocks] == [
            (m, payload(m, 1)) for m in range(MAPS)
        ]
        assert report.merged_blocks == MAPS and report.original_blocks == 0
        counts[keep_open] = {
            n: stats.counter(n)
            for n in ("reduce_ref_blocks", "reduce_ref_bytes", "reduce_ref_reads")
        } | {"bytes": stats.counter("reduce_ref_read_bytes")}
    assert counts[True] == counts[False] and counts[True]["reduce_ref_blocks"] == MAPS
    open_map_outputs().release()


@pytest.mark.parametrize("lie", ["offset", "length"])
def test_a_stub_that_lies_still_fails_its_chunk_when_read_ahead(pair, lie):
    """A stub read ahead is checked as one read alone: naming another block (or a length
    past what it names) sends its chunk to the map outputs, with the right blocks."""
    a, b = pair
    if not a.stubs:
        pytest.skip("copies carry no stubs")
    introduce(a, b)
    shuffle = 22
    driver, offsets, _, merged = push_maps_of_a(
        a, shuffle, [a.address], PushConfig(background=False)
    )
    store = LocalStore(a.directory)
    data, _, _ = merged_files(APP, shuffle, driver.merge_id, 0)
    raw = bytearray(store.read_bytes(data))
    m0 = HEADER.unpack_from(raw, 0)[1]
    start, end = (offsets[m0][1], offsets[m0][2]) if lie == "offset" else (0, offsets[m0][1] + 7)
    REF_BODY.pack_into(raw, HEADER.size, 0, start, end - start)
    store.write_bytes(data, bytes(raw))
    blocks, report = read_reduce(reduce_input(a, driver, merged, shuffle, 0, True))
    assert [(x.map_index, bytes(x.payload)) for x in blocks] == [
        (m, payload(m, 0)) for m in range(MAPS)
    ]
    assert report.fallback_chunks == 1 and report.original_blocks == MAPS
    open_map_outputs().release()


def test_a_map_outputs_paths_are_made_once_per_process():
    """Every reducer names the same map outputs: their paths are remembered, not made again
    for each block (and an app id that could escape is still refused)."""
    from dataferry.errors import ConfigError
    from dataferry.shuffle.files import map_output

    assert map_output(APP, 5, 3, 9) is map_output(APP, 5, 3, 9)
    assert map_output(APP, 5, 3, 9)[0].endswith("shuffle_5/shuffle_5_3_9.data")
    with pytest.raises(ConfigError):
        map_output("../x", 5, 3, 9)
