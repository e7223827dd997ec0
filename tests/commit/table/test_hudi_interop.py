"""Interop with tables Hudi itself wrote: a copy-on-write table laid out as Java/Spark Hudi
lays it out (version 6, timeline layout 1, `hoodie.populate.meta.fields` true or absent, so
every base file holds the five meta columns first) is read by hudi-rs, appended to (and
partition-overwritten) by dataferry, and read again by hudi-rs row for row, dataferry's rows
carrying meta columns filled as Hudi fills them."""

from __future__ import annotations

import json
import uuid
import zlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dataferry
from dataferry.commit.table.hudi.meta import META_COLUMNS
from dataferry.commit.table.hudi.timeline import parse_base_file_name
from dataferry.errors import ConfigError

hudi = pytest.importorskip("hudi")

JAVA_INSTANT = "20240418173550988"
DATA = ["x", "day", "v"]


def rows(n: int, start: int = 0) -> pa.Table:
    return pa.table(
        {
            "x": pa.array(range(start, start + n), pa.int64()),
            "day": [f"2024-01-0{1 + i % 2}" for i in range(start, start + n)],
            "v": [i * 0.5 for i in range(start, start + n)],
        }
    )


AVRO_SCHEMA = {
    "type": "record",
    "name": "t_record",
    "namespace": "hoodie.t",
    "fields": [
        {"name": "x", "type": ["null", "long"], "default": None},
        {"name": "day", "type": ["null", "string"], "default": None},
        {"name": "v", "type": ["null", "double"], "default": None},
    ],
}


def java_properties(meta_fields: str | None, record_key: str = "x") -> str:
    """`hoodie.properties` with the keys Spark's Hudi 0.14 writer puts there."""
    props = {
        "hoodie.table.name": "t",
        "hoodie.table.type": "COPY_ON_WRITE",
        "hoodie.table.version": "6",
        "hoodie.timeline.layout.version": "1",
        "hoodie.table.partition.fields": "day",
        "hoodie.table.precombine.field": "v",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.datasource.write.partitionpath.urlencode": "false",
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.SimpleKeyGenerator",
        "hoodie.table.base.file.format": "PARQUET",
        "hoodie.table.create.schema": json.dumps(AVRO_SCHEMA).replace(":", "\\:"),
        "hoodie.table.timeline.timezone": "UTC",
        "hoodie.archivelog.folder": "archived",
        "hoodie.table.metadata.partitions": "",
        "hoodie.table.checksum": str(zlib.crc32(b".t")),
    }
    if record_key:
        props["hoodie.table.recordkey.fields"] = record_key
    if meta_fields is not None:
        props["hoodie.populate.meta.fields"] = meta_fields
    lines = ["#Updated at 2024-04-18T17:35:55.120Z", "#Thu Apr 18 17:35:55 UTC 2024"]
    return "\n".join(lines + [f"{k}={v}" for k, v in sorted(props.items())]) + "\n"


def java_table(base, meta_fields: str | None = "true", record_key: str = "x") -> pa.Table:
    """Lay out a table as Spark's Hudi writer does (one INSERT commit, two partitions, one
    base file each); the rows it holds, meta columns included."""
    hoodie = base / ".hoodie"
    hoodie.mkdir(parents=True)
    (hoodie / "hoodie.properties").write_text(java_properties(meta_fields, record_key))
    data = rows(6, start=100)
    stats: dict[str, list[dict]] = {}
    written = []
    for task, day in enumerate(sorted(set(data.column("day").to_pylist()))):
        part = f"day={day}"
        (base / part).mkdir()
        (base / part / ".hoodie_partition_metadata").write_text(
            f"#partition metadata\n#Thu Apr 18 17:35:52 UTC 2024\ncommitTime={JAVA_INSTANT}\n"
            "partitionDepth=1\n"
        )
        fid = f"{uuid.uuid4()}-0"
        name = f"{fid}_{task}-10-{20 + task}_{JAVA_INSTANT}.parquet"
        mine = data.filter(pa.compute.equal(data.column("day"), day))
        n = mine.num_rows
        meta = {
            "_hoodie_commit_time": [JAVA_INSTANT] * n,
            "_hoodie_commit_seqno": [f"{JAVA_INSTANT}_{task}_{i}" for i in range(n)],
            "_hoodie_record_key": [str(x) for x in mine.column("x").to_pylist()],
            "_hoodie_partition_path": [part] * n,
            "_hoodie_file_name": [name] * n,
        }
        table = pa.table({**{k: pa.array(v, pa.string()) for k, v in meta.items()}})
        for column in DATA:
            table = table.append_column(column, mine.column(column))
        pq.write_table(table, base / part / name)
        written.append(table)
        size = (base / part / name).stat().st_size
        stats[part] = [
            {
                "fileId": fid,
                "path": f"{part}/{name}",
                "prevCommit": "null",
                "numWrites": n,
                "numDeletes": 0,
                "numUpdateWrites": 0,
                "numInserts": n,
                "totalWriteBytes": size,
                "totalWriteErrors": 0,
                "partitionPath": part,
                "fileSizeInBytes": size,
            }
        ]
    commit = {
        "partitionToWriteStats": stats,
        "compacted": False,
        "extraMetadata": {"schema": json.dumps(AVRO_SCHEMA)},
        "operationType": "UPSERT",
    }
    (hoodie / f"{JAVA_INSTANT}.commit.requested").write_bytes(b"")
    profile = {**commit, "partitionToWriteStats": {}}
    (hoodie / f"{JAVA_INSTANT}.inflight").write_text(json.dumps(profile))
    (hoodie / f"{JAVA_INSTANT}.commit").write_text(json.dumps(commit, indent=2))
    return pa.concat_tables(written)


def read_hudi(path) -> pa.Table:
    batches = hudi.HudiTableBuilder.from_base_uri(str(path)).build().read()
    return pa.Table.from_batches(batches).sort_by("x")


def append(data: pa.Table, path, mode: str = "append", **options):
    return dataferry.write_dataset(
        data,
        str(path),
        partition_by=["day"],
        committer="hudi",
        committer_options={"table_name": "t", **options},
        mode=mode,
    )


def dataferry_instants(path) -> list[str]:
    return sorted(
        p.name.split(".")[0]
        for p in (path / ".hoodie").iterdir()
        if p.name.endswith("commit") and not p.name.startswith(JAVA_INSTANT)
    )


def check_meta_columns(got: pa.Table, instant: str) -> None:
    """The rows of `instant` carry meta columns as Hudi fills them."""
    assert got.column_names[:5] == list(META_COLUMNS)
    by_file: dict[str, list[dict]] = {}
    for row in got.to_pylist():
        if row["_hoodie_commit_time"] == instant:
            by_file.setdefault(row["_hoodie_file_name"], []).append(row)
    assert by_file
    for name, mine in by_file.items():
        _fid, token, file_instant = parse_base_file_name(name)
        assert file_instant == instant
        task = token.split("-")[0]
        seqnos = sorted(r["_hoodie_commit_seqno"] for r in mine)
        assert seqnos == sorted(f"{instant}_{task}_{i}" for i in range(len(mine)))
        for r in mine:
            assert r["_hoodie_record_key"] == str(r["x"])
            assert r["_hoodie_partition_path"] == f"day={r['day']}"


@pytest.mark.parametrize("meta_fields", ["true", None])
def test_append_to_a_table_hudi_wrote(tmp_path, meta_fields):
    path = tmp_path / "t"
    java_rows = java_table(path, meta_fields)
    before = read_hudi(path)
    assert before.to_pylist() == java_rows.sort_by("x").to_pylist()  # the fixture is sound

    append(rows(10), path)  # the record key is the table's
    got = read_hudi(path)
    want = pa.concat_tables([java_rows.select(DATA), rows(10)]).sort_by("x")
    assert got.select(DATA).to_pylist() == want.to_pylist()
    (instant,) = dataferry_instants(path)
    check_meta_columns(got, instant)
    old = got.filter(pa.compute.equal(got.column("_hoodie_commit_time"), JAVA_INSTANT))
    assert old.to_pylist() == before.to_pylist()  # Hudi's rows as they were
    meta = json.loads((path / ".hoodie" / f"{instant}.commit").read_text())
    fields = [f["name"] for f in json.loads(meta["extraMetadata"]["schema"])["fields"]]
    assert fields == DATA  # the table's schema, recorded without the meta columns

    append(rows(4, start=50), path)
    got = read_hudi(path)
    assert got.num_rows == 6 + 10 + 4
    check_meta_columns(got, dataferry_instants(path)[-1])


def test_overwrite_partitions_of_a_table_hudi_wrote(tmp_path):
    path = tmp_path / "t"
    java_rows = java_table(path)
    new = rows(3, start=200).set_column(1, "day", pa.array(["2024-01-01"] * 3))
    append(new, path, mode="overwrite-partitions", record_key="x")
    got = read_hudi(path)
    kept = java_rows.filter(pa.compute.not_equal(java_rows.column("day"), "2024-01-01"))
    want = pa.concat_tables([kept.select(DATA), new]).sort_by("x")
    assert got.select(DATA).to_pylist() == want.to_pylist()
    (instant,) = dataferry_instants(path)
    assert (path / ".hoodie" / f"{instant}.replacecommit").exists()
    check_meta_columns(got, instant)


def test_meta_fields_table_without_a_record_key_is_refused(tmp_path):
    path = tmp_path / "t"
    java_table(path, record_key="")
    with pytest.raises(ConfigError, match="record_key"):
        append(rows(3), path)
    with pytest.raises(ConfigError, match="'nope' is not a column"):
        append(rows(3), path, record_key="nope")
    assert read_hudi(path).num_rows == 6  # nothing was written
    append(rows(3), path, record_key="x")  # given, it writes
    assert read_hudi(path).num_rows == 9


def test_record_key_other_than_the_tables_is_refused(tmp_path):
    path = tmp_path / "t"
    java_table(path)
    with pytest.raises(ConfigError, match="give the table's"):
        append(rows(3), path, record_key="v")


def test_tables_dataferry_creates_keep_no_meta_columns(tmp_path):
    path = tmp_path / "new"
    append(rows(5), path, record_key="x")
    append(rows(5, start=5), path, record_key="x")
    got = read_hudi(path)
    assert got.column_names == DATA and got.num_rows == 10


def test_many_files_and_tasks_number_their_rows_per_file(tmp_path):
    path = tmp_path / "t"
    java_table(path)
    dataferry.write_dataset(
        rows(30),
        str(path),
        partition_by=["day"],
        committer="hudi",
        committer_options={"table_name": "t"},
        mode="append",
        max_rows_per_file=4,
        tasks=2,
    )
    got = read_hudi(path)
    assert got.num_rows == 36
    (instant,) = dataferry_instants(path)
    check_meta_columns(got, instant)
    mine = got.filter(pa.compute.equal(got.column("_hoodie_commit_time"), instant))
    assert len(set(mine.column("_hoodie_file_name").to_pylist())) >= 8


def test_meta_columns_of_complex_keys_and_later_rows():
    from dataferry.commit.table.hudi import HudiConfig
    from dataferry.commit.table.hudi.meta import meta_file_columns, meta_options

    props = {
        "hoodie.table.recordkey.fields": "x,day",
        "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator",
    }
    options = meta_options(props, ())
    assert options == {"meta_fields": "complex", "record_key": ("x", "day")}
    config = HudiConfig(instant=JAVA_INSTANT, **options)
    data = pa.table({"x": pa.array([1, None], pa.int64()), "day": ["2024-01-01", ""]})
    columns = meta_file_columns(config, 3, "day=2024-01-01/f-0_3-0-0_1.parquet", data.schema)
    assert columns.schema.names == [*META_COLUMNS, "x", "day"]
    got = columns.prepend(data, 5).to_pydict()
    assert got["_hoodie_commit_seqno"] == [f"{JAVA_INSTANT}_3_5", f"{JAVA_INSTANT}_3_6"]
    assert got["_hoodie_record_key"] == ["x:1,day:2024-01-01", "x:__null__,day:__empty__"]
    assert got["_hoodie_partition_path"] == ["day=2024-01-01"] * 2
    assert got["_hoodie_file_name"] == ["f-0_3-0-0_1.parquet"] * 2
    assert meta_options({"hoodie.populate.meta.fields": "false"}, ("x",)) == {"meta_fields": ""}
    simple = HudiConfig(instant=JAVA_INSTANT, meta_fields="simple", record_key="x")
    with pytest.raises(ConfigError, match="null or empty"):
        meta_file_columns(simple, 0, "f.parquet", data.schema).prepend(data, 0)


def test_upsert_into_a_table_hudi_wrote(tmp_path):
    """Keys Hudi wrote are updated in their own file groups (a new slice of the Java file
    group), by the table's record key and precombine field, meta columns as Hudi's merge
    keeps them (untouched rows keep their commit time and seqno, every row names the new
    file); broken, hudi-rs reads two versions of a key or stale meta columns."""
    path = tmp_path / "t"
    java_rows = java_table(path)
    java_files = {r["x"]: r["_hoodie_file_name"] for r in java_rows.to_pylist()}
    new = pa.table(
        {
            "x": pa.array([100, 103, 105, 300], pa.int64()),
            "day": ["2024-01-01", "2024-01-02", "2024-01-02", "2024-01-01"],
            "v": [1000.0, 1000.0, 1.0, 3.0],  # 105: older than the stored 52.5, ignored
        }
    )
    append(new, path)
    got = read_hudi(path)
    assert got.column("x").to_pylist() == [100, 101, 102, 103, 104, 105, 300]
    by_x = {r["x"]: r for r in got.to_pylist()}
    assert [by_x[x]["v"] for x in (100, 103, 105, 300)] == [1000.0, 1000.0, 52.5, 3.0]
    (instant,) = dataferry_instants(path)
    check_meta_columns(got, instant)
    for x in (100, 103):  # updated in the Java file group, under the new instant
        fid = parse_base_file_name(by_x[x]["_hoodie_file_name"])[0]
        assert fid == parse_base_file_name(java_files[x])[0]
        assert by_x[x]["_hoodie_commit_time"] == instant
    for x in (101, 102, 104, 105):  # untouched: Hudi's commit time and seqno, the new file
        assert by_x[x]["_hoodie_commit_time"] == JAVA_INSTANT
        assert by_x[x]["_hoodie_file_name"] != java_files[x]
    meta = json.loads((path / ".hoodie" / f"{instant}.commit").read_text())
    assert meta["operationType"] == "UPSERT"
    prev = sorted(s["prevCommit"] for ss in meta["partitionToWriteStats"].values() for s in ss)
    assert prev == [JAVA_INSTANT, JAVA_INSTANT, "null"]
