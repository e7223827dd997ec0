"""The one resilient move alone, against a fault-injecting local store: each answer a store
can give a rename, and what the move makes of it."""

from __future__ import annotations

import pytest

from dataferry.commit.job.move import DestinationTaken, ambiguous_verdict, move
from dataferry.errors import JobCommitError, NotFound
from dataferry.stats import IOStatistics
from dataferry.store import FaultRule, Op, fault_layer, open_store
from dataferry.store.pacing import Pacer

DATA = b"the job's bytes"


def _renames(action, when="before", times=1):
    return FaultRule(action=action, when=when, kinds=frozenset({Op.RENAME}), times=times)


@pytest.fixture
def store(tmp_path):
    s = open_store(str(tmp_path / "out"), faults=[])
    s.write_bytes("tmp/a", DATA)
    s.mkdirs("out")
    return s


def _facts(store):
    st = store.stat("tmp/a")
    return {"size": st.size, "etag": st.etag}


def _rename_count(store):
    return sum(1 for t in fault_layer(store).trace if t.op == Op.RENAME)


def test_plain_rename(store):
    outcome = move(store, "tmp/a", "out/a", **_facts(store))
    assert outcome.how == "renamed" and outcome.moved and not outcome.recovered
    assert store.read_bytes("out/a") == DATA and not store.exists("tmp/a")


def test_ambiguous_but_done_is_recovered_without_a_second_rename(store):
    fault_layer(store).add_rule(_renames("ambiguous", "after"))
    stats = IOStatistics()
    outcome = move(store, "tmp/a", "out/a", stats=stats, **_facts(store))
    assert outcome.how == "recovered" and outcome.moved and outcome.recovered
    assert store.read_bytes("out/a") == DATA and not store.exists("tmp/a")
    assert stats.counter("commit_file_rename_ambiguous") == 1
    assert _rename_count(store) == 1


def test_ambiguous_and_done_is_recovered_by_size_where_renames_lose_etags(store):
    facts = _facts(store)
    store.rename("tmp/a", "out/a")  # done, and the etag we recorded says nothing
    verdict = ambiguous_verdict(store, "tmp/a", "out/a", size=facts["size"], etag="other")
    assert verdict == "lost"  # etags kept by rename on this store: a different one is not ours
    assert ambiguous_verdict(store, "tmp/a", "out/a", size=facts["size"]) == "done"
    assert ambiguous_verdict(store, "tmp/a", "out/a", size=facts["size"] + 1) == "lost"


def test_ambiguous_not_done_is_retried(store):
    fault_layer(store).add_rule(_renames("ambiguous", "before"))
    stats = IOStatistics()
    outcome = move(store, "tmp/a", "out/a", stats=stats, **_facts(store))
    assert outcome.how == "renamed"
    assert store.read_bytes("out/a") == DATA and not store.exists("tmp/a")
    assert stats.counter("commit_file_rename_ambiguous") == 1
    assert _rename_count(store) == 2


def test_ambiguous_with_a_foreign_file_arriving_fails_naming_both(store):
    rule = _renames("ambiguous", "before")
    rule.callback = lambda i, op, path: fault_layer(store).inner.write_bytes("out/a", b"x" * 15)
    fault_layer(store).add_rule(rule)
    with pytest.raises(JobCommitError, match="unknown outcome") as err:
        move(store, "tmp/a", "out/a", **_facts(store))
    assert "tmp/a" in str(err.value) and "out/a" in str(err.value)
    assert store.read_bytes("tmp/a") == DATA  # ours kept


def test_throttled_then_succeeds_through_the_pacer(store):
    fault_layer(store).add_rule(_renames("throttle", times=2))
    stats = IOStatistics()
    outcome = move(store, "tmp/a", "out/a", stats=stats, pacer=Pacer(1000.0), **_facts(store))
    assert outcome.how == "renamed" and store.read_bytes("out/a") == DATA
    assert stats.counter("commit_file_rename_throttled") == 2
    assert _rename_count(store) == 3


def test_throttled_past_the_attempts_fails_naming_both(store):
    fault_layer(store).add_rule(_renames("throttle", times=-1))
    with pytest.raises(JobCommitError, match="failed 2 times") as err:
        move(store, "tmp/a", "out/a", attempts=2, **_facts(store))
    assert "tmp/a" in str(err.value) and "out/a" in str(err.value)
    assert store.read_bytes("tmp/a") == DATA and not store.exists("out/a")


def test_copy_done_but_source_left_is_finished(store):
    """A copy-then-delete rename that died after its copy: the destination holds the source's
    bytes (under an etag of its own), the source is still there."""
    facts = _facts(store)
    store.write_bytes("out/a", DATA)
    outcome = move(store, "tmp/a", "out/a", **facts)
    assert outcome.how == "finished" and outcome.moved and outcome.recovered
    assert store.read_bytes("out/a") == DATA and not store.exists("tmp/a")


def test_directory_rename_cut_short_is_merged(store):
    store.write_bytes("tmp/d/x", b"x")
    store.write_bytes("tmp/d/y", b"y")
    store.write_bytes("out/d/x", b"x")  # copied before the crash
    outcome = move(store, "tmp/d", "out/d", merge_dirs=True)
    assert outcome.how == "finished" and not store.exists("tmp/d")
    assert store.read_bytes("out/d/x") == b"x" and store.read_bytes("out/d/y") == b"y"


def test_a_source_replaced_while_it_moved_fails_and_is_never_merged(store):
    """A directory rename that is a copy per file, cut off when a zombie attempt replaced the
    source mid-copy (its file vanished): merging the zombie's files beside the ones already
    copied would mix two attempts' output."""
    store.write_bytes("tmp/d/x", b"x1")
    store.write_bytes("tmp/d/y", b"y1")
    inner = fault_layer(store).inner

    def zombie_replaces_the_source(i, op, path):
        inner.write_bytes("out/d/x", b"x1")  # copied before the zombie came
        inner.delete("tmp/d", recursive=True)
        inner.write_bytes("tmp/d/x", b"x0")
        inner.write_bytes("tmp/d/y", b"y0")
        raise NotFound("tmp/d/y vanished mid-copy")

    rule = FaultRule(
        action="callback",
        kinds=frozenset({Op.RENAME}),
        times=1,
        callback=zombie_replaces_the_source,
    )
    fault_layer(store).add_rule(rule)
    with pytest.raises(JobCommitError, match="changed while it moved"):
        move(store, "tmp/d", "out/d", merge_dirs=True)
    assert [f.path for f in store.walk("out/d")] == ["out/d/x"]  # nothing of the zombie's


def test_moved_before_is_found_done(store):
    facts = _facts(store)
    store.rename("tmp/a", "out/a")
    outcome = move(store, "tmp/a", "out/a", **facts)
    assert outcome.how == "found" and not outcome.moved and outcome.recovered
    store.mkdirs("tmp/d")
    store.rename("tmp/d", "out/d")
    assert move(store, "tmp/d", "out/d").how == "found"  # a directory: being there is enough


def test_vanished_source_raises_naming_both(store):
    store.delete("tmp/a")
    with pytest.raises(JobCommitError, match="has vanished") as err:
        move(store, "tmp/a", "out/a", size=len(DATA))
    assert "tmp/a" in str(err.value) and "out/a" in str(err.value)


def test_vanished_source_with_another_file_there_raises(store):
    facts = _facts(store)
    store.delete("tmp/a")
    store.write_bytes("out/a", b"someone else's, longer")
    with pytest.raises(JobCommitError, match="has vanished"):
        move(store, "tmp/a", "out/a", **facts)


def test_a_foreign_file_in_the_way_raises_and_keeps_both(store):
    store.write_bytes("out/a", b"x" * len(DATA))  # the same size, other bytes
    with pytest.raises(DestinationTaken, match="already there") as err:
        move(store, "tmp/a", "out/a", **_facts(store))
    assert "tmp/a" in str(err.value) and "out/a" in str(err.value)
    assert isinstance(err.value, JobCommitError)
    assert store.read_bytes("tmp/a") == DATA and store.read_bytes("out/a") == b"x" * len(DATA)


def test_missing_parent_is_made(store):
    assert move(store, "tmp/a", "out/new/deep/a").how == "renamed"
    assert store.read_bytes("out/new/deep/a") == DATA


def test_replace_deletes_what_is_in_the_way_only_while_the_source_exists(store):
    store.write_bytes("out/a", b"old")
    assert move(store, "tmp/a", "out/a", replace=True).how == "renamed"
    assert store.read_bytes("out/a") == DATA
    assert move(store, "tmp/a", "out/a", replace=True).how == "found"  # resumed: kept
    assert store.read_bytes("out/a") == DATA


@pytest.mark.parametrize(
    ("action", "when", "how", "renames"),
    [("ambiguous", "after", "recovered", 1), ("ambiguous", "before", "renamed", 2)],
)
def test_an_answer_the_caller_got_is_judged_as_the_first_try(store, action, when, how, renames):
    """A batch renames plainly and hands a failure's answer over: the move judges it without
    sending that rename again, as it judges its own first try."""
    facts = _facts(store)
    fault_layer(store).add_rule(_renames(action, when))
    with pytest.raises(Exception) as answer:
        store.rename("tmp/a", "out/a")
    stats = IOStatistics()
    outcome = move(store, "tmp/a", "out/a", stats=stats, answered=answer.value, **facts)
    assert outcome.how == how
    assert store.read_bytes("out/a") == DATA and not store.exists("tmp/a")
    assert stats.counter("commit_file_rename_ambiguous") == 1
    assert _rename_count(store) == renames


def test_an_answer_is_not_judged_with_replace_or_pacing(store):
    with pytest.raises(ValueError, match="without replace or pacing"):
        move(store, "tmp/a", "out/a", replace=True, answered=NotFound("x", "tmp/a"))
    with pytest.raises(ValueError, match="without replace or pacing"):
        move(store, "tmp/a", "out/a", pacer=Pacer(10), answered=NotFound("x", "tmp/a"))
