"""deltalake's argument objects, in dataferry's terms: `WriterProperties` as the Parquet
writer's options of `write_dataset`, `CommitProperties` and `PostCommitHookProperties` as the
Delta committer's options (`DeltaConfig`). Read by attribute, so deltalake is not imported
here; what has no counterpart is refused naming the property.

    WriterProperties
        compression ("ZSTD(3)", ...)     compression, compression_level
        max_row_group_size               max_rows_per_group
        data_page_size_limit             data_page_size
        dictionary_page_size_limit       dictionary_pagesize_limit
        data_page_row_count_limit        max_rows_per_page
        write_batch_size                 write_batch_size
        default_column_properties        use_dictionary (dictionary_enabled),
                                         write_statistics (statistics_enabled "NONE": False)
    CommitProperties
        custom_metadata                  custom_metadata (in the commit's commitInfo)
        max_commit_retries               commit_retries
        app_transactions                 app_transactions (beside the job's own)
    PostCommitHookProperties
        create_checkpoint, cleanup_expired_logs   the same names
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import ConfigError

_CODEC = re.compile(r"^([A-Z0-9_]+)(?:\((-?\d+)\))?$")
# parquet-rs' codec names -> pyarrow's
_CODECS = {
    "UNCOMPRESSED": "none",
    "SNAPPY": "snappy",
    "GZIP": "gzip",
    "BROTLI": "brotli",
    "LZ4": "lz4",
    "LZ4_RAW": "lz4",
    "ZSTD": "zstd",
}
_SIZES = {
    "max_row_group_size": "max_rows_per_group",
    "data_page_size_limit": "data_page_size",
    "dictionary_page_size_limit": "dictionary_pagesize_limit",
    "data_page_row_count_limit": "max_rows_per_page",
    "write_batch_size": "write_batch_size",
}


def writer_options(props: Any) -> dict[str, Any]:
    """`write_dataset` keywords for a `deltalake.WriterProperties` (None: none)."""
    if props is None:
        return {}
    out: dict[str, Any] = {}
    codec = getattr(props, "compression", None)
    if codec is not None:
        m = _CODEC.match(str(codec).upper())
        if m is None or m.group(1) not in _CODECS:
            raise ConfigError(f"writer_properties compression {codec!r} is not a Parquet codec")
        out["compression"] = _CODECS[m.group(1)]
        if m.group(2) is not None:
            out["compression_level"] = int(m.group(2))
    for name, ours in _SIZES.items():
        value = getattr(props, name, None)
        if value is not None:
            out[ours] = int(value)
    if getattr(props, "statistics_truncate_length", None) is not None:
        raise ConfigError(
            "writer_properties statistics_truncate_length has no counterpart in pyarrow's "
            "Parquet writer, which dataferry's tasks write with: leave it out"
        )
    if getattr(props, "column_properties", None):
        raise ConfigError(
            "writer_properties column_properties (per column) are not taken yet: give "
            "default_column_properties, or pyarrow's use_dictionary=[...] and "
            "write_statistics=[...] naming the columns"
        )
    default = getattr(props, "default_column_properties", None)
    if default is not None:
        out.update(_column_defaults(default))
    return out


def _column_defaults(column: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if getattr(column, "dictionary_enabled", None) is not None:
        out["use_dictionary"] = bool(column.dictionary_enabled)
    statistics = getattr(column, "statistics_enabled", None)
    if statistics is not None:
        out["write_statistics"] = str(statistics).upper() != "NONE"
    for name in ("bloom_filter_properties", "encoding"):
        if getattr(column, name, None) is not None:
            raise ConfigError(
                f"writer_properties default_column_properties {name} is not taken yet: use "
                "pyarrow's bloom_filter_options= or column_encoding= instead"
            )
    return out


def commit_options(props: Any) -> dict[str, Any]:
    """The Delta committer's options for a `deltalake.CommitProperties` (None: none)."""
    if props is None:
        return {}
    out: dict[str, Any] = {}
    if getattr(props, "custom_metadata", None):
        out["custom_metadata"] = dict(props.custom_metadata)
    if getattr(props, "max_commit_retries", None) is not None:
        out["commit_retries"] = int(props.max_commit_retries)
    transactions = getattr(props, "app_transactions", None) or []
    if transactions:
        out["app_transactions"] = tuple(
            (str(t.app_id), int(t.version), t.last_updated) for t in transactions
        )
    return out


def post_commit_options(props: Any) -> dict[str, Any]:
    """The Delta committer's options for a `deltalake.PostCommitHookProperties`."""
    if props is None:
        return {}
    return {
        "create_checkpoint": getattr(props, "create_checkpoint", None),
        "cleanup_expired_logs": getattr(props, "cleanup_expired_logs", None),
    }


__all__ = ["commit_options", "post_commit_options", "writer_options"]
