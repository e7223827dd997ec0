"""An Iceberg commit into a SQL catalog on SQLite that another process is reading (Spark's
JDBC catalog shares the file: tests/interop/test_spark_tables.py): SQLite refuses the COMMIT
("database is locked"), and the connection that failed still holds its uncommitted update.
The job must not take that for its commit having landed."""

from __future__ import annotations

import sqlite3

import pytest

import dataferry
from dataferry.commit.lookup import committer_by_name
from dataferry.errors import JobCommitError
from dataferry.store import open_store
from dataferry.verify.type_zoo import type_zoo

pytestmark = pytest.mark.filterwarnings("ignore::Warning")


def test_a_commit_refused_by_a_locked_catalog_is_not_taken_for_landed(tmp_path):
    """Broken (the landed check reading through the failed connection), the job reports
    success while the table never got its rows: data lost without an error."""
    catalog = {
        "name": "dataferry",
        "type": "sql",
        "uri": f"sqlite:///{tmp_path}/catalog.db",
        "warehouse": tmp_path.as_uri(),
    }
    options = {"catalog": catalog, "identifier": "default.t", "commit_retries": 0}
    dest = str(tmp_path / "t")

    def write(start: int, mode: str):
        return dataferry.write_dataset(
            type_zoo(4, start=start), dest, committer="iceberg", mode=mode,
            partition_by=["part"], committer_options=options, progress=False,
        )  # fmt: skip

    write(0, "error")
    reader = sqlite3.connect(tmp_path / "catalog.db", isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM iceberg_tables").fetchall()  # a reader's lock
    try:
        with pytest.raises(JobCommitError, match="locked"):
            write(4, "append")
    finally:
        reader.execute("COMMIT")
        reader.close()
    rows = committer_by_name("iceberg", open_store(dest)).read_rows()
    assert sorted(rows.column("id").to_pylist()) == [0, 1, 2, 3]
