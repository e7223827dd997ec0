from __future__ import annotations

import pytest

from dataferry.errors import ConfigError
from dataferry.store import PROFILES, open_store
from dataferry.store.pacing import Pacer


def test_every_profile_documents_what_it_models():
    assert set(PROFILES) == {"hdfs", "hdfs-loaded", "abfs", "gcs", "s3"}
    for p in PROFILES.values():
        assert p.models and p.latency_s > 0 and p.write_ops_per_s > 0


def test_rename_semantics_follow_the_profile(tmp_path):
    hdfs = open_store(f"sim:hdfs:{tmp_path / 'h'}", latency_scale=0)
    gcs = open_store(f"sim:gcs:{tmp_path / 'g'}", latency_scale=0)
    assert hdfs.capabilities.atomic_dir_rename and hdfs.capabilities.o1_dir_rename
    assert not gcs.capabilities.atomic_file_rename and not gcs.capabilities.atomic_dir_rename
    for s in (hdfs, gcs):
        for i in range(5):
            s.write_bytes(f"d/f{i}", b"x" * 1000)
        before = s.stats.counter("store_requests_write")
        s.rename("d", "e")
        s.stats.snapshot()
        writes = s.stats.counter("store_requests_write") - before
        if s is hdfs:
            assert writes == 1  # one O(1) rename
        else:
            assert writes == 10  # copy + delete per object
            assert s.stats.counter("store_bytes_write") >= 5000 + 5000  # written, then copied


def test_s3_ceilings_are_per_prefix(tmp_path):
    s3 = open_store(f"sim:s3:{tmp_path}", latency_scale=0)
    assert s3._pacer("write", "a/x") is s3._pacer("write", "a/y")
    assert s3._pacer("write", "a/x") is not s3._pacer("write", "b/x")
    hdfs = open_store(f"sim:hdfs:{tmp_path}", latency_scale=0)
    assert hdfs._pacer("write", "a/x") is hdfs._pacer("write", "b/x")


def test_pacer_spaces_requests_by_the_ceiling():
    pacer = Pacer(100.0)  # 10 ms apart
    waits = [pacer.reserve() for _ in range(5)]
    assert waits[0] == pytest.approx(0.0, abs=0.005)
    # the fifth request may go out no earlier than 40 ms after the first
    assert waits[4] >= 0.035


def test_etags_stripped_where_the_store_has_none(tmp_path):
    hdfs = open_store(f"sim:hdfs:{tmp_path}", latency_scale=0)
    hdfs.write_bytes("f", b"1")
    assert hdfs.stat("f").etag is None
    abfs = open_store(f"sim:abfs:{tmp_path}", latency_scale=0)
    assert abfs.stat("f").etag


def test_unknown_profile_is_named(tmp_path):
    with pytest.raises(ConfigError, match="unknown store model 'hdfz'"):
        open_store(f"sim:hdfz:{tmp_path}")


def test_url_without_directory_gets_a_fresh_one():
    a = open_store("sim:hdfs", latency_scale=0)
    b = open_store("sim:hdfs", latency_scale=0)
    assert a.full_url() != b.full_url()


def test_token_bucket_rejects_over_the_rate():
    from dataferry.store.pacing import TokenBucket

    bucket = TokenBucket(100.0, burst_s=0.1)  # 10 tokens of burst
    taken = sum(bucket.try_take() for _ in range(50))
    assert 10 <= taken <= 12


def test_object_store_models_answer_slow_down_over_their_ceiling(tmp_path):
    from dataclasses import replace

    from dataferry.store import LocalStore, SimStore

    assert PROFILES["s3"].over_ceiling == "slowdown" and PROFILES["hdfs"].over_ceiling == "queue"
    tight = replace(PROFILES["s3"], write_ops_per_s=20.0, latency_s=0.001)
    store = SimStore(tight, LocalStore(str(tmp_path)), latency_scale=0.01)
    for i in range(40):  # twice the burst allowance, as fast as possible
        store.write_bytes(f"p/f{i}", b"x")
    assert store.stats.counter("store_requests_throttled") > 0
    assert len(store.walk("p")) == 40  # every write got through in the end
