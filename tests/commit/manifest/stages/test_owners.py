"""Which attempt writes each destination: a conflict is named exactly, whatever the keys that
stand in for the paths say (a key that collides for every path shows the exact check)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from dataferry.commit.manifest.stages import load as load_stage
from dataferry.commit.manifest.stages.load import load_manifests
from dataferry.commit.manifest.stages.owners import DestinationOwners
from dataferry.errors import JobCommitError

from .helpers import committed, write_attempt


def owners_of(claims: dict[str, list[str]], key=hash) -> tuple[DestinationOwners, list[str]]:
    """Owners whose exact check reads `claims`, and the attempts it read."""
    reads: list[str] = []

    def destinations_of(attempt: str) -> list[str]:
        reads.append(attempt)
        return claims[attempt]

    return DestinationOwners(destinations_of, key=key), reads


@pytest.mark.parametrize("key", [hash, len, lambda _dest: 0], ids=["hash", "len", "constant"])
def test_distinct_destinations_pass_whatever_their_keys(key):
    claims = {"a1": ["p=1/x", "p=2/yy"], "a2": ["p=1/z", "p=3/yy"], "a3": ["q", "p=9/w"]}
    owners, _ = owners_of(claims, key)
    for attempt, dests in claims.items():
        owners.claim(attempt, dests)


@pytest.mark.parametrize("key", [hash, len, lambda _dest: 0], ids=["hash", "len", "constant"])
def test_a_destination_of_two_attempts_names_both(key):
    claims = {"a1": ["p=1/x", "p=1/a"], "a2": ["p=2/b"], "a3": ["p=3/c", "p=1/a"]}
    owners, _ = owners_of(claims, key)
    owners.claim("a1", claims["a1"])
    owners.claim("a2", claims["a2"])
    with pytest.raises(
        JobCommitError, match=r"destination p=1/a is written by two tasks: a1 and a3"
    ):
        owners.claim("a3", claims["a3"])


def test_a_conflict_behind_a_collision_is_still_found():
    """a2's path shares a1's key without being a1's; a3 then writes a2's path: found although
    the key's first owner (a1) does not write it."""
    claims = {"a1": ["aa"], "a2": ["bb"], "a3": ["bb"]}
    owners, reads = owners_of(claims, key=len)
    owners.claim("a1", claims["a1"])
    owners.claim("a2", claims["a2"])  # a collision: a1 is read, and a2 passes
    assert reads == ["a1"]
    with pytest.raises(JobCommitError, match="bb is written by two tasks: a2 and a3"):
        owners.claim("a3", claims["a3"])


def test_a_good_job_reads_nothing_again():
    claims = {f"a{i}": [f"p={i}/f{j}" for j in range(50)] for i in range(20)}
    owners, reads = owners_of(claims)
    for attempt, dests in claims.items():
        owners.claim(attempt, dests)
    assert reads == []


def test_each_attempt_is_read_again_once_at_most():
    claims = {"a1": ["aa", "cc"], "a2": ["bb", "dd"]}
    owners, reads = owners_of(claims, key=len)
    owners.claim("a1", claims["a1"])
    owners.claim("a2", claims["a2"])  # two collisions with a1
    assert reads == ["a1"]


def test_racing_claims_of_one_destination_fail_all_but_one():
    owners, _ = owners_of({f"a{i}": ["same"] for i in range(8)})
    start = threading.Barrier(8)

    def claim(i: int) -> bool:
        start.wait()
        try:
            owners.claim(f"a{i}", ["same"])
        except JobCommitError:
            return False
        return True

    with ThreadPoolExecutor(8) as pool:
        assert sorted(pool.map(claim, range(8))) == [False] * 7 + [True]


def test_the_load_stage_tells_a_collision_from_a_conflict(store, scratch, ctx, monkeypatch):
    """With every path colliding, the load reads manifests again to tell, and refuses only
    the destination two tasks write."""
    real = DestinationOwners.__init__

    def colliding(self, destinations_of, name=str, key=hash):
        real(self, destinations_of, name, key=lambda _dest: 0)

    monkeypatch.setattr(load_stage.DestinationOwners, "__init__", colliding)
    one = write_attempt(store, 1, {"p=1/a": b"1", "p=1/b": b"1"})
    two = write_attempt(store, 2, {"p=2/a": b"2"})
    loaded = load_manifests(ctx, committed(one, two), scratch)
    assert loaded.files == 3

    three = write_attempt(store, 3, {"p=2/a": b"3"})
    with pytest.raises(JobCommitError, match=r"p=2/a is written by two tasks") as e:
        load_manifests(ctx, committed(one, two, three), scratch)
    assert two.task_attempt_id in str(e.value) and three.task_attempt_id in str(e.value)
