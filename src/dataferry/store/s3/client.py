"""How dataferry makes a boto3 S3 client: from boto3 client options and s3fs-style
`storage_options` (translated to boto3's names), one client per process, set of options and
AWS environment, with every HTTP request counted in the statistics of the store that sent it.
"""

from __future__ import annotations

import copy
import os
import threading
from collections.abc import Hashable, Mapping
from typing import Any

from ...errors import ConfigError

_CLIENTS: dict[tuple, Any] = {}
_ENVIRONMENT = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
)
_CLIENTS_LOCK = threading.Lock()
# the S3Store whose operation this thread is running: boto3 sends on the calling thread, so
# each HTTP request is counted in the statistics of the store that caused it
_CURRENT = threading.local()
_READ_METHODS = frozenset({"GET", "HEAD"})


def _count_request(request: Any = None, **_: Any) -> None:
    """botocore `before-send` hook: one count per HTTP request sent, retries included."""
    store = getattr(_CURRENT, "store", None)
    if store is not None:
        kind = "read" if getattr(request, "method", "") in _READ_METHODS else "write"
        store.stats.incr("store_requests")
        store.stats.incr(f"store_requests_{kind}")
        sent = _body_size(request)
        if sent:
            store.stats.incr("store_bytes_write", sent)


def _body_size(request: Any) -> int:
    """Bytes a request sends (PUTs and parts), from its Content-Length; 0 without one."""
    try:
        return int(getattr(request, "headers", {}).get("Content-Length") or 0)
    except (TypeError, ValueError):
        return 0


# --- options: s3fs's storage_options as boto3 client options --------------------------------

# s3fs's storage option -> the boto3 client keyword it becomes (the rest are handled apart)
_S3FS_CLIENT_NAMES = {
    "key": "aws_access_key_id",
    "username": "aws_access_key_id",  # s3fs's alias of key
    "secret": "aws_secret_access_key",
    "password": "aws_secret_access_key",  # s3fs's alias of secret
    "token": "aws_session_token",
    "endpoint_url": "endpoint_url",
    "use_ssl": "use_ssl",
}
S3_STORAGE_OPTIONS = (*_S3FS_CLIENT_NAMES, "client_kwargs", "config_kwargs", "anon", "profile")
# what boto3's Session.client("s3", ...) takes besides `config` (given as config_kwargs)
BOTO3_CLIENT_KWARGS = (
    "region_name",
    "endpoint_url",
    "verify",
    "use_ssl",
    "api_version",
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
    "aws_account_id",
)
_CREDENTIAL_KWARGS = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")


class ClientSpec:
    """Everything that makes one boto3 S3 client: keyword arguments of `Session.client`, those
    of botocore's `Config` (on top of our pool and retry defaults), a profile, unsigned
    requests. Plain data (nested dicts allowed): it pickles, and `key()` is its canonical,
    hashable form."""

    __slots__ = ("anon", "client_kwargs", "config", "config_kwargs", "profile")

    def __init__(
        self,
        client_kwargs: dict[str, Any],
        config_kwargs: dict[str, Any] | None = None,
        profile: str | None = None,
        anon: bool = False,
        config: Any = None,
    ) -> None:
        self.client_kwargs = client_kwargs
        self.config_kwargs = config_kwargs or {}
        self.profile = profile
        self.anon = anon
        self.config = config  # a botocore Config passed as a boto3 option `config=`

    def key(self) -> Hashable:
        return freeze(
            (self.client_kwargs, self.config_kwargs, self.profile, self.anon, self.config)
        )

    def botocore_config(self) -> Any:
        import botocore
        from botocore.config import Config

        conf = Config(max_pool_connections=64, retries={"max_attempts": 4, "mode": "standard"})
        if self.config is not None:
            conf = conf.merge(self.config)
        if self.config_kwargs:  # a copy: botocore rewrites `retries` in place
            conf = conf.merge(Config(**copy.deepcopy(self.config_kwargs)))
        if self.anon:
            conf = conf.merge(Config(signature_version=botocore.UNSIGNED))
        return conf


def freeze(value: Any) -> Hashable:
    """A canonical, hashable form of nested options: dicts become sorted tuples of pairs,
    lists and tuples tuples, sets frozensets; an unhashable leaf is named by its type and
    repr."""
    if isinstance(value, Mapping):
        items = ((str(k), freeze(v)) for k, v in value.items())
        return ("__dict__", tuple(sorted(items, key=lambda kv: kv[0])))
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    if isinstance(value, set | frozenset):
        return frozenset(freeze(v) for v in value)
    try:
        hash(value)
    except TypeError:
        return ("__unhashable__", type(value).__qualname__, repr(value))
    return value


def client_spec(options: Mapping[str, Any], storage_options: Mapping[str, Any]) -> ClientSpec:
    """The client for boto3 client options (`endpoint_url=`, `region_name=`, ...) plus
    s3fs-style storage options; raises ConfigError for an option it does not know, a value of
    the wrong type, or one setting given twice with different values."""
    client_kwargs = dict(options)
    config = client_kwargs.pop("config", None)
    origin = {k: f"option {k!r}" for k in client_kwargs}

    def put(name: str, value: Any, where: str) -> None:
        if name in client_kwargs and client_kwargs[name] != value:
            raise ConfigError(
                f"S3 {name} is set twice with different values: by {origin[name]} and by {where}"
            )
        client_kwargs[name] = value
        origin[name] = where

    unknown = sorted(k for k in storage_options if k not in S3_STORAGE_OPTIONS)
    if unknown:
        raise ConfigError(
            f"S3 storage option {unknown[0]!r} is not supported; accepted: "
            f"{', '.join(S3_STORAGE_OPTIONS)} (s3fs's names)"
        )
    nested = storage_options.get("client_kwargs") or {}
    if not isinstance(nested, Mapping):
        raise ConfigError(f"storage option 'client_kwargs' must be a dict, not {nested!r}")
    bad = sorted(k for k in nested if k not in BOTO3_CLIENT_KWARGS)
    if bad:
        hint = " (give botocore Config settings as storage option 'config_kwargs')"
        raise ConfigError(
            f"client_kwargs {bad[0]!r} is not a boto3 S3 client option; accepted: "
            f"{', '.join(BOTO3_CLIENT_KWARGS)}" + (hint if "config" in bad else "")
        )
    for k, v in nested.items():
        put(k, v, f"storage option client_kwargs[{k!r}]")
    for k, name in _S3FS_CLIENT_NAMES.items():
        if k in storage_options and storage_options[k] is not None:
            put(name, storage_options[k], f"storage option {k!r}")

    config_kwargs = storage_options.get("config_kwargs") or {}
    if not isinstance(config_kwargs, Mapping):
        raise ConfigError(f"storage option 'config_kwargs' must be a dict, not {config_kwargs!r}")
    if config_kwargs:
        from botocore.config import Config

        try:
            Config(**copy.deepcopy(config_kwargs))
        except (TypeError, ValueError) as e:
            raise ConfigError(
                f"storage option config_kwargs: botocore Config refused it: {e}"
            ) from None
    anon = storage_options.get("anon", False)
    if not isinstance(anon, bool):
        raise ConfigError(f"storage option 'anon' must be True or False, not {anon!r}")
    profile = storage_options.get("profile")
    if profile is not None and not isinstance(profile, str):
        raise ConfigError(f"storage option 'profile' must be a profile name, not {profile!r}")
    if anon and (profile or any(client_kwargs.get(k) for k in _CREDENTIAL_KWARGS)):
        raise ConfigError(
            "storage option anon=True sends unsigned requests: drop key/secret/token/profile, "
            "or drop anon"
        )
    if profile:
        import boto3
        from botocore.exceptions import ProfileNotFound

        try:
            boto3.session.Session(profile_name=profile)
        except ProfileNotFound as e:
            raise ConfigError(f"storage option 'profile': {e}") from None
    return ClientSpec(client_kwargs, copy.deepcopy(dict(config_kwargs)), profile, anon, config)


def s3_client(spec: ClientSpec) -> Any:
    """One boto3 client per process, set of options and AWS environment (clients are
    thread-safe; the environment is part of the key, so pointing the variables at another
    endpoint is not answered by a client of the old one)."""
    key = (spec.key(), tuple(os.environ.get(v) for v in _ENVIRONMENT))
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            try:
                import boto3
                from botocore.exceptions import BotoCoreError
            except ImportError:
                raise ConfigError("s3:// needs boto3: pip install 'dataferry[s3]'") from None

            try:
                session = boto3.session.Session(profile_name=spec.profile)
                client = session.client("s3", config=spec.botocore_config(), **spec.client_kwargs)
            except (BotoCoreError, TypeError, ValueError) as e:
                raise ConfigError(f"cannot make an S3 client from these options: {e}") from None
            client.meta.events.register("before-send.s3", _count_request)
            _CLIENTS[key] = client
        return client
