"""Magic: aborting an attempt that died mid-upload must spare a retry's upload of the same key.

An attempt that dies after sending a part has no `.pending` yet, only its marker (the key), so
its abort can only go by key; while the job runs, another attempt of the same task may have an
upload pending at that key. The staging committers wait for the job's end to abort by key;
magic's abort_task does it at once, and so aborts the retry's committed upload too.
"""

from __future__ import annotations

import pytest

from dataferry import make_committer
from dataferry.errors import InjectedCrash, JobCommitError
from dataferry.store import FaultRule, Op, fault_layer, open_store


@pytest.mark.xfail(
    strict=True,
    raises=JobCommitError,
    reason="magic's abort_task aborts by key at once, taking a live retry's upload with it",
)
def test_aborting_a_dead_attempt_spares_the_retry_of_its_task(tmp_path):
    store = open_store(f"sim:s3:{tmp_path / 'dest'}", faults=[], latency_scale=0.0)
    c = make_committer("magic", store)
    job = c.new_job()
    c.setup_job(job)
    dead = job.task(0, 0)
    c.setup_task(dead)
    rule = FaultRule(action="crash", when="after", kinds=frozenset({Op.MULTIPART_PART}))
    fault_layer(store).add_rule(rule)
    with pytest.raises(InjectedCrash):
        c.write_file(dead, "p=1/a", b"dead")  # one part sent, no .pending
    fault_layer(store).armed = False
    retry = job.task(0, 1)
    c.setup_task(retry)
    c.write_file(retry, "p=1/a", b"retry")
    msg = c.commit_task(retry)
    c.abort_task(dead)  # the engine gives up on the dead attempt
    c.commit_job(job, [msg])
    assert store.read_bytes("p=1/a") == b"retry"
