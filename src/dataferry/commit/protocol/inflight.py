"""In-flight names: how an attempt's data file is named until the job commit publishes it.

An attempt writes `day=a/part-0.parquet` as `day=a/part-0.parquet.inflight` under its hidden
work directory. The hidden directory keeps it from pyarrow, pandas, Dask and Ray (they skip
`_` and `.` names); the suffix keeps it from the globs polars and DuckDB users write
(`dest/**/*.parquet` descends into hidden directories). The committer that publishes the file
gives it back its own name.

A committer may also name files flat: the whole relative path in one name,
`day=a%2Fpart-0.parquet.flat.inflight` (`%` and `/` escaped as `%25` and `%2F`), directly in
the attempt's directory. An attempt that writes into 400 partitions then makes one directory,
not 400: its task commit lists one directory, and its job commit removes one (on a local disk
each removed directory waits on the file system's journal). `unflatten` gives such a name
back its place in the tree.
"""

from __future__ import annotations

from ...store.paths import fits_one_name

INFLIGHT_SUFFIX = ".inflight"
FLAT_SUFFIX = ".flat" + INFLIGHT_SUFFIX


def inflight_name(relpath: str) -> str:
    """The name an attempt writes `relpath` under."""
    return relpath + INFLIGHT_SUFFIX


def flat_inflight_name(relpath: str) -> str | None:
    """`relpath` in flight as one name; None where that name is too long for one (the file
    then keeps its place in the tree, under `inflight_name`)."""
    name = relpath.replace("%", "%25").replace("/", "%2F") + FLAT_SUFFIX
    return name if fits_one_name(name) else None


def unflatten(path: str) -> str:
    """A flat in-flight name (the last part of `path`) at its place in the tree, still in
    flight: `x/a%2Fb.flat.inflight` is `x/a/b.inflight`; other paths are as they are."""
    parent, _, name = path.rpartition("/")
    if not name.endswith(FLAT_SUFFIX):
        return path
    # `%` only ever starts an escape here, so `%2F` then `%25` replaced in turn is the one
    # left-to-right unescaping (as `re.sub` did, at a third of its cost: a manifest task
    # commit does this for each file)
    tree = name[: -len(FLAT_SUFFIX)]
    if "%" in tree:
        tree = tree.replace("%2F", "/").replace("%25", "%")
    return f"{parent}/{tree}{INFLIGHT_SUFFIX}" if parent else tree + INFLIGHT_SUFFIX


def published_name(relpath: str) -> str:
    """The name a file written as `inflight_name(x)` or `flat_inflight_name(x)` is published
    as (`x`); other names are published as they are (files that tasks wrote themselves, or a
    Hadoop job's)."""
    relpath = unflatten(relpath)
    if relpath.endswith(INFLIGHT_SUFFIX):
        return relpath[: -len(INFLIGHT_SUFFIX)]
    return relpath
