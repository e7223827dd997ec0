"""Jobs on several hosts (network namespaces): the output is exactly the input, and the
services' statistics show traffic crossing hosts.

One cluster serves the whole module (see conftest.py); the tests that kill a worker host run
last, and each starts that host's worker again afterwards.
"""

from __future__ import annotations

import sys
import time

import pytest

from dataferry.net.addresses import host_of

pytestmark = pytest.mark.timeout(400)


def assert_same_rows(answer: dict) -> None:
    assert "error" not in answer, answer["error"]
    assert answer["output"]["rows"] == answer["input"]["rows"] > 0
    assert answer["output"] == answer["input"]  # the same row multiset, nothing lost or doubled


def test_cluster_hosts_are_distinct_addresses(cluster):
    addresses = {role: cluster.address(role) for role in ("s3", "driver", "w1", "w2")}
    assert len(set(addresses.values())) == 4
    assert not any(a.startswith("127.") for a in addresses.values())
    answer = cluster.driver("wait", "--workers", "2")
    assert sorted(host_of(w) for w in answer["workers"]) == sorted(
        [addresses["w1"], addresses["w2"]]
    )


def test_a_host_advertises_its_own_address_for_a_wildcard_bind(cluster):
    """Inside a worker host (no default route), a service bound to 0.0.0.0 advertises that
    host's address, with or without a peer to route to."""
    code = (
        "from dataferry.net.addresses import advertised_host as a; "
        f"print(a('0.0.0.0'), a('0.0.0.0', '{cluster.address('driver')}'))"
    )
    done = cluster.lab.run("w1", [sys.executable, "-c", code], 60, cluster.env)
    assert done.stdout.split() == [cluster.address("w1")] * 2, done.stderr


def test_manifest_on_a_shared_directory(cluster):
    dest = cluster.shared / "manifest-table"
    answer = cluster.driver("write", "--committer", "manifest", "--dest", str(dest))
    assert_same_rows(answer)
    # the partitions were written on both worker hosts into the one shared directory
    assert answer["task_hosts"] == sorted([cluster.address("w1"), cluster.address("w2")])
    assert (dest / "_SUCCESS").exists()


def test_magic_on_the_s3_host(cluster):
    answer = cluster.driver("write", "--committer", "magic", "--dest", "s3")
    assert_same_rows(answer)
    assert answer["dest"].startswith("s3://")
    assert answer["task_hosts"] == sorted([cluster.address("w1"), cluster.address("w2")])


def test_direct_with_the_marker_service_on_the_driver_host(cluster):
    answer = cluster.driver(
        "write", "--committer", "direct", "--dest", "s3", "--markers", "service"
    )
    assert_same_rows(answer)
    service = answer["marker_service"]
    assert host_of(service["url"]) == cluster.address("driver")
    assert service["url"].startswith("https://")  # beyond loopback: TLS
    counters = service["stats"]["counters"]
    # marker requests reached the driver host's service from both worker hosts
    for worker in ("w1", "w2"):
        assert counters.get(f"requests_from.{cluster.address(worker)}", 0) > 0, counters
    assert counters.get("marker_create_requests", 0) >= 8  # one per file at least
    print("marker requests by client host:", {k: v for k, v in counters.items() if "_from." in k})


def test_a_marker_service_on_loopback_is_refused_for_workers_on_other_hosts(cluster):
    answer = cluster.driver("write", "--committer", "direct", "--dest", "s3",
                            "--markers", "service", "--service-host", "127.0.0.1")  # fmt: skip
    assert "ConfigError" in answer["error"] and "on loopback" in answer["error"]
    assert answer["tasks"] == 0  # refused before any task ran


def test_shuffle_pushes_and_merged_reads_cross_hosts(cluster):
    answer = cluster.driver("shuffle")
    assert_same_rows(answer)
    assert answer["keys_in_one_partition"]
    report = answer["report"]
    assert report["push"] and report["finalize"]["merged_partitions"] == report["reduces"]
    services = answer["services"]  # worker address -> its shuffle service
    w1, w2 = cluster.address("w1"), cluster.address("w2")
    by_host = {host_of(s["address"]): s["stats"]["counters"] for s in services.values()}
    assert sorted(by_host) == sorted([w1, w2])  # each service advertises its worker's host
    for here, there in ((w1, w2), (w2, w1)):
        # maps on the other host pushed blocks to this host's merger (every map pushes to
        # both mergers, and maps ran on both hosts)
        assert by_host[here].get(f"push_from.{there}", 0) > 0, by_host
    # and reduces read merged data from the service on the other host (8 reduces: that some
    # run away from their merger is all but certain; which ones is Dask's choice)
    # (a merged partition is read whole in one request, or chunk by chunk when it is large)
    crossed = sum(
        by_host[a].get(f"{read}_from.{b}", 0)
        for a, b in ((w1, w2), (w2, w1))
        for read in ("merged_partition", "merged_chunk")
    )
    assert crossed > 0, by_host
    print("shuffle across hosts:", {h: {k: v for k, v in c.items() if "_from." in k}
                                    for h, c in by_host.items()})  # fmt: skip


def run_and_kill_w2(cluster, name: str, *args: str) -> dict:
    """Run a driver command whose 8 partitions take 1.5 s each; kill -9 every process on
    host w2 once a partition has begun there; the driver's answer. w2 gets a new worker
    afterwards, for the tests that follow."""
    started = cluster.shared / f"started-{name}"
    started.mkdir()
    proc = cluster.driver(*args, "--slow", "1.5", "--partitions", "8",
                          "--started", str(started), background=True)  # fmt: skip
    w2 = cluster.address("w2")
    try:
        deadline = time.monotonic() + 90
        while not any(p.name.startswith(w2 + "-") for p in started.iterdir()):
            assert proc.poll() is None, cluster.answer(proc)
            assert time.monotonic() < deadline, "no partition began on w2"
            time.sleep(0.1)
        assert cluster.lab.kill_host("w2")
        answer = cluster.answer(proc, timeout=150)
        # partitions that were running on w2 ran again (on w1): more starts than partitions
        assert len(list(started.iterdir())) > 8
        return answer
    finally:
        if proc.poll() is None:
            proc.kill()
        cluster.start_worker("w2")
        cluster.driver("wait", "--workers", "2")


def test_killing_a_worker_host_mid_write(cluster):
    """Dask runs w2's partitions again on w1, and the table holds every input row once."""
    dest = cluster.shared / "killed-table"
    answer = run_and_kill_w2(cluster, "write", "write", "--committer", "manifest",
                             "--dest", str(dest))  # fmt: skip
    assert_same_rows(answer)
    assert [host_of(w) for w in answer["workers_now"]] == [cluster.address("w1")]


def test_killing_a_worker_host_mid_shuffle(cluster):
    """The shuffle finishes with every row once (pushes to the dead merger fall back to the
    map outputs), or fails with dataferry's own error: never with rows lost or doubled."""
    answer = run_and_kill_w2(cluster, "shuffle", "shuffle")
    print("shuffle with a host killed:", answer.get("error") or answer["report"])
    if "error" not in answer:
        assert_same_rows(answer)
        assert answer["keys_in_one_partition"]
    else:  # a clean failure: a dataferry error that says what went wrong
        assert answer["error"].partition(":")[2].strip(), answer
