"""Hudi's metadata table as dataferry keeps it (`commit/table/hudi/metadata/`): keys as Hudi
0.15 makes them, log blocks in Hudi's log format, a deltacommit per data instant listing its
files and column statistics, taken back with a rolled-back instant. Spark's reader skipping
files by these records is tests/interop/test_spark_skipping.py."""

from __future__ import annotations

import fnmatch
import io
import json
import struct

import pyarrow as pa
import pytest

import dataferry
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.table.footers import ColumnFacts, FileFacts
from dataferry.commit.table.hudi.metadata import keys, layout, logformat, records
from dataferry.errors import InjectedCrash
from dataferry.store import open_store
from dataferry.store.faults import FaultRule, Op

fastavro = pytest.importorskip("fastavro")

MDT = ".hoodie/metadata"


def rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"x": list(range(start, start + n)), "day": [f"d{i % 2}" for i in range(n)]})


def write(dest, data, store=None, mode="append", **options):
    return dataferry.write_dataset(
        data, store or str(dest), partition_by=["day"], committer="hudi", progress=False,
        mode=mode, committer_options={"record_key": "x", **options},
    )  # fmt: skip


def blocks(path) -> list[tuple[str, list[dict]]]:
    """(instant, records) of every block of a log file, checking the block's lengths."""
    data, out, o = path.read_bytes(), [], 0
    while o < len(data):
        assert data[o : o + 6] == b"#HUDI#"
        (size,) = struct.unpack_from(">q", data, o + 6)
        version, kind, count = struct.unpack_from(">iii", data, o + 14)
        assert (version, kind) == (1, 3)
        p, header = o + 26, {}
        for _ in range(count):
            key, length = struct.unpack_from(">ii", data, p)
            header[key] = data[p + 8 : p + 8 + length].decode()
            p += 8 + length
        (length,) = struct.unpack_from(">q", data, p)
        content = data[p + 8 : p + 8 + length]
        assert struct.unpack_from(">i", data, p + 8 + length) == (0,)  # an empty footer
        end = o + 14 + size
        assert struct.unpack_from(">q", data, end - 8) == (end - 8 - o,)
        schema = fastavro.parse_schema(json.loads(header[2]))
        block_version, n = struct.unpack_from(">ii", content, 0)
        q, found = 8, []
        for _ in range(n):
            (k,) = struct.unpack_from(">i", content, q)
            found.append(fastavro.schemaless_reader(io.BytesIO(content[q + 4 : q + 4 + k]), schema))
            q += 4 + k
        assert block_version == 3 and q == len(content)
        out.append((header[0], found))
        o = end
    return out


def metadata_records(table) -> dict[str, list[tuple[str, dict]]]:
    """Per metadata partition, (instant, record) of every block on storage."""
    found = {}
    for part in layout.KEPT:
        for f in sorted((table / MDT / part).glob(".*.log.*")):
            for instant, recs in blocks(f):
                found.setdefault(part, []).extend((instant, r) for r in recs)
    return found


def completed(table, suffix: str) -> list[str]:
    return sorted(p.name.split(".")[0] for p in table.glob(f"*.{suffix}"))


def test_keys_are_those_hudi_makes():
    """Vectors from a table Hudi 0.15's Spark writer made: a key built otherwise is never
    found by the reader's lookup by column."""
    name = "b85168fb-6709-486d-a5cb-ea086ae2c96c-0_0-49-76_20261207135537049.parquet"
    assert (
        keys.column_stats_key("id", "", name) == "sLZoasJosec=FXThHwelITM=xArbz2+0rhYr4Swo+aVfUw=="
    )
    other = "b85168fb-6709-486d-a5cb-ea086ae2c96c-0_0-17-20_20261207135510299.parquet"
    seqno = keys.column_stats_key("_hoodie_commit_seqno", "", other)
    assert seqno == "aaIjUtS9XJU=FXThHwelITM=Xzidr5arj94tlCc76NJbuQ=="
    assert keys.partition_key("") == "." and keys.partition_key("day=d0/") == "day=d0"
    # XXH64's published values (seed 0): short input, and one past the 32-byte stripes
    assert keys.xxh64(b"", 0) == 0xEF46DB3751D8E999
    assert keys.xxh64(b"Nobody inspects the spammish repetition", 0) == 0xFBCEA83C8A378BF1
    # Java's String.hashCode routing, an overflowing one included
    assert [layout.group_index(k, 2) for k in ("a", "b")] == [1, 0]
    # its hash is Integer.MIN_VALUE: Java's abs leaves it negative, -2147483648 % 7 == -2
    assert layout.group_index("polygenelubricants", 7) == 2


def test_values_are_wrapped_as_hudi_reads_them():
    utc = pa.timestamp("us", "UTC")
    assert records.wrap("2024-04-01T06:00:00.123Z", utc, up=False)[1]["value"] == 1711951200123000
    # the facts keep milliseconds: a maximum is widened to the millisecond's end
    assert records.wrap("2024-04-01T06:00:00.123Z", utc, up=True)[1]["value"] == 1711951200123999
    name, value = records.wrap(31.31, pa.decimal128(10, 2), up=False)
    assert name.endswith("DecimalWrapper")
    assert int.from_bytes(value["value"], "big", signed=True) == 3131 * 10**13  # scale 15
    assert records.wrap(-0.5, pa.decimal128(10, 2), up=False)[1]["value"] == (-5 * 10**14).to_bytes(
        7, "big", signed=True
    )
    assert records.wrap(1.0, pa.decimal128(20, 2), up=False) is None  # not exact from a float
    assert records.wrap("2024-04-01", pa.date32(), up=False)[1] == {"value": 19814}
    assert records.wrap(7, pa.int32(), up=False)[0].endswith(".IntWrapper")
    assert records.wrap(7, pa.int64(), up=False)[0].endswith(".LongWrapper")
    assert records.wrap("x", pa.binary(), up=False) is None


def test_each_commit_lists_its_files_and_statistics_before_it_completes(tmp_path):
    table = tmp_path / "t"
    write(table, rows(4))
    write(table, rows(4, start=10), mode="append")
    props = (table / ".hoodie/hoodie.properties").read_text()
    assert "hoodie.table.metadata.partitions=column_stats,files" in props
    data_instants = completed(table / ".hoodie", "commit")
    assert completed(table / MDT / ".hoodie", "deltacommit") == [
        layout.INIT_INSTANT,
        *data_instants,
    ]
    found = metadata_records(table)
    assert sorted({i for i, _ in found["files"]}) == data_instants
    listed = {}
    for _, r in found["files"]:
        if r["type"] == records.FILE_LIST:
            listed.setdefault(r["key"], set()).update(r["filesystemMetadata"])
    on_disk = {p.parent.name: set() for p in table.glob("day=*/*.parquet")}
    for p in table.glob("day=*/*.parquet"):
        on_disk[p.parent.name].add(p.name)
    assert listed == on_disk
    everything = [r for _, r in found["files"] if r["key"] == keys.ALL_PARTITIONS]
    assert set().union(*(r["filesystemMetadata"] for r in everything)) == {"day=d0", "day=d1"}
    x_stats = {
        r["ColumnStatsMetadata"]["fileName"]: r
        for _, r in found["column_stats"]
        if r["ColumnStatsMetadata"]["columnName"] == "x"
    }
    assert sorted(x_stats) == sorted(set().union(*on_disk.values()))
    for name, r in x_stats.items():
        part = next(p for p, names in on_disk.items() if name in names)
        values = pa.parquet.read_table(table / part / name).column("x").to_pylist()
        stats = r["ColumnStatsMetadata"]
        assert (stats["minValue"]["value"], stats["maxValue"]["value"]) == (
            min(values),
            max(values),
        )
        assert stats["valueCount"] == len(values) and stats["nullCount"] == 0
        assert r["key"] == keys.column_stats_key("x", part, name)


def test_a_crash_between_the_two_deltacommits_is_finished_by_cleanup(tmp_path):
    """A crash after the metadata table's deltacommit and before the data instant's: the
    job's intent is on storage, so `dataferry cleanup` finishes the commit; the metadata
    table's instant, already complete, is not written twice."""
    table = tmp_path / "t"
    write(table, rows(4))
    crash = FaultRule(
        action="crash", kinds=frozenset({Op.CREATE_IF_ABSENT}), path_glob=".hoodie/2*.commit"
    )
    with pytest.raises(InjectedCrash):
        write(table, rows(3, start=50), store=open_store(str(table), faults=[crash]))
    dead = sorted(p.name.split(".")[0] for p in (table / ".hoodie").glob("*.inflight"))[-1]
    assert dead in completed(table / MDT / ".hoodie", "deltacommit")
    assert dead not in completed(table / ".hoodie", "commit")
    logs = sorted(p.name for p in (table / MDT).rglob(".*.log.*"))
    cleanup_destination(open_store(str(table)), older_than_s=0)
    assert dead in completed(table / ".hoodie", "commit")
    assert sorted(p.name for p in (table / MDT).rglob(".*.log.*")) == logs
    write(table, rows(2, start=90))
    instants = completed(table / ".hoodie", "commit")
    assert completed(table / MDT / ".hoodie", "deltacommit") == [layout.INIT_INSTANT, *instants]


def test_a_rolled_back_instant_is_taken_out_of_the_metadata_table(tmp_path):
    """An instant rolled back after its metadata-table blocks were written: Hudi's reader
    reads the blocks of an instant a `.rollback` names, so they go (with the instant's
    deltacommit) before the rollback is written."""
    from dataferry.commit.table.hudi.metadata import table as metadata_table
    from dataferry.commit.table.hudi.rollback import roll_back_instant

    table = tmp_path / "t"
    write(table, rows(4))
    store = open_store(str(table))
    facts = [FileFacts("day=d0/f_0-0-0_20990101000000000.parquet", 10, 1, 0, {})]
    dead = "20990101000000000"
    metadata_table.write_instant(store, dead, list(layout.KEPT), facts, pa.schema([]))
    assert dead in {i for i, _ in metadata_records(table)["files"]}
    roll_back_instant(store, dead, [], 0.0, lambda: "20990101000000001")
    assert list((table / ".hoodie").glob("20990101000000001.rollback"))
    assert not list((table / MDT / ".hoodie").glob(f"{dead}.*"))
    assert dead not in {i for i, _ in metadata_records(table)["files"]}
    assert len(metadata_records(table)["files"]) == 3  # the first commit's stay


def test_a_table_made_without_one_has_none(tmp_path):
    table = tmp_path / "t"
    write(table, rows(4), metadata_table=False)
    write(table, rows(2, start=10), mode="append")  # and stays without
    assert not (table / MDT).exists()
    assert (
        "hoodie.table.metadata.partitions=\n" in (table / ".hoodie/hoodie.properties").read_text()
    )


def test_the_facts_give_no_record_for_a_column_without_bounds():
    facts = FileFacts("day=d0/f.parquet", 10, 3, 0, {"x": ColumnFacts(1, 3, 0), "b": ColumnFacts()})
    schema = pa.schema([("x", pa.int64()), ("b", pa.binary())])
    found = list(records.column_stats_records("day=d0", facts, schema))
    assert [r["ColumnStatsMetadata"]["columnName"] for r in found] == ["x"]
    assert (
        logformat.block_instant(
            logformat.avro_data_block("20240101000000000", records.SCHEMA, found)[:64]
        )
        == "20240101000000000"
    )


def test_new_log_files_go_on_the_latest_slice():
    """After Hudi compacts a file group (an HFile base at the compaction's instant), new log
    files start that slice: broken (a log file on the older base), Hudi's readers ignore it
    and the files it lists."""
    names = [
        ".files-0000-0_00000000000000010.log.1_0-0-0",
        ".files-0000-0_00000000000000010.log.2_0-0-0",
        "files-0000-0_0-81-123_20240101000000000001.hfile",
        "files-0000-0_0-9-9_20240102000000000001.hfile",  # a compaction not completed
    ]
    done = {layout.INIT_INSTANT, "20240101000000000001"}
    assert layout.file_groups(names, done) == {"files-0000-0": ("20240101000000000001", 0)}
    assert layout.file_groups(names[:2], done) == {"files-0000-0": (layout.INIT_INSTANT, 2)}


def listed_by_metadata(table) -> set[str]:
    """The data files Hudi's reader lists from the metadata table: the `files` records of the
    blocks whose instant the metadata table completed and the data table completed or rolled
    back (Hudi reads a rolled-back instant's blocks)."""
    from dataferry.commit.table.hudi.avro_meta import read_avro_file

    hoodie = table / ".hoodie"
    valid = set(completed(hoodie, "commit")) | set(completed(hoodie, "replacecommit"))
    for r in hoodie.glob("*.rollback"):
        valid.update(read_avro_file(r.read_bytes())["commitsRollback"])
    valid &= set(completed(table / MDT / ".hoodie", "deltacommit"))
    listed = set()
    for instant, r in metadata_records(table).get("files", []):
        if instant in valid and r["type"] == records.FILE_LIST:
            part = "" if r["key"] == keys.NON_PARTITIONED else r["key"] + "/"
            listed.update(part + name for name in r["filesystemMetadata"])
    return listed


def committed_files(table) -> set[str]:
    hoodie = table / ".hoodie"
    found = set()
    for path in hoodie.glob("*.commit"):
        stats = json.loads(path.read_text())["partitionToWriteStats"]
        found.update(s["path"] for st in stats.values() for s in st)
    return found


@pytest.mark.parametrize("when", ["before", "after"])
def test_after_a_crash_at_any_metadata_step_and_cleanup_hudi_lists_the_committed_files(
    tmp_path, when
):
    """A crash before or after each step of the job commit that makes the metadata table's
    files (its pending deltacommit, log files, completed deltacommit) and the data instant's
    commit, then `dataferry cleanup` and one more
    job: the files Hudi's reader lists from the metadata table are exactly the committed
    ones. Broken (a rolled-back instant's blocks left, or a deltacommit completed after the
    data instant), Hudi lists files no commit has, or misses committed ones."""
    step = 0
    while True:
        table = tmp_path / f"t{step}{when}"
        write(table, rows(4))
        seen = [0]

        def at_step(index: int, op: Op, path: str, seen=seen, step=step) -> bool:
            data_commit = fnmatch.fnmatch(path, ".hoodie/2*.commit")
            if op != Op.CREATE_IF_ABSENT or not (path.startswith(MDT) or data_commit):
                return False
            seen[0] += 1
            return seen[0] == step + 1

        crash = FaultRule(action="crash", when=when, predicate=at_step)
        try:
            write(table, rows(3, start=50), store=open_store(str(table), faults=[crash]))
        except InjectedCrash:
            cleanup_destination(open_store(str(table)), older_than_s=0, rollback=True)
        else:
            break  # past the last step
        write(table, rows(2, start=90))
        assert listed_by_metadata(table) == committed_files(table), f"crash {when} step {step}"
        step += 1
    assert step == 6  # requested, inflight, two log files, deltacommit, the data commit
