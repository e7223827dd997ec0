"""The reader checks a merged partition's meta against the merge status the driver finalized:
a merged partition that holds other maps than the status says is not used (it falls back to
the map outputs whole), so no map's block is lost or read twice."""

from __future__ import annotations

import pytest
from pyroaring import BitMap

from dataferry.shuffle import (
    MapStatus,
    MergedPartition,
    PushTarget,
    ReadConfig,
    ReduceInput,
    ShuffleClient,
    ShuffleServiceProcess,
    push_map_output,
    read_reduce,
    register_app,
    write_map_output,
)
from dataferry.shuffle.mapoutput import block_sizes
from dataferry.store import LocalStore

TOKEN = "meta-token"
APP = "app-meta"
MAPS = 6


@pytest.fixture(scope="module")
def merged(tmp_path_factory):
    """Maps 0-4 pushed and merged (map 5's block only in its map output), finalized."""
    directory = str(tmp_path_factory.mktemp("meta") / "node")
    with ShuffleServiceProcess(directory, TOKEN) as svc:
        creds = register_app(APP, [svc.address], TOKEN)
        store = LocalStore(directory)
        offsets = {
            m: write_map_output(store, APP, 0, m, 0, [bytes([m]) * 500]) for m in range(MAPS)
        }
        target = PushTarget(APP, 0, 0, 1, (svc.address,), creds)
        for m in range(MAPS - 1):
            assert push_map_output(store, target, m, 0, offsets[m]).blocks == 1
        (status,) = ShuffleClient(svc.address, credentials=creds).finalize(APP, 0, 0)
        assert status.bitmap == BitMap(range(MAPS - 1))
        maps = tuple(MapStatus(m, 0, svc.address, block_sizes(offsets[m])) for m in range(MAPS))
        yield svc, creds, maps, status


@pytest.mark.parametrize("whole", [True, False], ids=["whole-partition", "by-chunk"])
@pytest.mark.parametrize(
    "claimed",
    [BitMap(range(MAPS)), BitMap(range(MAPS - 2))],
    ids=["status-claims-more", "status-claims-fewer"],
)
def test_a_meta_that_does_not_match_the_status_falls_back(merged, claimed, whole):
    """The status the reducer got claims more maps than the service merged (a block would be
    lost: map 5 counted as merged, never read) or fewer (maps 3 and 4 would arrive twice)."""
    svc, creds, maps, status = merged
    config = ReadConfig(max_merged_read_bytes=1 << 30 if whole else 0)
    part = MergedPartition(0, svc.address, claimed, status.size)
    blocks, report = read_reduce(ReduceInput(APP, 0, 0, 0, maps, part, creds, config))
    assert [bytes(b.payload) for b in blocks] == [bytes([m]) * 500 for m in range(MAPS)]
    assert report.merged_blocks == 0 and report.fallback_chunks == 1


def test_a_matching_meta_is_used(merged):
    svc, creds, maps, status = merged
    part = MergedPartition(0, svc.address, status.bitmap, status.size)
    blocks, report = read_reduce(ReduceInput(APP, 0, 0, 0, maps, part, creds))
    assert [bytes(b.payload) for b in blocks] == [bytes([m]) * 500 for m in range(MAPS)]
    assert report.merged_blocks == MAPS - 1 and report.original_blocks == 1
