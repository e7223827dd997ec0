"""In-flight names: how an attempt's data file is named until the job commit publishes it.

An attempt writes `day=a/part-0.parquet` as `day=a/part-0.parquet.inflight` under its hidden
work directory. The hidden directory keeps it from pyarrow, pandas, Dask and Ray (they skip
`_` and `.` names); the suffix keeps it from the globs polars and DuckDB users write
(`dest/**/*.parquet` descends into hidden directories). The committer that publishes the file
gives it back its own name.
"""

from __future__ import annotations

INFLIGHT_SUFFIX = ".inflight"


def inflight_name(relpath: str) -> str:
    """The name an attempt writes `relpath` under."""
    return relpath + INFLIGHT_SUFFIX


def published_name(relpath: str) -> str:
    """The name a file written as `inflight_name(x)` is published as (`x`); other names are
    published as they are (files that tasks wrote themselves, or a Hadoop job's)."""
    if relpath.endswith(INFLIGHT_SUFFIX):
        return relpath[: -len(INFLIGHT_SUFFIX)]
    return relpath
