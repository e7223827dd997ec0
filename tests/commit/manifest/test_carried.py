"""The copy of a task's manifest that its commit message carries (commit/manifest/carried.py):
deflated, capped both ways, and refused, naming the manifest, when damaged."""

from __future__ import annotations

import base64
import os
import zlib

import pytest

from dataferry.commit.manifest.carried import CARRIED, CARRIED_MAX_CHARS, carried_by, carry, inflate
from dataferry.commit.manifest.files import MANIFEST_MAX_BYTES
from dataferry.commit.protocol import TaskCommitMessage
from dataferry.errors import ValidationError


def _message(attempt: str, copy: object) -> TaskCommitMessage:
    return TaskCommitMessage("job", f"task-{attempt}", attempt, "manifest", extra={CARRIED: copy})


def test_a_copy_inflates_to_the_manifest_saved():
    saved = b'{"files": [' + b'{"s": "hdfs://nn/out/_temporary/x/part-1"},' * 50 + b"{}]}"
    copy = carry(saved)
    assert copy is not None and len(copy) < len(saved) / 5  # deflated: URIs repeat
    assert inflate(copy, "m.json") == saved


def test_a_manifest_too_large_to_carry_is_not_carried():
    assert carry(os.urandom(CARRIED_MAX_CHARS)) is None  # does not deflate: over the cap


def test_only_copies_within_the_cap_are_taken_from_messages():
    small, large = carry(b"{}"), "A" * (CARRIED_MAX_CHARS + 4)
    found = carried_by([_message("a1", small), _message("a2", large), _message("a3", 7)])
    assert found == {"a1": small}


@pytest.mark.parametrize(
    ("copy", "says"),
    [
        ("not base64 at all!", "damaged"),
        (base64.b64encode(b"not deflated").decode(), "damaged"),
        (base64.b64encode(zlib.compress(b"{}" * 100)[:-6]).decode(), "cut short"),
        (base64.b64encode(zlib.compress(b" " * (MANIFEST_MAX_BYTES + 10))).decode(), "over"),
    ],
    ids=["base64", "deflate", "cut-short", "bomb"],
)
def test_a_damaged_copy_is_refused_naming_the_manifest(copy, says):
    with pytest.raises(ValidationError, match=says) as e:
        inflate(copy, "out/_temporary/j/00/manifests/task_1-manifest.json")
    assert "task_1-manifest.json" in str(e.value)
