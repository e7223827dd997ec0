"""An Iceberg file whose rows lie in several buckets is refused (`table/iceberg_files.py`), even
when its smallest and largest values fall in the same bucket: a bucket is not ordered, so its
bounds say nothing of the values between them."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataferry import make_committer
from dataferry.errors import ConfigError, JobCommitError

from .test_iceberg import transformed_table

pytest.importorskip("pyiceberg")
pytestmark = pytest.mark.filterwarnings("ignore::Warning")


def parquet_of(ids: list[int]) -> bytes:
    table = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "ts": pa.array([None] * len(ids), pa.timestamp("us")),
            "value": pa.array([float(i) for i in ids]),
        }
    )
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def test_a_file_whose_ends_share_a_bucket_but_whose_middle_does_not_is_refused(tmp_path):
    """Ids 0 and 10 are in bucket 0 of bucket[4], id 4 in bucket 2. Were a file's bucket taken
    from its bounds (as for an ordered transform), the file would be filed under bucket 0 and
    a scan for id 4 would prune it away: the user's rows are in the table, and a query for
    them returns none."""
    from pyiceberg.expressions import EqualTo
    from pyiceberg.transforms import BucketTransform
    from pyiceberg.types import LongType

    bucket = BucketTransform(4).transform(LongType())
    assert bucket(0) == bucket(10) != bucket(4)  # the premise
    dest = tmp_path / "t"
    options, catalog = transformed_table(tmp_path, dest, BucketTransform(4))
    c = make_committer("iceberg", str(dest), **options)
    job = c.new_job()
    c.setup_job(job)
    task = job.task(0)
    c.setup_task(task)
    c.write_file(task, "part-0.parquet", parquet_of([0, 4, 10]))
    msg = c.commit_task(task)
    with pytest.raises((ConfigError, JobCommitError), match=r"more than one value.*bucket\[4\]"):
        c.commit_job(job, [msg])
    tbl = catalog.load_table("db.tx")
    assert tbl.current_snapshot() is None
    assert tbl.scan(row_filter=EqualTo("id", 4)).to_arrow().num_rows == 0  # nothing, not lost
