"""What only the S3 store does, against a real S3-protocol server (moto in its own process)."""

from __future__ import annotations

from dataferry.store import open_store
from dataferry.testing import LocalS3Server


def test_s3_counts_every_http_request_in_the_store_that_sent_it(s3_url):
    a, b = open_store(s3_url + "/a"), open_store(s3_url + "/b")
    a.write_bytes("x", b"1")
    a.read_bytes("x")
    a.rename("x", "y")  # S3 has no rename: several requests for one operation
    assert not b.exists("nothing")
    ca, cb = a.stats.counters, b.stats.counters
    operations = sum(v for k, v in ca.items() if k.startswith("op_") and "." not in k)
    assert ca["store_requests"] == ca["store_requests_read"] + ca["store_requests_write"]
    assert ca["store_requests"] > operations >= 3
    # b's requests are b's: the client is shared, the statistics are not
    assert cb.get("store_requests_write", 0) == 0 and cb["store_requests_read"] >= 1


def test_a_second_endpoint_in_the_environment_gets_its_own_client(s3_url):
    first = open_store(s3_url + "/first")
    first.write_bytes("k", b"on the first server")
    with LocalS3Server() as other, other.exported():
        bucket = other.create_bucket()
        open_store(f"s3://{bucket}/x").write_bytes("k", b"on the other server")
        assert open_store(f"s3://{bucket}/x").read_bytes("k") == b"on the other server"
    # the other server is gone and the variables are back: the first server answers again
    assert open_store(s3_url + "/first").read_bytes("k") == b"on the first server"
