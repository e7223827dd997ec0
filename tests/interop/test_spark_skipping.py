"""Spark's data skipping works from the statistics dataferry writes: Delta's `stats` in each add
action (min/max/null counts), Iceberg's lower/upper bounds in each manifest entry, Hudi's
`column_stats` records in its metadata table. A table of
three appends, one file each (ids 10-15, 20-25, 30-35, every zoo column rising or falling with
the id), and a filter that only the third file's values can match: Spark's scan must have read
that one file, counted by the scan node's own metrics after the query ran (Delta's `numFiles`,
files read after skipping; Iceberg's `resultDataFiles`, files planned after the manifests'
bounds pruned them; Hudi's file index, read with the metadata table and data skipping on,
gives the scan node only the files its column statistics keep: `numFiles` again), and
returned exactly the matching rows.
"""

from __future__ import annotations

import pytest

from dataferry.verify.type_zoo import type_zoo

from .test_spark_tables import SparkTable

pytestmark = [
    pytest.mark.xdist_group("spark"),
    pytest.mark.filterwarnings("ignore::Warning"),
]

STARTS = (10, 20, 30)  # one file each, six rows: ids 10-15, 20-25, 30-35
MATCHING = [31, 32, 33, 34, 35]
# (column, a filter only the last file's bounds can match: the rows of ids 31 to 35)
FILTERS = {
    "id": "id >= 31",
    "i32": "i32 <= -217",  # -7 * id: falling, so a min/max swapped skips the wrong file
    "ts_ns": "ts_ns > TIMESTAMP_NTZ'2024-04-01 06:00:00'",  # 23:15:07 the day before, + id h
    "ts_utc": "ts_utc > TIMESTAMP'2024-04-01 06:00:00'",
    "dec": "dec >= 31.31",
    "ls": "ls >= 'long-31'",
}
# the scan node's metric of the files it read after skipping
FILES_READ = {"delta": "numFiles", "iceberg": "resultDataFiles", "hudi": "numFiles"}
# Hudi's reader lists files from the metadata table and skips by its column statistics
HUDI_READ = {"hoodie.metadata.enable": "true", "hoodie.enable.data.skipping": "true"}

SCAN = """
df = eval(read).where(condition).select('id')
ids = sorted(r.id for r in df.collect())
leaves = df._jdf.queryExecution().executedPlan().collectLeaves()
files = []
for i in range(leaves.size()):
    metrics = leaves.apply(i).metrics()
    if metrics.contains(metric):
        files.append(metrics.apply(metric).value())
result = [ids, files]
"""


def scan(table: SparkTable, condition: str) -> tuple[list[int], list[int]]:
    """(the ids Spark's filtered read returns, the files each scan node of it read)."""
    if table.fmt == "iceberg":
        read = f"spark.table('dataferry.{table.name}')"
    elif table.fmt == "hudi":
        read = f"spark.read.format('hudi').options(**{HUDI_READ!r}).load({table.spark_path!r})"
    else:
        read = f"spark.read.format('delta').load({table.spark_path!r})"
    code, metric = SCAN, FILES_READ[table.fmt]
    ids, files = table.spark.run(code, read=read, condition=condition, metric=metric)
    return ids, files


@pytest.fixture(scope="module", params=sorted(FILES_READ))
def clustered(request, spark, tmp_path_factory) -> SparkTable:
    """The format's table of three appends, one file each, unpartitioned."""
    fmt = request.param
    dest = tmp_path_factory.mktemp("skip") / f"skip_{fmt}"
    table = SparkTable(fmt, dest, spark, partition_by=())  # Hudi: record key `id`
    for start in STARTS:
        table.write(type_zoo(6, start=start).drop_columns(["part"]), "append")
    return table


@pytest.mark.parametrize("column", sorted(FILTERS))
def test_spark_skips_files_by_dataferrys_statistics(clustered, column):
    """Broken (a file's min or max written wrong, swapped, in another encoding than the
    format's, or missing), Spark skips the file holding the rows (a wrong answer: rows lost)
    or reads files that cannot match (every filtered query reads the whole table)."""
    ids, files = scan(clustered, FILTERS[column])
    assert ids == MATCHING, f"{clustered.fmt}: Spark's filter on {column} returned {ids}"
    assert files == [1], (
        f"{clustered.fmt}: Spark read {files} files for a filter on {column} that one file's "
        f"statistics alone can match"
    )


def test_spark_reads_every_file_a_filter_can_match(clustered):
    """The metric counts what it should: a filter every file can match reads all three (were
    the metric not the files read, the tests above could pass with no skipping at all)."""
    ids, files = scan(clustered, "id < 100")
    assert len(ids) == 18 and files == [3], f"{clustered.fmt}: read {files} files"
