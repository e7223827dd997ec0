"""The referee's conflict answer (`verify/landed.py`, `conflict_error`) is the error the
committer's own table format takes for a conflict (`TableFormat.is_conflict`), the same
question the format's commit asks before it tries an append again."""

from __future__ import annotations

import pytest

from dataferry.commit.lookup import committer_by_name
from dataferry.store import open_store
from dataferry.verify.landed import conflict_error

pytestmark = pytest.mark.filterwarnings("ignore::Warning")

CONFLICTS = {
    "delta": "VersionTaken",
    "iceberg": "CommitFailedException",
    "hudi": None,  # its commit is a create-if-absent: no conflict error
}


@pytest.mark.parametrize("name", list(CONFLICTS))
def test_the_conflict_answer_is_the_one_the_format_takes(tmp_path, name):
    """Broken (the format not asked, or asked somewhere it is not), the landed schedules
    answer every table commit with a plain error instead of a conflict, and a committer that
    retries a landed append after a conflict, committing it twice, passes unseen."""
    url = str(tmp_path / "t")
    error = conflict_error(name, url, {})
    expected = CONFLICTS[name]
    assert (type(error).__name__ if error is not None else None) == expected
    if error is not None:
        assert committer_by_name(name, open_store(url)).format.is_conflict(error)


def test_a_committer_without_a_table_format_has_no_conflict_answer(tmp_path):
    """A file committer (no table format) answers the schedules with the plain error."""
    assert conflict_error("direct", str(tmp_path / "d"), {}) is None
