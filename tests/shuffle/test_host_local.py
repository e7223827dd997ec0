"""Host-local reads (Spark's readHostLocalDisk): a reducer on the merger's host reads the
finalized merged files from the merger's directory, and asks the service whenever the files
there are missing or do not match what finalize reported."""

from __future__ import annotations

import pytest

from dataferry.shuffle import (
    MapStatus,
    ReadConfig,
    ReduceInput,
    ShuffleClient,
    ShuffleServiceProcess,
    read_reduce,
    register_app,
)
from dataferry.shuffle.files import merged_files
from dataferry.shuffle.mapoutput import block_sizes
from dataferry.store import LocalStore

from .pushed import push_and_finalize

TOKEN = "host-local-token"
APP = "app-h"
MAPS = 4


def payload(m: int) -> bytes:
    return bytes([m]) * (100 + m)


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("host-local") / "node")
    with ShuffleServiceProcess(directory, TOKEN, min_chunk_size=1) as svc:
        svc.creds = register_app(APP, [svc.address], TOKEN)
        yield svc


_shuffles = iter(range(10, 10**6))


def shuffle_of(node):
    """A fresh shuffle of MAPS maps into one reduce, pushed and finalized: the reducer reads
    only what finalize reported (the driver's MergedPartition)."""
    shuffle = next(_shuffles)
    store, offsets, merged = push_and_finalize(node, APP, shuffle, MAPS, payload)
    maps = tuple(MapStatus(m, 0, node.address, block_sizes(offsets[m])) for m in range(MAPS))
    return shuffle, store, maps, merged


def read(node, shuffle, maps, merged, local_dirs, config=None):
    inp = ReduceInput(
        APP, shuffle, 0, 0, maps, merged, node.creds, config or ReadConfig(), local_dirs=local_dirs
    )
    blocks, report = read_reduce(inp)
    assert [b.map_index for b in blocks] == list(range(MAPS))  # every map once
    assert [bytes(b.payload) for b in blocks] == [payload(m) for m in range(MAPS)]
    return report


def test_a_merge_on_this_host_is_read_from_its_directory(node):
    shuffle, _, maps, merged = shuffle_of(node)
    before = ShuffleClient(node.address, TOKEN).service_stats()["counters"].get("served_bytes", 0)
    report = read(node, shuffle, maps, merged, {node.address: node.directory})
    assert report.host_local_bytes == merged.size
    assert (report.merged_blocks, report.original_blocks) == (MAPS, 0)
    after = ShuffleClient(node.address, TOKEN).service_stats()["counters"].get("served_bytes", 0)
    assert after == before  # nothing came through the service


def test_host_local_off_or_elsewhere_fetches_from_the_service(node):
    shuffle, _, maps, merged = shuffle_of(node)
    off = ReadConfig(host_local=False)
    assert (
        read(node, shuffle, maps, merged, {node.address: node.directory}, off).host_local_bytes == 0
    )
    report = read(node, shuffle, maps, merged, {})
    assert (report.host_local_bytes, report.merged_blocks) == (0, MAPS)


def test_missing_or_short_files_fall_back_to_the_service(node, tmp_path):
    shuffle, store, maps, merged = shuffle_of(node)
    report = read(node, shuffle, maps, merged, {node.address: str(tmp_path)})  # not there
    assert (report.host_local_bytes, report.merged_blocks) == (0, MAPS)
    copy = LocalStore(str(tmp_path))  # a directory whose data file is one byte short
    for path in merged_files(APP, shuffle, 0, 0):
        copy.write_bytes(path, store.read_bytes(path))
    copy.truncate(merged_files(APP, shuffle, 0, 0)[0], merged.size - 1)
    report = read(node, shuffle, maps, merged, {node.address: str(tmp_path)})
    assert (report.host_local_bytes, report.merged_blocks) == (0, MAPS)
