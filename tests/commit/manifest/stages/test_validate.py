"""Validating the output alone: every committed file is there with its size, or the stage
fails naming it."""

from __future__ import annotations

import pytest

from dataferry.commit.manifest.stages.load import load_manifests
from dataferry.commit.manifest.stages.validate import validate_output
from dataferry.errors import JobCommitError

from .helpers import assert_failed, assert_timed, committed, write_attempt


@pytest.fixture
def loaded(store, scratch, make_ctx):
    """Two tasks' files loaded, then put at their destinations as the rename stage would."""
    manifests = [
        write_attempt(store, 1, {"p=1/a": b"aa", "p=2/b": b"b"}),
        write_attempt(store, 2, {"top": b"ttt"}),
    ]
    result = load_manifests(make_ctx(), committed(*manifests), scratch)
    for m in manifests:
        for f in m.files:
            if "/" in f.dest:
                store.mkdirs(f.dest.rsplit("/", 1)[0])
            store.rename(f.source, f.dest)
    return result


def test_committed_files_in_place_pass(store, loaded, ctx):
    assert validate_output(ctx, loaded) == 3
    assert_timed(ctx, "job_stage_optional_validate_output", "validate_output")


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda s: s.delete("p=2/b"), "expected a file at .*p=2/b, found nothing"),
        (lambda s: s.write_bytes("top", b"longer now"), "top has 10 bytes, expected 3"),
        (
            lambda s: (s.delete("p=1/a"), s.mkdirs("p=1/a/x")),
            "expected a file at .*p=1/a, found a directory",
        ),
    ],
)
def test_a_missing_or_changed_file_fails_the_stage(store, loaded, ctx, damage, words):
    damage(store)
    with pytest.raises(JobCommitError, match=words):
        validate_output(ctx, loaded)
    assert_failed(ctx, "job_stage_optional_validate_output", "validate_output")
