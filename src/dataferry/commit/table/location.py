"""Where a table's store is, in the words of the format libraries (deltalake, pyiceberg):
a local path, or an `s3://` URL with the object-store options of the store's own client.

The libraries write their logs and metadata themselves, so they are given the location the
dataferry store stands for (through its wrappers: statistics, latency models, a sub-tree),
never a second set of credentials."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ...errors import ConfigError
from ...store import Store, paths


@dataclass(frozen=True)
class TableLocation:
    uri: str  # a local path or an s3:// URL
    storage_options: dict[str, str] = field(default_factory=dict, repr=False)
    local: bool = False


def table_location(store: Store, what: str = "a table") -> TableLocation:
    """The location `store` stands for; ConfigError for a store the libraries cannot reach
    (`memory://`, a file system object of another kind)."""
    prefix = ""
    inner = store
    while True:
        sub = getattr(inner, "prefix", None)
        if type(inner).__name__ == "SubStore" and sub is not None:
            prefix = paths.join(sub, prefix)
        nxt = getattr(inner, "inner", None)
        if nxt is None:
            break
        inner = nxt
    kind = type(inner).__name__
    if kind == "LocalStore" or (kind == "FsspecStore" and getattr(inner, "_local", False)):
        root = inner.root
        return TableLocation(paths_join_os(root, prefix), {}, local=True)
    if kind == "S3Store":
        uri = f"s3://{paths.join(inner.bucket, inner.prefix, prefix)}"  # type: ignore[attr-defined]
        return TableLocation(uri, s3_options(inner))
    raise ConfigError(
        f"{what} cannot be written to {store.describe()}: the table's own library reaches "
        "local disk and s3:// (give a path or an s3:// URL)"
    )


def paths_join_os(root: str, relpath: str) -> str:
    return root.rstrip("/") + ("/" + relpath if relpath else "")


def s3_options(store: object) -> dict[str, str]:
    """The object_store (Rust) options for an S3Store's client: endpoint, region and keys."""
    kwargs = dict(store._spec.client_kwargs)
    options: dict[str, str] = {}
    # the endpoint as boto3 finds it: the client's option, else the environment's
    endpoint = (
        kwargs.get("endpoint_url")
        or os.environ.get("AWS_ENDPOINT_URL_S3")
        or os.environ.get("AWS_ENDPOINT_URL")
    )
    if endpoint:
        options["AWS_ENDPOINT_URL"] = str(endpoint)
        if str(endpoint).startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
    for key, name in (
        ("aws_access_key_id", "AWS_ACCESS_KEY_ID"),
        ("aws_secret_access_key", "AWS_SECRET_ACCESS_KEY"),
        ("aws_session_token", "AWS_SESSION_TOKEN"),
        ("region_name", "AWS_REGION"),
    ):
        if kwargs.get(key):
            options[name] = str(kwargs[key])
    options.setdefault("AWS_REGION", "us-east-1")
    return options
