"""Multipart upload in the `sim:s3` store model: S3's limits and answers, invisible pending
uploads, S3's multipart etag, state shared between processes, faults, and the magic committer
on top of it."""

from __future__ import annotations

import hashlib
import multiprocessing
import pickle
import time
from dataclasses import replace
from pathlib import Path

import pytest

from dataferry import make_committer
from dataferry.errors import (
    AmbiguousOutcome,
    ConfigError,
    InjectedCrash,
    NotFound,
    StoreError,
)
from dataferry.store import PROFILES, FaultRule, FaultStore, LocalStore, Op, SimStore, open_store
from dataferry.store.etags import multipart_etag
from dataferry.store.sim.uploads import RESERVED, MultipartLimits

MiB = 1024 * 1024
MIN = 5 * MiB


@pytest.fixture
def s3(tmp_path) -> SimStore:
    store = open_store(f"sim:s3:{tmp_path / 's3'}", latency_scale=0)
    assert isinstance(store, SimStore)
    return store


def small_limits_store(tmp_path: Path, **limits: int) -> SimStore:
    """The s3 model with tiny limits, to test the rules without gigabytes."""
    chosen = {"min_part_size": 10, "max_part_size": 100, "max_parts": 5, **limits}
    profile = replace(PROFILES["s3"], multipart=MultipartLimits(**chosen))
    return SimStore(profile, LocalStore(str(tmp_path / "small")), latency_scale=0)


def upload(store, path: str, parts: list[bytes]) -> tuple[str, list[str]]:
    """Start an upload and send its parts; returns (upload id, part etags)."""
    upload_id = store.initiate_upload(path)
    etags = [store.upload_part(path, upload_id, i, p) for i, p in enumerate(parts, start=1)]
    return upload_id, etags


# --- which models have it ---------------------------------------------------------------------


def test_only_the_s3_model_has_multipart(tmp_path):
    for name, profile in PROFILES.items():
        store = open_store(f"sim:{name}:{tmp_path / name}", latency_scale=0)
        has = name == "s3"
        assert (profile.multipart is not None) is has
        assert store.capabilities.multipart_upload is has
        assert store.min_part_size == (MIN if has else 0)
        if not has:
            with pytest.raises(ConfigError, match="no multipart"):
                store.initiate_upload("k")
            assert store.list_uploads("") == []


def test_s3_limits_are_s3s():
    limits = PROFILES["s3"].multipart
    assert limits == MultipartLimits(
        min_part_size=5 * 1024 * 1024, max_part_size=5 * 1024**3, max_parts=10_000
    )


def test_min_part_size_is_public_on_every_store(tmp_path, s3):
    from dataferry.store.s3.store import S3Store

    assert LocalStore(str(tmp_path)).min_part_size == 0
    assert S3Store("s3://bucket/prefix").min_part_size == MIN
    assert FaultStore(s3).min_part_size == MIN  # a wrapper forwards its inner store's
    assert FaultStore(LocalStore(str(tmp_path))).min_part_size == 0


# --- S3's limits and answers -----------------------------------------------------------------


def test_part_numbers_run_from_1_to_10000(s3):
    upload_id = s3.initiate_upload("k")
    for bad in (0, -1, 10_001):
        with pytest.raises(StoreError, match="InvalidArgument"):
            s3.upload_part("k", upload_id, bad, b"x")
    assert s3.upload_part("k", upload_id, 10_000, b"x") == hashlib.md5(b"x").hexdigest()


def test_a_part_over_the_maximum_is_refused_at_upload(tmp_path):
    store = small_limits_store(tmp_path)
    upload_id = store.initiate_upload("k")
    with pytest.raises(StoreError, match="EntityTooLarge"):
        store.upload_part("k", upload_id, 1, b"x" * 101)
    store.upload_part("k", upload_id, 1, b"x" * 100)  # at the limit is fine


def test_every_part_but_the_last_needs_5_mib_checked_at_complete(s3):
    short = b"a" * (MIN - 1)
    upload_id, etags = upload(s3, "k", [short, b"tail"])  # S3 takes a short part at upload
    with pytest.raises(StoreError, match="EntityTooSmall"):
        s3.complete_upload("k", upload_id, etags)
    assert not s3.exists("k") and [u.upload_id for u in s3.list_uploads("")] == [upload_id]
    etags[0] = s3.upload_part("k", upload_id, 1, b"a" * MIN)  # the same number replaces it
    assert s3.complete_upload("k", upload_id, etags) == multipart_etag(etags)
    assert s3.read_bytes("k") == b"a" * MIN + b"tail"


def test_a_single_short_part_is_fine(s3):
    upload_id, etags = upload(s3, "k", [b"small"])
    s3.complete_upload("k", upload_id, etags)
    assert s3.read_bytes("k") == b"small"


def test_complete_with_etags_other_than_the_parts_is_invalid_part(s3):
    upload_id, etags = upload(s3, "k", [b"one"])
    with pytest.raises(StoreError, match="InvalidPart"):
        s3.complete_upload("k", upload_id, [hashlib.md5(b"other").hexdigest()])
    with pytest.raises(StoreError, match="InvalidPart"):  # part 2 was never uploaded
        s3.complete_upload("k", upload_id, [*etags, etags[0]])
    with pytest.raises(StoreError, match="MalformedXML"):
        s3.complete_upload("k", upload_id, [])
    assert not s3.exists("k") and len(s3.list_uploads("k")) == 1
    assert s3.complete_upload("k", upload_id, [f'"{etags[0]}"'])  # S3's quotes are fine


def test_unknown_aborted_or_completed_uploads_are_not_found(s3):
    for bogus in ("0" * 32, "../../etc", "not-an-id"):
        with pytest.raises(NotFound):
            s3.upload_part("k", bogus, 1, b"x")
        with pytest.raises(NotFound):
            s3.complete_upload("k", bogus, [hashlib.md5(b"x").hexdigest()])
        assert s3.abort_upload("k", bogus) is False
    aborted, etags = upload(s3, "k", [b"x"])
    with pytest.raises(NotFound):  # an upload id belongs to its key
        s3.complete_upload("other", aborted, etags)
    assert s3.abort_upload("other", aborted) is False
    assert s3.abort_upload("k", aborted) is True
    assert s3.abort_upload("k", aborted) is False
    with pytest.raises(NotFound):
        s3.upload_part("k", aborted, 2, b"y")
    with pytest.raises(NotFound):
        s3.complete_upload("k", aborted, etags)
    done, etags = upload(s3, "k", [b"x"])
    s3.complete_upload("k", done, etags)
    assert s3.abort_upload("k", done) is False  # as S3Store answers NoSuchUpload
    with pytest.raises(NotFound):
        s3.complete_upload("k", done, etags)
    assert s3.read_bytes("k") == b"x" and s3.list_uploads("") == []


# --- invisible until completed, whole at once --------------------------------------------------


def test_pending_uploads_are_invisible(s3):
    s3.write_bytes("d/other", b"o")
    upload_id, etags = upload(s3, "d/k", [b"pending"])
    assert [s.path for s in s3.walk("")] == ["d/other"]
    assert [s.path for s in s3.list("")] == ["d"]
    assert [s.path for s in s3.list("d")] == ["d/other"]
    assert not s3.exists("d/k")
    with pytest.raises(NotFound):
        s3.stat("d/k")
    with pytest.raises(NotFound):
        s3.read_bytes("d/k")
    # a recursive delete of its directory, even of the root, leaves the upload pending (S3)
    assert s3.delete("d", recursive=True)
    assert s3.delete("", recursive=True) is False  # nothing visible was left to delete
    assert s3.walk("") == [] and [u.upload_id for u in s3.list_uploads("")] == [upload_id]
    s3.complete_upload("d/k", upload_id, etags)
    assert [s.path for s in s3.walk("")] == ["d/k"] and s3.read_bytes("d/k") == b"pending"


def test_the_models_state_is_no_users_path(s3):
    upload(s3, "k", [b"x"])
    for call in (
        lambda: s3.stat(RESERVED),
        lambda: s3.list(RESERVED),
        lambda: s3.read_bytes(f"{RESERVED}/uploads"),
        lambda: s3.write_bytes(f"{RESERVED}/x", b"1"),
        lambda: s3.delete(RESERVED, recursive=True),
        lambda: s3.initiate_upload(f"{RESERVED}/k"),
    ):
        with pytest.raises(ConfigError, match="reserved"):
            call()
    assert len(s3.list_uploads("")) == 1


def test_a_root_delete_with_nothing_pending_leaves_no_trace(s3, tmp_path):
    upload_id, etags = upload(s3, "k", [b"x"])
    s3.complete_upload("k", upload_id, etags)
    assert s3.delete("", recursive=True)
    assert not (tmp_path / "s3").exists() or list((tmp_path / "s3").iterdir()) == []


def test_completing_replaces_the_object_whole(s3):
    s3.write_bytes("k", b"old object")
    upload_id, etags = upload(s3, "k", [b"n" * MIN, b"ew"])
    assert s3.read_bytes("k") == b"old object"  # untouched while the upload is pending
    s3.complete_upload("k", upload_id, etags)
    assert s3.read_bytes("k") == b"n" * MIN + b"ew"
    assert s3.stat("k").size == MIN + 2


# --- etags --------------------------------------------------------------------------------


def test_part_and_object_etags_are_s3s(s3):
    parts = [b"p" * MIN, b"q" * MIN, b"r"]
    upload_id, etags = upload(s3, "d/k", parts)
    assert etags == [hashlib.md5(p).hexdigest() for p in parts]  # unquoted, as S3Store gives
    returned = s3.complete_upload("d/k", upload_id, etags)
    expected = multipart_etag(etags)
    assert returned == expected and expected.endswith("-3")
    assert s3.stat("d/k").etag == expected
    assert [s.etag for s in s3.list("d")] == [expected]
    assert [s.etag for s in s3.walk("")] == [expected]


def test_the_committers_etag_function_is_the_store_layers():
    from dataferry.commit.s3a.magic import files

    assert files.multipart_etag is multipart_etag


@pytest.mark.parametrize("change", ["write", "same_size_write", "append", "copy_onto", "rename"])
def test_an_ordinary_change_gives_the_plain_etag_again(s3, change):
    upload_id, etags = upload(s3, "k", [b"abc"])
    s3.complete_upload("k", upload_id, etags)
    assert s3.stat("k").etag == multipart_etag(etags)
    where = "k"
    if change == "write":
        s3.write_bytes("k", b"a plain PUT")
    elif change == "same_size_write":  # at once, same size: the file's mtime may not move
        s3.write_bytes("k", b"xyz")
    elif change == "append":
        s3.append_bytes("k", b"more")
    elif change == "copy_onto":
        s3.write_bytes("src", b"src")
        s3.copy("src", "k")
    else:
        s3.rename("k", "moved")  # S3: a copy, which is an object of its own
        where = "moved"
    st = s3.stat(where)
    assert st.etag and st.etag != multipart_etag(etags)
    assert {s.path: s.etag for s in s3.walk("")}[where] == st.etag


def test_an_overwrite_within_one_timestamp_tick_gives_the_plain_etag(s3, tmp_path):
    """A same-size overwrite in the same file-system tick leaves size and mtime as they were
    (and, on a store that rewrites in place, the inode: the local file's own etag): the model
    must know from the write itself. (The local store's whole-file writes are renamed into
    place, so there the inode changes too.)"""
    import os

    upload_id, etags = upload(s3, "k", [b"abc"])
    s3.complete_upload("k", upload_id, etags)
    local = tmp_path / "s3" / "k"
    before = os.stat(local)
    s3.write_bytes("k", b"xyz")
    os.utime(local, ns=(before.st_atime_ns, before.st_mtime_ns))  # the same tick
    assert os.stat(local).st_size == before.st_size
    assert s3.stat("k").etag != multipart_etag(etags)


def test_a_second_completed_upload_at_the_key_gives_its_own_etag(s3):
    first, etags1 = upload(s3, "k", [b"first"])
    s3.complete_upload("k", first, etags1)
    second, etags2 = upload(s3, "k", [b"second"])
    s3.complete_upload("k", second, etags2)
    assert s3.stat("k").etag == multipart_etag(etags2) != multipart_etag(etags1)


# --- listing --------------------------------------------------------------------------------


def test_list_uploads_by_key_prefix_oldest_first(s3):
    before = time.time()
    ids = {}
    for key in ("a/x", "a/y", "ab/z", "b/w"):
        ids[key] = s3.initiate_upload(key)
    after = time.time()
    listed = s3.list_uploads("")
    assert [u.path for u in listed] == ["a/x", "a/y", "ab/z", "b/w"]
    assert all(before <= u.initiated <= after for u in listed)
    assert [u.upload_id for u in listed] == [ids[u.path] for u in listed]
    # a plain string prefix, as S3's ListMultipartUploads (and S3Store) filters
    assert [u.path for u in s3.list_uploads("a")] == ["a/x", "a/y", "ab/z"]
    assert [u.path for u in s3.list_uploads("a/x")] == ["a/x"]
    assert s3.list_uploads("c") == []
    s3.abort_upload("a/y", ids["a/y"])
    assert [u.path for u in s3.list_uploads("a")] == ["a/x", "ab/z"]


# --- shared between processes -------------------------------------------------------------------


def test_a_pickled_store_sees_the_same_uploads(s3):
    upload_id, etags = upload(s3, "k", [b"shared"])
    copy = pickle.loads(pickle.dumps(s3))
    assert isinstance(copy, SimStore) and copy.profile == s3.profile
    assert [u.upload_id for u in copy.list_uploads("")] == [upload_id]
    copy.complete_upload("k", upload_id, etags)
    assert s3.list_uploads("") == [] and s3.stat("k").etag == multipart_etag(etags)


ROUNDS = 24
RACERS = 3


def _race(store, jobs, barrier, results) -> None:
    """One racer process: in round i, wait for the others, then complete the upload to k<i>.
    A loser does what the committers do after NotFound: checks the object's etag."""
    for i, (upload_id, etags) in enumerate(jobs):
        barrier.wait(timeout=60)
        try:
            store.complete_upload(f"k{i}", upload_id, etags)
            results.put((i, "won", ""))
        except NotFound:
            ok = store.stat(f"k{i}").etag == multipart_etag(etags)
            results.put((i, "lost", "etag ok" if ok else "etag wrong"))
        except Exception as e:
            results.put((i, "error", repr(e)))


def test_concurrent_completions_in_processes_exactly_one_wins(s3):
    jobs = [upload(s3, f"k{i}", [bytes([i]) * MiB]) for i in range(ROUNDS)]
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(RACERS), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(s3, jobs, barrier, results)) for _ in range(RACERS)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=120) for _ in range(ROUNDS * RACERS)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    for i, (_upload_id, etags) in enumerate(jobs):
        mine = [o[1:] for o in outcomes if o[0] == i]
        assert sorted(mine) == [("lost", "etag ok")] * (RACERS - 1) + [("won", "")], mine
        assert s3.read_bytes(f"k{i}") == bytes([i]) * MiB
        assert s3.stat(f"k{i}").etag == multipart_etag(etags)
    assert s3.list_uploads("") == []


def test_a_second_completer_waits_and_never_touches_the_first_ones_object(s3, monkeypatch):
    """While one caller completes an upload (paused after publishing, before deregistering),
    a second completer of the same upload and an aborter wait; then the first wins, the others
    answer NotFound and False, and the object was never rewritten or its etag lost."""
    import threading

    from dataferry.store.sim import uploads as sim_uploads

    upload_id, etags = upload(s3, "k", [b"w" * 1000])
    published, go_on = threading.Event(), threading.Event()
    deregister = sim_uploads.UploadModel._deregister

    def paused(self, uid):
        if threading.current_thread().name == "first":
            published.set()
            assert go_on.wait(30)
        return deregister(self, uid)

    monkeypatch.setattr(sim_uploads.UploadModel, "_deregister", paused)
    answers: dict[str, object] = {}

    def run(name, call):
        try:
            answers[name] = call()
        except NotFound as e:
            answers[name] = e

    first = threading.Thread(
        name="first", target=run, args=("first", lambda: s3.complete_upload("k", upload_id, etags))
    )
    first.start()
    assert published.wait(30)
    local_etag = s3.inner._stat("k").etag  # the published file, as the local store sees it
    others = [
        threading.Thread(
            target=run, args=("second", lambda: s3.complete_upload("k", upload_id, etags))
        ),
        threading.Thread(target=run, args=("abort", lambda: s3.abort_upload("k", upload_id))),
    ]
    for t in others:
        t.start()
    time.sleep(0.3)
    assert answers == {}  # both wait for the first
    assert s3.stat("k").etag == multipart_etag(etags) and s3.inner._stat("k").etag == local_etag
    go_on.set()
    for t in (first, *others):
        t.join(30)
    assert answers["first"] == multipart_etag(etags)
    assert isinstance(answers["second"], NotFound) and answers["abort"] is False
    assert s3.inner._stat("k").etag == local_etag and s3.stat("k").etag == multipart_etag(etags)


def _die_at(store, step, path, upload_id, etags) -> None:
    """A completer process SIGKILLed at `step` of its completion (no finally runs)."""
    import os
    import signal

    from dataferry.store.sim import uploads as sim_uploads

    def die(*_args):
        os.kill(os.getpid(), signal.SIGKILL)

    setattr(sim_uploads.UploadModel, step, die)
    store.complete_upload(path, upload_id, etags)


@pytest.mark.parametrize("step", ["_publish", "_deregister"])
@pytest.mark.parametrize("then", ["complete", "abort"])
def test_a_completer_killed_half_way_never_wedges_or_loses_its_upload(s3, step, then):
    """Killed before publishing: still pending, nothing visible. Killed after publishing and
    before deregistering: the object is there with the upload's etag, the upload still
    listed; its dead holder's claim is taken over, so completing it succeeds and aborting it
    answers False (it was completed)."""
    upload_id, etags = upload(s3, "k", [b"x" * MIN, b"y"])
    child = multiprocessing.get_context("spawn").Process(
        target=_die_at, args=(s3, step, "k", upload_id, etags)
    )
    child.start()
    child.join(timeout=60)
    assert child.exitcode == -9
    assert [u.upload_id for u in s3.list_uploads("")] == [upload_id]
    published = step == "_deregister"
    assert s3.exists("k") is published
    if published:
        assert s3.stat("k").etag == multipart_etag(etags)
    if then == "complete":
        assert s3.complete_upload("k", upload_id, etags) == multipart_etag(etags)
        assert s3.read_bytes("k") == b"x" * MIN + b"y"
    else:
        assert s3.abort_upload("k", upload_id) is (not published)
        assert s3.exists("k") is published
    assert s3.list_uploads("") == []


# --- the cost model --------------------------------------------------------------------------


def test_each_call_is_a_modelled_request(s3):
    before = dict(s3.stats.counters)
    upload_id, etags = upload(s3, "p/k", [b"x" * MIN, b"y" * 10])
    s3.list_uploads("p")
    s3.complete_upload("p/k", upload_id, etags)
    c = s3.stats.counters

    def grew(name: str) -> int:
        return c.get(name, 0) - before.get(name, 0)

    assert grew("store_requests_write") == 4  # initiate, two parts, complete
    assert grew("store_requests_read") == 1  # one page of pending uploads
    assert grew("store_bytes_write") == MIN + 10
    assert grew("store_requests_prefix.p") == 5
    for op in ("initiate", "upload_part", "complete", "list"):
        assert c[f"op_multipart_{op}"] >= 1


def test_parts_pay_for_their_bytes_at_the_bandwidth(tmp_path):
    slow = replace(PROFILES["s3"], latency_s=0.0, bandwidth_bytes_s=1_000_000)
    store = SimStore(slow, LocalStore(str(tmp_path)), latency_scale=1.0)
    upload_id = store.initiate_upload("k")
    started = time.monotonic()
    store.upload_part("k", upload_id, 1, b"x" * 200_000)  # 0.2 s at 1 MB/s
    assert time.monotonic() - started >= 0.18


# --- faults -----------------------------------------------------------------------------------


def test_a_fault_store_over_the_model_breaks_multipart_calls(s3):
    rules = [
        FaultRule(action="crash", kinds=frozenset({Op.MULTIPART_COMPLETE}), times=1),
        FaultRule(action="ambiguous", when="after", kinds=frozenset({Op.MULTIPART_COMPLETE})),
    ]
    store = FaultStore(s3, rules)
    upload_id, etags = upload(store, "k", [b"data"])
    with pytest.raises(InjectedCrash):  # before: it never happened
        store.complete_upload("k", upload_id, etags)
    assert not store.exists("k") and len(store.list_uploads("")) == 1
    with pytest.raises(AmbiguousOutcome):  # after: it happened, the answer was lost
        store.complete_upload("k", upload_id, etags)
    assert store.stat("k").etag == multipart_etag(etags) and store.list_uploads("") == []
    ops = [t.op for t in store.trace if t.op.value.startswith("multipart_")]
    assert ops == [
        Op.MULTIPART_INITIATE,
        Op.MULTIPART_PART,
        Op.MULTIPART_COMPLETE,
        Op.MULTIPART_LIST,
        Op.MULTIPART_COMPLETE,
        Op.MULTIPART_LIST,
    ]


def test_faults_below_the_model_see_one_operation_per_multipart_call(tmp_path):
    """As the crash harness stacks it (`open_store(..., faults=...)`: the fault layer under
    the model): each multipart call is one traced operation at its key, none of the model's
    own bookkeeping is, and an ambiguous answer after the completion leaves it done."""
    after = FaultRule(action="ambiguous", when="after", kinds=frozenset({Op.MULTIPART_COMPLETE}))
    store = open_store(f"sim:s3:{tmp_path / 'x'}", faults=[after], latency_scale=0)
    upload_id, etags = upload(store, "d/k", [b"a" * MIN, b"b"])
    store.list_uploads("d")
    with pytest.raises(AmbiguousOutcome):
        store.complete_upload("d/k", upload_id, etags)
    store.abort_upload("d/k", upload_id)
    trace = [(t.op, t.path) for t in store.inner.trace]
    assert trace == [
        (Op.MULTIPART_INITIATE, "d/k"),
        (Op.MULTIPART_PART, "d/k"),
        (Op.MULTIPART_PART, "d/k"),
        (Op.MULTIPART_LIST, "d"),
        (Op.MULTIPART_COMPLETE, "d/k"),
        (Op.MULTIPART_ABORT, "d/k"),
    ]
    assert store.stat("d/k").etag == multipart_etag(etags) and store.list_uploads("") == []


def test_a_crash_before_the_completion_below_the_model_leaves_it_pending(tmp_path):
    crash = FaultRule(action="crash", kinds=frozenset({Op.MULTIPART_COMPLETE}))
    store = open_store(f"sim:s3:{tmp_path / 'x'}", faults=[crash], latency_scale=0)
    upload_id, etags = upload(store, "k", [b"x"])
    with pytest.raises(InjectedCrash):
        store.complete_upload("k", upload_id, etags)
    assert not store.exists("k")
    assert store.complete_upload("k", upload_id, etags) == multipart_etag(etags)


# --- a real user: the magic committer ------------------------------------------------------------


def magic_job(store) -> None:
    """A small job through the magic committer: two tasks, one file big enough for two parts;
    nothing visible before the job commit, everything after it, copied nowhere."""
    c = make_committer("magic", store, part_size=store.min_part_size)
    job = c.new_job()
    c.setup_job(job)
    big = bytes(range(256)) * (48 * 1024)  # 12 MiB: parts of 5 + 7 MiB
    messages = []
    for i, names in enumerate([["p=1/a", "p=2/b"], ["p=1/c"]]):
        t = job.task(i)
        c.setup_task(t)
        for n in names:
            c.write_file(t, n, f"{i}:{n}".encode())
        if i == 0:
            with c.open_file(t, "p=3/big.bin") as f:
                for at in range(0, len(big), MiB):
                    f.write(big[at : at + MiB])
        messages.append(c.commit_task(t))
    visible = [s.path for s in store.walk("") if not s.path.startswith("_")]
    assert visible == [] and len(store.list_uploads("")) == 4
    c.commit_job(job, messages)
    files = sorted(s.path for s in store.walk("") if not s.path.startswith("_"))
    assert files == ["p=1/a", "p=1/c", "p=2/b", "p=3/big.bin"]
    assert store.read_bytes("p=1/c") == b"1:p=1/c" and store.read_bytes("p=3/big.bin") == big
    parts = [big[:MIN], big[MIN:]]
    assert store.stat("p=3/big.bin").etag == multipart_etag(
        [hashlib.md5(p).hexdigest() for p in parts]
    )
    assert store.list_uploads("") == [] and store.exists("_SUCCESS")
    counters = store.stats.counters
    assert counters["op_multipart_complete"] == 4 and counters["op_multipart_upload_part"] == 5
    assert "op_copy" not in counters and "op_rename" not in counters  # zero rename, zero copy


def test_the_magic_committer_commits_a_job_on_sim_s3(tmp_path):
    magic_job(open_store(f"sim:s3:{tmp_path / 'dest'}", latency_scale=0))


# --- the docs -------------------------------------------------------------------------------


def test_the_docs_table_states_each_models_multipart_facts():
    page = Path(__file__).resolve().parents[2] / "docs" / "store-models.md"
    rows = {
        line.split("`")[1]: [c.strip() for c in line.strip("|").split("|")]
        for line in page.read_text().splitlines()
        if line.startswith("| `")
    }
    assert set(rows) == set(PROFILES)
    for name, p in PROFILES.items():
        cell = rows[name][-1]
        if p.multipart is None:
            assert cell == "no"
        else:
            m = p.multipart
            assert cell == (
                f"yes: parts 1 to {m.max_parts:,}, each {m.min_part_size // MiB} MiB to "
                f"{m.max_part_size // 1024**3} GiB (the last may be smaller)"
            )
