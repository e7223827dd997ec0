"""The referee on fake-gcs-server: `magic-gcs` (what `auto` picks on GCS) through gcsfs, its
crash points and ambiguous answers sampled down to a few (a scenario costs seconds there); the
full counts are in docs/protocols.md's referee table."""

from __future__ import annotations

import pytest

from dataferry.verify import verify_crash

pytestmark = pytest.mark.xdist_group("fakegcs")


def test_magic_gcs_has_no_violations_on_fake_gcs_server(gcs_url):
    """A commit crashed at a sample of its store operations, or answered ambiguously, then
    recovered: were a session finalized before the job decided, or one lost on recovery, the
    referee would see a file before commit or a committed job missing one."""
    report = verify_crash("magic-gcs", gcs_url, every=9, limit=3)
    assert report.crash_points > 20
    assert len(report.scenarios) >= 3
    assert report.total_violations == 0, report.to_json(3)["examples"]
    assert report.outcomes["driver_crashed"] > 0
