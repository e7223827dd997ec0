"""One S3 store whatever the user hands in: an `s3fs.S3FileSystem` or a
`pyarrow.fs.S3FileSystem` becomes the storage options of dataferry's own S3 store, built from
the object's own endpoint and credentials.

Through their own file system interfaces neither says it has multipart upload or a
conditional create, so a store over them would get a committer whose partial output readers
see. The S3 store has both, whichever door the user came in by: the same store, the same
capabilities, the same committer as `s3://bucket/path` with `storage_options`.

A setting that changes what is written or who pays (requester pays, server-side encryption
arguments, an assumed role, a proxy) and has no equivalent here is refused by name rather
than dropped; settings of the object's own caches are ignored.
"""

from __future__ import annotations

from typing import Any

from ...errors import ConfigError

# s3fs settings that only tune s3fs's own caching, buffering or event loop
_S3FS_IGNORED = frozenset(
    {
        "use_listings_cache",
        "listings_expiry_time",
        "max_paths",
        "skip_instance_cache",
        "default_block_size",
        "default_fill_cache",
        "default_cache_type",
        "cache_regions",
        "asynchronous",
        "loop",
        "max_concurrency",
        "fixed_upload_size",
        "version_aware",
        "use_ssl",  # carried below with the client's own name
    }
)
_S3FS_CARRIED = ("key", "secret", "token", "endpoint_url", "client_kwargs", "config_kwargs")
_S3FS_ALIASES = {"username": "key", "password": "secret"}


def is_s3fs(fs: Any) -> bool:
    """An fsspec file system speaking s3:// (s3fs's S3FileSystem or a subclass)."""
    protocol = getattr(fs, "protocol", ())
    protocols = (protocol,) if isinstance(protocol, str) else tuple(protocol or ())
    return "s3" in protocols or "s3a" in protocols


def s3fs_storage_options(fs: Any) -> dict[str, Any]:
    """The storage options of the S3 store for an s3fs file system: the keywords it was made
    with (`fs.storage_options`), less its cache settings. ConfigError for one that cannot be
    carried over."""
    given = dict(getattr(fs, "storage_options", {}) or {})
    for alias, name in _S3FS_ALIASES.items():
        if alias in given:
            given.setdefault(name, given.pop(alias))
    out: dict[str, Any] = {}
    for name, value in given.items():
        if name in _S3FS_CARRIED:
            if value is not None:
                out[name] = value
        elif name == "anon":
            out["anon"] = bool(value)
        elif name == "profile":
            if value:
                out["profile"] = value
        elif name == "use_ssl":
            if value is False:
                out.setdefault("client_kwargs", {})
                out["client_kwargs"] = {**out["client_kwargs"], "use_ssl": False}
        elif name not in _S3FS_IGNORED:
            raise ConfigError(
                f"filesystem=s3fs.S3FileSystem(..., {name}=...): dataferry writes S3 through "
                f"its own client and cannot carry {name!r} over; pass the destination as an "
                "s3:// URL with storage_options, or make the file system without it"
            )
    return out


def is_arrow_s3(fs: Any) -> bool:
    try:
        from pyarrow.fs import S3FileSystem
    except ImportError:  # pyarrow built without S3
        return False
    return isinstance(fs, S3FileSystem)


def arrow_s3_storage_options(fs: Any) -> dict[str, Any]:
    """The storage options of the S3 store for a `pyarrow.fs.S3FileSystem`, read from the
    arguments it was made with (its pickled form). Empty credentials mean the environment's,
    as for pyarrow itself."""
    try:
        _, (args,) = fs.__reduce__()
    except (TypeError, ValueError) as e:
        raise ConfigError(f"cannot read the settings of {fs!r}: {e}") from None
    if not isinstance(args, dict):
        raise ConfigError(f"cannot read the settings of {fs!r}: unexpected form {args!r:.80}")
    for name in ("role_arn", "external_id"):
        if args.get(name):
            raise ConfigError(
                f"filesystem=pyarrow.fs.S3FileSystem({name}=...): dataferry's S3 client does "
                "not assume roles itself; assume it in the environment (AWS_PROFILE with "
                "role_arn, or credentials) and pass the destination as an s3:// URL"
            )
    proxy = args.get("proxy_options") or {}
    if isinstance(proxy, dict) and proxy.get("host"):
        raise ConfigError(
            "filesystem=pyarrow.fs.S3FileSystem(proxy_options=...): give the proxy as "
            "storage_options={'config_kwargs': {'proxies': {...}}} with an s3:// URL"
        )
    out: dict[str, Any] = {}
    if args.get("anonymous"):
        out["anon"] = True
    for ours, theirs in (
        ("key", "access_key"),
        ("secret", "secret_key"),
        ("token", "session_token"),
    ):
        if args.get(theirs):
            out[ours] = args[theirs]
    client: dict[str, Any] = {}
    if args.get("region"):
        client["region_name"] = args["region"]
    endpoint = args.get("endpoint_override") or ""
    scheme = args.get("scheme") or "https"
    if endpoint:
        out["endpoint_url"] = endpoint if "://" in endpoint else f"{scheme}://{endpoint}"
    elif scheme == "http":
        client["use_ssl"] = False
    if args.get("tls_ca_file_path"):
        client["verify"] = args["tls_ca_file_path"]
    if client:
        out["client_kwargs"] = client
    config: dict[str, Any] = {}
    for ours, theirs in (
        ("connect_timeout", "connect_timeout"),
        ("read_timeout", "request_timeout"),
    ):
        value = args.get(theirs)
        if isinstance(value, int | float) and value > 0:
            config[ours] = value
    if args.get("force_virtual_addressing"):
        config["s3"] = {"addressing_style": "virtual"}
    if config:
        out["config_kwargs"] = config
    return out


def s3_url(path: str) -> str:
    """`bucket/prefix`, `/bucket/prefix` or `s3://bucket/prefix` as an s3:// URL."""
    if "://" in path:
        scheme, rest = path.split("://", 1)
        if scheme not in ("s3", "s3a"):
            raise ConfigError(f"{path!r} is not a path in an S3 file system")
        path = rest
    path = path.strip("/")
    if not path:
        raise ConfigError(f"{path!r}: a path in an object store starts with a bucket")
    return f"s3://{path}"
