"""The one definition of a write: every entry point's arguments are translated onto
`WriteRequest` by its row in `ENTRY_POINTS`, and nowhere else.

A new argument of `dataferry.write_dataset`, `dataferry.dask.to_parquet`,
`dataferry.dask.write_dataset`, `dataferry.ray.CommitDatasink` or `dataferry.daft.CommitSink`
fails here until its row says where it goes."""

from __future__ import annotations

import inspect
from dataclasses import fields

import pytest

import dataferry.daft
import dataferry.dask
import dataferry.ray
from dataferry.dataset import options as opts
from dataferry.dataset.options import (
    ENTRY_POINTS,
    RUN,
    Choice,
    Flag,
    Loose,
    Refused,
    WriteOptions,
    WriteRequest,
    WriterOption,
    translate,
)
from dataferry.dataset.write import write_dataset
from dataferry.errors import ConfigError

SIGNATURES = {
    "write_dataset": write_dataset,
    "dask.to_parquet": dataferry.dask.to_parquet,
    "dask.write_dataset": dataferry.dask.write_dataset,
    "ray.CommitDatasink": dataferry.ray.CommitDatasink.__init__,
    "daft.CommitSink": dataferry.daft.CommitSink.__init__,
}
TARGETS = {f.name for f in fields(WriteRequest)} | {"format", "format_options", *opts.SIZE_OPTIONS}


def defaults(entry_point: str, **given):
    """The arguments an entry point's function sees (its locals on entry) for a call."""
    arguments = {}
    for name, p in inspect.signature(SIGNATURES[entry_point]).parameters.items():
        if p.kind is p.VAR_KEYWORD:
            arguments[name] = {}
        elif p.default is p.empty:
            arguments[name] = None
        else:
            arguments[name] = p.default
    arguments.update(given)
    return arguments


def test_every_entry_point_has_a_row():
    assert set(ENTRY_POINTS) == set(SIGNATURES)


@pytest.mark.parametrize("entry_point", sorted(SIGNATURES))
def test_every_argument_is_placed_in_the_one_definition(entry_point):
    row = ENTRY_POINTS[entry_point]
    params = inspect.signature(SIGNATURES[entry_point]).parameters
    missing = [n for n in params if n not in row]
    assert not missing, f"{entry_point}: arguments with no row entry: {missing}"
    for name in params:
        target = row[name]
        if isinstance(target, str):
            assert target in TARGETS, f"{entry_point}.{name} -> {target!r}: no such option"
        elif isinstance(target, (Flag, Choice)):
            assert target.to in TARGETS
        else:
            assert target is RUN or isinstance(target, (WriterOption, Loose, Refused)), target


@pytest.mark.parametrize("entry_point", sorted(SIGNATURES))
def test_every_write_option_is_reachable_from_each_entry_point(entry_point):
    """Each entry point can ask for every WriteOptions size and every write field it exposes:
    the sizes reach WriteOptions either by name or through the loose keywords."""
    row = ENTRY_POINTS[entry_point]
    params = inspect.signature(SIGNATURES[entry_point]).parameters
    named = {row[n] for n in params if isinstance(row[n], str)}
    loose = {s for n in params if isinstance(row[n], Loose) for s in row[n].sizes}
    wanted = {"max_rows_per_file", "max_rows_per_group", "basename_template", "target_file_size"}
    assert wanted <= named | loose
    assert {"dest", "partition_by", "committer", "committer_options"} <= named


def test_default_calls_ask_for_the_same_write():
    """Called with a destination only, every entry point asks for the same write (Dask's
    to_parquet keeps Dask's default compression, snappy, which is also pyarrow's)."""
    requests = {
        "write_dataset": translate("write_dataset", defaults("write_dataset", dest="out")),
        "dask.write_dataset": translate(
            "dask.write_dataset", defaults("dask.write_dataset", dest="out")
        ),
        "dask.to_parquet": translate("dask.to_parquet", defaults("dask.to_parquet", path="out")),
        "ray.CommitDatasink": translate(
            "ray.CommitDatasink", defaults("ray.CommitDatasink", path="out")
        ),
        "daft.CommitSink": translate("daft.CommitSink", defaults("daft.CommitSink", dest="out")),
    }
    plain = WriteRequest("out", options=WriteOptions())
    for name, request in requests.items():
        if name == "dask.to_parquet":
            assert request.options.format_options == {"compression": "snappy"}
            request = WriteRequest(**{**vars(request), "options": WriteOptions(), "mode_words": ()})
        assert request == plain, name


def test_dask_to_parquet_arguments_are_translated():
    request = translate(
        "dask.to_parquet",
        defaults(
            "dask.to_parquet",
            path="out",
            partition_on="day",
            overwrite=True,
            compression="zstd",
            storage_options={"anon": True},
            committer="manifest",
            committer_options={"threads": 4},
            kwargs={"max_rows_per_file": 10, "row_group_size": 5, "use_dictionary": False},
        ),
    )
    assert request.dest == "out" and request.partition_by == ("day",)
    assert request.mode == "overwrite" and request.committer == "manifest"
    assert request.storage_options == {"anon": True}
    assert request.committer_options == {"threads": 4}
    assert request.options.max_rows_per_file == 10 and request.options.max_rows_per_group == 5
    assert request.options.format_options == {"compression": "zstd", "use_dictionary": False}
    assert translate(
        "dask.to_parquet", defaults("dask.to_parquet", path="o", append=True)
    ).mode == ("append")


@pytest.mark.parametrize(
    ("given", "match"),
    [
        ({"append": True, "overwrite": True}, r"append=True or overwrite=True, not both"),
        ({"name_function": str}, "basename_template"),
        ({"custom_metadata": {"a": "b"}}, "custom_metadata"),
        ({"write_metadata_file": True}, "_metadata"),
        ({"engine": "fastparquet"}, "engine must be 'pyarrow' .*fastparquet"),
        ({"kwargs": {"no_such_option": 1}}, "no_such_option"),
    ],
)
def test_dask_to_parquet_refusals_name_dasks_arguments(given, match):
    with pytest.raises(ConfigError, match=match):
        translate("dask.to_parquet", defaults("dask.to_parquet", path="out", **given))


def test_aliases_given_twice_are_refused_in_the_callers_names():
    with pytest.raises(ConfigError, match="give partition_cols or partition_by, not both"):
        translate(
            "ray.CommitDatasink",
            defaults("ray.CommitDatasink", path="o", partition_cols=["a"], partition_by=["a"]),
        )
    with pytest.raises(ConfigError, match="give partition_by or partitioning, not both"):
        translate(
            "write_dataset",
            defaults("write_dataset", dest="o", partition_by=["a"], partitioning=["a"]),
        )
    with pytest.raises(ConfigError, match="give mode or existing_data_behavior, not both"):
        translate(
            "write_dataset",
            defaults("write_dataset", dest="o", mode="append", existing_data_behavior="error"),
        )
    assert (
        translate(
            "write_dataset",
            defaults("write_dataset", dest="o", existing_data_behavior="delete_matching"),
        ).mode
        == "overwrite-partitions"
    )


def test_mode_errors_are_told_in_the_callers_words():
    message = "destination x is not empty; write with mode='append' or mode='overwrite'"
    dask = translate("dask.to_parquet", defaults("dask.to_parquet", path="o"))
    assert dask.mode_words == (("append", "append=True"), ("overwrite", "overwrite=True"))
    reworded = opts.in_callers_words(dask.mode_words, message)
    assert reworded.endswith("write with append=True or overwrite=True")
    ray = translate("ray.CommitDatasink", defaults("ray.CommitDatasink", path="o"))
    assert opts.in_callers_words(ray.mode_words, message) == message
