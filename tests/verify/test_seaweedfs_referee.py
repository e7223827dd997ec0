"""The referee on a real S3 server (SeaweedFS): each committer that is safe on S3, in the
smallest shape that still catches a broken guarantee there: the crash-free run (which found
the directories SeaweedFS keeps, and a marker at the destination's key, left behind) and
crashes and ambiguous answers at the operations that change what readers see (uploads
completed, objects put, deleted, copied, the table's log entry)."""

from __future__ import annotations

import pytest

from dataferry.store import Op
from dataferry.verify import verify_crash

pytestmark = pytest.mark.xdist_group("seaweedfs")

VISIBLE = frozenset({Op.MULTIPART_COMPLETE, Op.DELETE, Op.COPY, Op.RENAME, Op.TABLE_COMMIT})


def _visible(t) -> bool:
    return t.op in VISIBLE


@pytest.fixture
def on_seaweed(seaweed, monkeypatch):
    """The referee opens its store by URL (here and in the child drivers it starts): the AWS
    variables point it at SeaweedFS for this test."""
    for name, value in seaweed.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)


@pytest.mark.parametrize("committer", ["magic", "directory", "partitioned", "direct", "delta"])
def test_the_referee_finds_nothing_on_seaweedfs(committer, seaweed_url, on_seaweed):
    """0 violations on a real S3 server: a committer leaving its directories, a marker, an
    upload or a half-visible output there (where moto's answers hide it) fails here."""
    report = verify_crash(committer, seaweed_url, select=_visible, limit=1)
    assert len(report.scenarios) == 2 and report.ambiguous_points == 1
    assert report.total_violations == 0, report.to_json(3)["examples"]
