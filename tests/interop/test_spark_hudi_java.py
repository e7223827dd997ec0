"""dataferry's Hudi artifacts as Java Hudi writes them, checked by Spark 3.5 + Hudi 0.15.

Record keys: Spark writes rows keyed by float, double, timestamp, date and decimal fields;
dataferry upserts rows of the same keys; Spark then reads each key once, with dataferry's
version. Broken (dataferry spelling a key otherwise than Java's `toString` does: `1.0E10`,
micros, `0.00`), Hudi keeps both rows and every reader sees duplicates.

Rollbacks: a `.rollback` dataferry writes is decoded by Hudi's own deserializer and listed by
Spark's `call show_rollbacks`. Broken (JSON, or another schema), Hudi fails to load the
timeline for any write, clean or archive of the table.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import dataferry

pytestmark = [
    pytest.mark.xdist_group("spark"),
    pytest.mark.filterwarnings("ignore::Warning"),
]

KEYS = ["kf", "kf32", "kts", "kd", "kdec"]
ROWS = """
SELECT id, CAST(id % 2 AS STRING) AS part, CAST(id AS DOUBLE) AS v,
  CAST(CASE id WHEN 0 THEN '1.0' WHEN 1 THEN '1e10' WHEN 2 THEN '-0.0' WHEN 3 THEN 'NaN'
               WHEN 4 THEN '0.0001' ELSE '123.456' END AS DOUBLE) AS kf,
  CAST(CASE id WHEN 0 THEN '0.1' WHEN 1 THEN '1e10' ELSE '3.5' END AS FLOAT) AS kf32,
  timestamp_micros(1711840507123456 + id) AS kts,
  date_add(DATE'2024-03-30', CAST(id AS INT)) AS kd,
  CAST(id * 1.01 AS DECIMAL(10, 2)) AS kdec
FROM range(0, 6)
"""
OPTIONS = {
    "hoodie.table.name": "spark_keys",
    "hoodie.datasource.write.recordkey.field": ",".join(KEYS),
    "hoodie.datasource.write.precombine.field": "v",
    "hoodie.datasource.write.partitionpath.field": "part",
    "hoodie.datasource.write.hive_style_partitioning": "true",
    "hoodie.datasource.write.operation": "upsert",
    "hoodie.metadata.enable": "false",
}


def test_dataferry_upserts_the_keys_spark_wrote_without_duplicates(spark, tmp_path):
    dest = tmp_path / "spark_keys"
    code = "spark.sql(rows).write.format('hudi').options(**options).mode('overwrite').save(path)"
    spark.run(code, rows=ROWS, options=OPTIONS, path=str(dest))
    first = spark.read("hudi", dest)
    data = first.select([c for c in first.column_names if not c.startswith("_hoodie_")])
    updated = data.set_column(data.schema.get_field_index("v"), "v", pc.add(data["v"], 100.0))
    dataferry.write_dataset(
        updated, str(dest), committer="hudi", mode="append", partition_by=["part"],
        committer_options={"record_key": KEYS, "precombine_field": "v"}, progress=False,
    )  # fmt: skip
    got = spark.read("hudi", dest)
    assert sorted(got["_hoodie_record_key"].to_pylist()) == sorted(
        first["_hoodie_record_key"].to_pylist()
    ), "Spark reads other keys (a duplicate) after dataferry's upsert"
    assert sorted(got["v"].to_pylist()) == sorted(updated["v"].to_pylist())
    assert pa.types.is_float32(got.schema.field("kf32").type)


ROLLBACKS = """
import os
utils = spark._jvm.org.apache.hudi.common.table.timeline.TimelineMetadataUtils
decoded = {}
for name in sorted(os.listdir(hoodie)):
    if name.endswith('.rollback'):
        data = bytearray(open(os.path.join(hoodie, name), 'rb').read())
        decoded[name] = utils.deserializeHoodieRollbackMetadata(data).toString()
spark.sql(f"CREATE TABLE {table} USING hudi LOCATION '{path}'")
shown = spark.sql(f"call show_rollbacks(table => '{table}')").collect()
result = {'decoded': decoded, 'shown': [r.asDict() for r in shown]}
"""


def test_hudi_decodes_and_lists_dataferrys_rollback(spark, tmp_path):
    """A job of dataferry fails and is rolled back: Hudi's Java deserializer reads the
    `.rollback` (Avro HoodieRollbackMetadata) and `show_rollbacks` lists it."""
    dest = tmp_path / "rolled_back"
    data = pa.table({"id": [1, 2], "part": ["a", "b"], "v": [1.0, 2.0]})
    options = {"record_key": ["id"], "precombine_field": "v"}

    def write(**kw) -> None:
        dataferry.write_dataset(
            data, str(dest), committer="hudi", mode="append", partition_by=["part"],
            committer_options=options, progress=False, **kw,
        )  # fmt: skip

    def fail(job):
        raise RuntimeError("boom")

    write()
    with pytest.raises(RuntimeError, match="boom"):
        write(before_job_commit=fail)
    (rollback,) = [p.name for p in (dest / ".hoodie").glob("*.rollback")]
    table = f"rb_{tmp_path.name[-12:].replace('-', '_')}"
    got = spark.run(ROLLBACKS, hoodie=str(dest / ".hoodie"), path=str(dest), table=table)
    meta = json.loads(got["decoded"][rollback])
    assert meta["totalFilesDeleted"] == 2
    assert meta["instantsRollback"][0]["action"] == "commit"
    (shown,) = got["shown"]
    assert shown["instant"] == rollback.split(".")[0]
    assert shown["rollback_instant"] == meta["commitsRollback"][0]
