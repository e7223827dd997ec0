"""Writer options reach the files: read the Parquet metadata back."""

from __future__ import annotations

import inspect
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

import dataferry
from dataferry.dataset import task
from dataferry.errors import ConfigError, DestinationError


def table(n: int = 10_000) -> pa.Table:
    return pa.table({"k": [f"p{i % 2}" for i in range(n)], "v": list(range(n))})


def files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*.parquet"))


def test_parquet_options_reach_every_file(tmp_path):
    dataferry.write_dataset(
        table(),
        str(tmp_path / "o"),
        partition_by=["k"],
        compression="zstd",
        compression_level=5,
        use_dictionary=False,
        row_group_size=1000,
        write_statistics=False,
    )
    found = files(tmp_path / "o")
    assert len(found) == 2
    for f in found:
        meta = pq.ParquetFile(f).metadata
        assert meta.num_row_groups == 5
        col = meta.row_group(0).column(0)
        assert col.compression == "ZSTD"
        assert not col.is_stats_set
        assert "PLAIN_DICTIONARY" not in col.encodings and "RLE_DICTIONARY" not in col.encodings


def _dictionary_encoded(path: Path) -> dict[str, bool]:
    meta = pq.ParquetFile(path).metadata
    rg = meta.row_group(0)
    return {
        rg.column(i).path_in_schema: "RLE_DICTIONARY" in rg.column(i).encodings
        for i in range(meta.num_columns)
    }


def test_dictionary_encoding_only_where_values_repeat(tmp_path):
    """A column of distinct values (an id) is written plain: a dictionary of it costs a third
    of the write's CPU and makes the file larger. Repeating columns keep their dictionary,
    and a user's own choice of encodings wins."""
    n = 20_000
    data = pa.table(
        {
            "k": [f"p{i % 2}" for i in range(n)],
            "id": list(range(n)),
            "label": [f"label-{i % 7}" for i in range(n)],
            "small": [i % 3 for i in range(n)],
        }
    )
    dataferry.write_dataset(data, str(tmp_path / "chosen"), partition_by=["k"])
    for f in files(tmp_path / "chosen"):
        assert _dictionary_encoded(f) == {"id": False, "label": True, "small": True}
    assert pq.read_table(tmp_path / "chosen").num_rows == n
    dataferry.write_dataset(data, str(tmp_path / "asked"), partition_by=["k"], use_dictionary=True)
    for f in files(tmp_path / "asked"):
        assert all(_dictionary_encoded(f).values())


def test_format_options_dict_is_the_same_as_keywords(tmp_path):
    dataferry.write_dataset(table(), str(tmp_path / "o"), format_options={"compression": "gzip"})
    (f,) = files(tmp_path / "o")
    assert pq.ParquetFile(f).metadata.row_group(0).column(0).compression == "GZIP"


def test_rows_per_file_and_groups(tmp_path):
    r = dataferry.write_dataset(
        table(),
        str(tmp_path / "o"),
        partition_by=["k"],
        max_rows_per_file=2000,
        max_rows_per_group=500,
    )
    found = files(tmp_path / "o")
    assert r.files == len(found) == 6  # 5000 rows per partition, 2000 per file
    for f in found:
        meta = pq.ParquetFile(f).metadata
        assert meta.num_rows <= 2000
        assert all(meta.row_group(i).num_rows <= 500 for i in range(meta.num_row_groups))


def test_min_rows_per_group_buffers_small_pieces(tmp_path, monkeypatch):
    monkeypatch.setattr(task, "INBOX_BYTES", 1)  # each batch split and written as it comes
    monkeypatch.setattr(task, "ROUND_BYTES", 1)
    batches = [table(100).slice(i, 10) for i in range(0, 100, 10)]
    dataferry.write_dataset(iter(batches), str(tmp_path / "a"))
    dataferry.write_dataset(iter(batches), str(tmp_path / "b"), min_rows_per_group=50)
    (a,) = files(tmp_path / "a")
    (b,) = files(tmp_path / "b")
    assert pq.ParquetFile(a).metadata.num_row_groups == 10
    assert pq.ParquetFile(b).metadata.num_row_groups == 2


def test_max_open_files_closes_the_least_recent(tmp_path, monkeypatch):
    monkeypatch.setattr(task, "INBOX_BYTES", 1)  # each batch split and written as it comes
    monkeypatch.setattr(task, "ROUND_BYTES", 1)
    t = pa.table({"k": [f"p{i % 4}" for i in range(400)], "v": list(range(400))})
    batches = [t.slice(i, 40) for i in range(0, 400, 40)]  # every batch touches 4 partitions
    r = dataferry.write_dataset(
        iter(batches), str(tmp_path / "o"), partition_by=["k"], max_open_files=2
    )
    assert r.files > 4  # partitions had to reopen files
    back = pads.dataset(str(tmp_path / "o"), partitioning="hive").to_table()
    assert sorted(back.column("v").to_pylist()) == list(range(400))


def test_basename_template(tmp_path):
    dataferry.write_dataset(
        table(),
        str(tmp_path / "o"),
        partition_by=["k"],
        tasks=2,
        basename_template="data-{i}.parquet",
    )
    names = sorted(f.name for f in files(tmp_path / "o"))
    assert all(n.startswith("data-") and n.endswith(".parquet") for n in names)
    assert len(set(names)) == len(names) >= 2
    with pytest.raises(ConfigError, match=r"must contain '\{i\}'"):
        dataferry.write_dataset(table(), str(tmp_path / "x"), basename_template="data.parquet")


def test_existing_data_behavior_is_pyarrows_name_for_the_modes(tmp_path):
    dest = str(tmp_path / "o")
    dataferry.write_dataset(table(100), dest)
    with pytest.raises(DestinationError):
        dataferry.write_dataset(table(100), dest, existing_data_behavior="error")
    dataferry.write_dataset(table(100), dest, existing_data_behavior="overwrite_or_ignore")
    assert pads.dataset(dest).count_rows() == 200
    dataferry.write_dataset(table(100), dest, existing_data_behavior="delete_matching")
    assert pads.dataset(dest).count_rows() == 100
    with pytest.raises(ConfigError, match="not both"):
        dataferry.write_dataset(table(), dest, mode="append", existing_data_behavior="error")


@pytest.mark.parametrize(
    "kwargs, named",
    [
        ({"compresion": "zstd"}, "compresion"),
        ({"max_rows_per_file": -1}, "max_rows_per_file"),
        ({"max_memory": 0}, "max_memory"),
        ({"target_file_size": "big"}, "target_file_size"),
        ({"min_rows_per_group": 10, "max_rows_per_group": 5}, "min_rows_per_group"),
        ({"format": "orc"}, "orc"),
        ({"mode": "replace"}, "replace"),
        ({"existing_data_behavior": "keep"}, "keep"),
        ({"compression": "nope"}, "nope"),
    ],
)
def test_bad_options_are_named_before_anything_is_written(tmp_path, kwargs, named):
    with pytest.raises(ConfigError, match=named):
        dataferry.write_dataset(table(), str(tmp_path / "o"), **kwargs)
    assert (
        not any(p.is_file() for p in (tmp_path / "o").rglob("*"))
        if (tmp_path / "o").exists()
        else True
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"partiton_by": ["k"]}, "unknown option 'partiton_by'; did you mean 'partition_by'?"),
        ({"compresion": "zstd"}, "unknown option 'compresion'; did you mean 'compression'?"),
        ({"max_rows_per_fil": 10}, "did you mean 'max_rows_per_file'?"),
        ({"row_group_size": "1000"}, "row_group_size must be an integer >= 1, got '1000'"),
    ],
)
def test_a_misspelled_or_mistyped_option_says_what_was_meant(tmp_path, kwargs, message):
    with pytest.raises(ConfigError) as e:
        dataferry.write_dataset(table(), str(tmp_path / "o"), **kwargs)
    assert message in str(e.value)
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").rglob("*.parquet"))


def test_a_protocol_whose_file_system_is_not_installed_names_the_extra(tmp_path):
    import importlib.util

    if importlib.util.find_spec("gcsfs") is not None:
        pytest.skip("gcsfs is installed")
    from dataferry.extras import MissingDependency

    with pytest.raises(MissingDependency, match=r"pip install 'dataferry\[gcs\]'"):
        dataferry.write_dataset(table(10), "gs://bucket/out")


def test_signature_is_real_and_documented():
    sig = inspect.signature(dataferry.write_dataset)
    for name in (
        "partition_by",
        "filesystem",
        "storage_options",
        "max_rows_per_file",
        "min_rows_per_group",
        "max_rows_per_group",
        "max_open_files",
        "basename_template",
        "existing_data_behavior",
        "target_file_size",
        "max_memory",
        "format_options",
    ):
        assert name in sig.parameters, name
        assert name in (dataferry.write_dataset.__doc__ or ""), name
    assert "Parameters\n" in dataferry.write_dataset.__doc__


@pytest.mark.parametrize("name", ["partition_by", "partitioning", "partition_on", "partition_cols"])
def test_every_entry_point_takes_every_librarys_name_for_the_partition_columns(name, tmp_path):
    """dataferry's, pyarrow's, Dask's and Ray's names, at each entry point: its own by name,
    the others as aliases; two at once is refused by their names."""
    import dask.dataframe as dd

    import dataferry.dask as fdask
    from dataferry.ray import CommitDatasink

    table = pa.table({"x": [1, 2], "d": ["a", "b"]})
    out = tmp_path / "w"
    dataferry.write_dataset(table, out, **{name: ["d"]})
    assert sorted(p.name for p in out.iterdir()) == ["_SUCCESS", "d=a", "d=b"]
    ddf = dd.from_pandas(table.to_pandas(), npartitions=1)
    out = tmp_path / "dask"
    fdask.to_parquet(ddf, out, compute_kwargs={"scheduler": "sync"}, **{name: ["d"]})
    assert sorted(p.name for p in out.iterdir()) == ["_SUCCESS", "d=a", "d=b"]
    assert CommitDatasink(tmp_path / "ray", **{name: ["d"]}).partition_cols == ("d",)
    other = "partition_cols" if name != "partition_cols" else "partition_on"
    with pytest.raises(ConfigError, match=f"give .*{name}.* or .*{other}|{other}.* or .*{name}"):
        dataferry.write_dataset(table, tmp_path / "both", **{name: ["d"], other: ["d"]})
