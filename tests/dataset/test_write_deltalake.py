"""`dataferry.write_deltalake`: deltalake's call (table_or_uri, data, mode, partition_by,
storage_options, name, description, configuration, schema_mode) translated onto
`write_dataset(..., committer="delta")`."""

from __future__ import annotations

import pyarrow as pa
import pytest

deltalake = pytest.importorskip("deltalake")

import dataferry  # noqa: E402
from dataferry.dataset import tables  # noqa: E402
from dataferry.dataset.tables import delta_write, store_options  # noqa: E402
from dataferry.errors import ConfigError, DestinationError  # noqa: E402


def sales(n=90, start=0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {"id": ids, "day": [f"d{i % 3}" for i in ids], "amount": [i * 0.5 for i in ids]}
    )


def ids(path, **kw) -> list[int]:
    return sorted(deltalake.DeltaTable(str(path), **kw).to_pyarrow_table().column("id").to_pylist())


def test_it_is_exported_with_the_entry_points():
    assert "write_deltalake" in dataferry.__all__
    assert dataferry.write_deltalake is tables.write_deltalake


def test_error_creates_the_table_and_then_refuses_it(tmp_path):
    out = tmp_path / "sales"
    result = dataferry.write_deltalake(out, sales(), partition_by=["day"])
    assert (result.committer, result.rows) == ("delta", 90)
    dt = deltalake.DeltaTable(str(out))
    assert dt.version() == 0 and dt.metadata().partition_columns == ["day"]
    assert ids(out) == list(range(90))
    with pytest.raises(DestinationError):
        dataferry.write_deltalake(out, sales(start=500), partition_by=["day"], mode="error")
    assert deltalake.DeltaTable(str(out)).version() == 0
    assert ids(out) == list(range(90))


def test_append_then_overwrite(tmp_path):
    out = tmp_path / "sales"
    dataferry.write_deltalake(out, sales(), partition_by="day", mode="append")  # creates
    dataferry.write_deltalake(out, sales(start=90), partition_by="day", mode="append")
    assert ids(out) == list(range(180))
    dataferry.write_deltalake(out, sales(n=10, start=1000), partition_by="day", mode="overwrite")
    assert ids(out) == list(range(1000, 1010))
    assert deltalake.DeltaTable(str(out)).version() == 2
    assert ids(out, version=1) == list(range(180))  # a snapshot reader keeps its version
    pl = pytest.importorskip("polars")
    assert sorted(pl.read_delta(str(out))["id"].to_list()) == list(range(1000, 1010))


def test_ignore_writes_nothing_when_the_table_exists(tmp_path):
    out = tmp_path / "sales"
    first = dataferry.write_deltalake(out, sales(), partition_by=["day"], mode="ignore")
    assert first is not None and first.rows == 90  # no table: written
    files = sorted(p for p in out.rglob("*.parquet"))
    assert (
        dataferry.write_deltalake(out, sales(start=90), partition_by=["day"], mode="ignore") is None
    )
    assert deltalake.DeltaTable(str(out)).version() == 0
    assert ids(out) == list(range(90))
    assert sorted(p for p in out.rglob("*.parquet")) == files  # not a file more


def test_ignore_when_the_table_appears_during_the_write(tmp_path, monkeypatch):
    """The table made after the check: the job finds it, writes nothing, and says so."""
    out = tmp_path / "sales"
    dataferry.write_deltalake(out, sales(), partition_by=["day"])
    checks = iter([False])  # the first check misses the table; later ones see it
    real = tables.delta_table_exists
    monkeypatch.setattr(tables, "delta_table_exists", lambda spec: next(checks, None) or real(spec))
    assert (
        dataferry.write_deltalake(out, sales(start=90), partition_by=["day"], mode="ignore") is None
    )
    assert ids(out) == list(range(90))


def test_a_delta_table_object_as_the_target(tmp_path):
    out = tmp_path / "sales"
    deltalake.write_deltalake(str(out), sales(), partition_by=["day"])  # made by deltalake
    dt = deltalake.DeltaTable(str(out))
    result = dataferry.write_deltalake(dt, sales(start=90), partition_by=["day"], mode="append")
    assert result.rows == 90
    assert ids(out) == list(range(180))
    assert delta_write(dt).dest == dt.table_uri


def test_a_delta_tables_own_storage_options_are_kept():
    class Table:  # a DeltaTable opened with storage options (deltalake keeps them so)
        table_uri = "s3://bucket/t"
        _storage_options = {"AWS_REGION": "eu-west-1"}

    spec = delta_write(Table())
    assert spec.committer_options["storage_options"] == {"AWS_REGION": "eu-west-1"}
    assert delta_write(Table(), storage_options={"AWS_REGION": "x"}).committer_options[
        "storage_options"
    ] == {"AWS_REGION": "x"}


def test_storage_options_and_table_metadata_reach_the_committer(tmp_path):
    out = tmp_path / "sales"
    given = {"timeout": "120s"}
    result = dataferry.write_deltalake(
        out,
        sales(),
        partition_by=["day"],
        storage_options=given,
        name="sales",
        description="daily sales",
        configuration={"delta.appendOnly": "false"},
    )
    config = result.run.job.config
    assert config.storage_options == given
    meta = deltalake.DeltaTable(str(out)).metadata()
    assert (meta.name, meta.description) == ("sales", "daily sales")
    assert meta.configuration == {"delta.appendOnly": "false"}


def test_schema_mode_reaches_the_committer(tmp_path):
    out = tmp_path / "sales"
    dataferry.write_deltalake(out, sales(), partition_by=["day"])
    wider = sales(start=90).append_column("note", pa.array(["n"] * 90))
    with pytest.raises(ConfigError, match="note"):
        dataferry.write_deltalake(out, wider, partition_by=["day"], mode="append")
    result = dataferry.write_deltalake(
        out, wider, partition_by=["day"], mode="append", schema_mode="merge"
    )
    assert result.run.job.config.schema_mode == "merge"
    assert ids(out) == list(range(180))


def test_schema_mode_merge_adds_a_column(tmp_path):
    out = tmp_path / "sales"
    dataferry.write_deltalake(out, sales(), partition_by=["day"])
    wider = sales(start=90).append_column("note", pa.array(["n"] * 90))
    with pytest.raises(ConfigError, match="note"):
        dataferry.write_deltalake(out, wider, partition_by=["day"], mode="append")
    dataferry.write_deltalake(out, wider, partition_by=["day"], mode="append", schema_mode="merge")
    back = deltalake.DeltaTable(str(out)).to_pyarrow_table()
    assert "note" in back.column_names and back.num_rows == 180


def test_other_options_go_to_write_dataset(tmp_path):
    out = tmp_path / "sales"
    result = dataferry.write_deltalake(
        out, sales(), max_rows_per_file=10, committer_options={"commit_retries": 3}
    )
    assert result.files == 9
    assert result.run.job.config.commit_retries == 3
    assert len(deltalake.DeltaTable(str(out)).file_uris()) == 9


def test_refusals(tmp_path):
    with pytest.raises(ConfigError, match="mode"):
        dataferry.write_deltalake(tmp_path / "t", sales(), mode="upsert")
    with pytest.raises(ConfigError, match="table_or_uri"):
        dataferry.write_deltalake(42, sales())
    with pytest.raises(ConfigError, match="schema_mode"):
        dataferry.write_deltalake(tmp_path / "t", sales(), schema_mode="sideways")
    assert not (tmp_path / "t").exists()


def test_store_options_in_s3fs_names():
    given = {
        "AWS_ACCESS_KEY_ID": "k",
        "aws_secret_access_key": "s",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_REGION": "eu-west-1",
        "AWS_ALLOW_HTTP": "true",
    }
    assert store_options("s3://b/t", given) == {
        "key": "k",
        "secret": "s",
        "endpoint_url": "http://127.0.0.1:9",
        "client_kwargs": {"region_name": "eu-west-1"},
    }
    assert store_options("/local/t", given) is None  # deltalake's alone
    spec = delta_write("s3://b/t", storage_options=given)
    assert spec.committer_options["storage_options"] == given
    assert spec.arguments()["storage_options"] == store_options("s3://b/t", given)


def test_storage_options_alone_reach_an_s3_table(s3_server, s3_url, monkeypatch):
    """Only the call's storage_options name the server: the store and deltalake both get
    them (the environment's endpoint is removed)."""
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    options = {
        "AWS_ENDPOINT_URL": s3_server.endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }
    dataferry.write_deltalake(s3_url, sales(), partition_by=["day"], storage_options=options)
    dataferry.write_deltalake(
        s3_url, sales(start=90), partition_by=["day"], storage_options=options, mode="append"
    )
    assert ids(s3_url, storage_options=options) == list(range(180))
