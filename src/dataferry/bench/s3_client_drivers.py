"""The S3 client libraries that `bench commit --clients` compares, one small driver each.

A driver replays the requests of a job commit at a bounded concurrency and counts the HTTP
requests it sends:
- `boto3`: the client dataferry's `S3Store` makes (its options, pool and retry settings), called
  from the house's `IOPool`; requests are counted by a botocore `before-send` hook, so retries
  count too.
- `s3fs`: the aiobotocore client s3fs makes (`S3FileSystem(asynchronous=True).s3`, with the
  same pool size and retry settings as dataferry's boto3 client), driven by `asyncio.gather`
  over as many workers as the pool has threads; counted by the same hook.
- `obstore`: Rust object_store's S3 client (async calls, the same number of workers). It has
  no request hook, so each call adds the requests it makes: one per copy, delete or complete,
  one per page of a listing. obstore has no multipart API by upload id, so it cannot complete
  the uploads tasks initiated (the magic committer's job commit).

Every listing is one flat ListObjectsV2 listing of a prefix (`LIST_PAGE` keys a page).
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from ..errors import ConfigError
from ..store.pool import IOPool

T = TypeVar("T")

LIST_PAGE = 1000  # keys in one ListObjectsV2 page: S3's default and its maximum
POOL_CONNECTIONS = 64  # dataferry's boto3 client: botocore max_pool_connections
RETRIES = {"max_attempts": 4, "mode": "standard"}  # dataferry's boto3 client's retry settings


@dataclass(frozen=True)
class S3Target:
    """Where the clients send: a bucket, an endpoint (None: AWS's) and credentials."""

    bucket: str
    endpoint: str | None = None
    key: str | None = None
    secret: str | None = None
    region: str = "us-east-1"

    @classmethod
    def from_env(cls, bucket: str) -> S3Target:
        """The bucket with endpoint, credentials and region from the ordinary AWS variables."""
        env = os.environ
        return cls(
            bucket,
            env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL"),
            env.get("AWS_ACCESS_KEY_ID"),
            env.get("AWS_SECRET_ACCESS_KEY"),
            env.get("AWS_DEFAULT_REGION") or env.get("AWS_REGION") or "us-east-1",
        )

    def boto3_options(self) -> dict[str, Any]:
        """boto3 client options (those not set are left to boto3's own lookup)."""
        options = {
            "endpoint_url": self.endpoint,
            "aws_access_key_id": self.key,
            "aws_secret_access_key": self.secret,
            "region_name": self.region,
        }
        return {k: v for k, v in options.items() if v is not None}


@dataclass(frozen=True)
class Upload:
    """A multipart upload a task initiated, with the ETag of its one part."""

    key: str
    upload_id: str
    etag: str


def list_pages(keys: int) -> int:
    """Requests of one flat listing of `keys` keys (an empty listing is one request too)."""
    return max(1, math.ceil(keys / LIST_PAGE))


class Driver(ABC):
    """One client library: replay a job commit's requests and count what was sent."""

    name: ClassVar[str]
    library: ClassVar[str]  # the distribution whose version is reported
    # scenario -> why this library cannot run it
    unsupported: ClassVar[dict[str, str]] = {}

    def __init__(self, target: S3Target, threads: int) -> None:
        self.target = target
        self.threads = max(1, threads)
        self._sent = 0
        self._lock = threading.Lock()

    @property
    def sent(self) -> int:
        """HTTP requests sent so far."""
        return self._sent

    def _count(self, n: int = 1, **_: Any) -> None:
        with self._lock:
            self._sent += n

    def _hook(self, **_: Any) -> None:
        """botocore `before-send` handler: one count per request sent, retries included."""
        self._count()

    @abstractmethod
    def complete(self, uploads: Sequence[Upload], prefix: str) -> int:
        """Complete every upload, then list `prefix`; returns the keys listed."""

    @abstractmethod
    def rename(self, pairs: Sequence[tuple[str, str]], prefix: str) -> int:
        """Copy each source to its destination and delete the source, then list `prefix`;
        returns the keys listed."""

    @abstractmethod
    def close(self) -> None:
        """Let go of connections and hooks."""


class Boto3Driver(Driver):
    name = "boto3"
    library = "boto3"

    def __init__(self, target: S3Target, threads: int) -> None:
        super().__init__(target, threads)
        from ..store.s3.store import S3Store

        try:
            import boto3  # noqa: F401
        except ImportError:
            raise ImportError("boto3 is not installed") from None
        self.client = S3Store(f"s3://{target.bucket}", **target.boto3_options()).client
        self._hook_id = f"dataferry-bench-clients-{id(self)}"
        self.client.meta.events.register("before-send.s3", self._hook, unique_id=self._hook_id)
        self._pool = IOPool(self.threads, name="bench-boto3")

    def complete(self, uploads: Sequence[Upload], prefix: str) -> int:
        def one(u: Upload) -> None:
            self.client.complete_multipart_upload(
                Bucket=self.target.bucket,
                Key=u.key,
                UploadId=u.upload_id,
                MultipartUpload={"Parts": [{"ETag": u.etag, "PartNumber": 1}]},
            )

        self._pool.for_each(one, uploads)
        return self._list(prefix)

    def rename(self, pairs: Sequence[tuple[str, str]], prefix: str) -> int:
        bucket = self.target.bucket

        def one(pair: tuple[str, str]) -> None:
            src, dst = pair
            self.client.copy_object(
                Bucket=bucket, Key=dst, CopySource={"Bucket": bucket, "Key": src}
            )
            self.client.delete_object(Bucket=bucket, Key=src)

        self._pool.for_each(one, pairs)
        return self._list(prefix)

    def _list(self, prefix: str) -> int:
        pager = self.client.get_paginator("list_objects_v2")
        pages = pager.paginate(Bucket=self.target.bucket, Prefix=prefix)
        return sum(len(page.get("Contents", [])) for page in pages)

    def close(self) -> None:
        self._pool.close()
        self.client.meta.events.unregister("before-send.s3", unique_id=self._hook_id)


class _AsyncDriver(Driver):
    """A driver whose client is async: one event loop for the driver's life (so connections
    are kept between runs), `threads` workers sharing the items."""

    def __init__(self, target: S3Target, threads: int) -> None:
        super().__init__(target, threads)
        self._loop = asyncio.new_event_loop()

    def _run(self, coro: Awaitable[T]) -> T:
        return self._loop.run_until_complete(coro)

    async def _each(self, fn: Callable[[Any], Awaitable[object]], items: Iterable[Any]) -> None:
        """`fn` on every item, at most `threads` at once."""
        source = iter(items)

        async def worker() -> None:
            for item in source:  # one loop thread: workers take turns on the iterator
                await fn(item)

        await asyncio.gather(*(worker() for _ in range(self.threads)))

    def close(self) -> None:
        self._loop.close()


class S3fsDriver(_AsyncDriver):
    name = "s3fs"
    library = "s3fs"

    def __init__(self, target: S3Target, threads: int) -> None:
        try:
            import s3fs
        except ImportError:
            raise ImportError("s3fs is not installed") from None
        super().__init__(target, threads)
        self._fs = s3fs.S3FileSystem(
            asynchronous=True,
            loop=self._loop,
            skip_instance_cache=True,
            key=target.key,
            secret=target.secret,
            endpoint_url=target.endpoint,
            client_kwargs={"region_name": target.region},
            config_kwargs={
                "max_pool_connections": max(POOL_CONNECTIONS, self.threads),
                "retries": dict(RETRIES),
            },
        )
        self.client = self._run(self._fs.set_session())
        self.client.meta.events.register("before-send.s3", self._hook)

    def complete(self, uploads: Sequence[Upload], prefix: str) -> int:
        async def one(u: Upload) -> None:
            await self.client.complete_multipart_upload(
                Bucket=self.target.bucket,
                Key=u.key,
                UploadId=u.upload_id,
                MultipartUpload={"Parts": [{"ETag": u.etag, "PartNumber": 1}]},
            )

        self._run(self._each(one, uploads))
        return self._run(self._list(prefix))

    def rename(self, pairs: Sequence[tuple[str, str]], prefix: str) -> int:
        bucket = self.target.bucket

        async def one(pair: tuple[str, str]) -> None:
            src, dst = pair
            await self.client.copy_object(
                Bucket=bucket, Key=dst, CopySource={"Bucket": bucket, "Key": src}
            )
            await self.client.delete_object(Bucket=bucket, Key=src)

        self._run(self._each(one, pairs))
        return self._run(self._list(prefix))

    async def _list(self, prefix: str) -> int:
        pager = self.client.get_paginator("list_objects_v2")
        keys = 0
        async for page in pager.paginate(Bucket=self.target.bucket, Prefix=prefix):
            keys += len(page.get("Contents", []))
        return keys

    def close(self) -> None:
        self.client.meta.events.unregister("before-send.s3", self._hook)
        self._run(self.client.close())
        super().close()


class ObstoreDriver(_AsyncDriver):
    name = "obstore"
    library = "obstore"
    unsupported: ClassVar[dict[str, str]] = {
        "magic": "no multipart API by upload id: cannot complete uploads that tasks initiated",
    }

    def __init__(self, target: S3Target, threads: int) -> None:
        try:
            from obstore.store import S3Store as ObjectStoreS3
        except ImportError:
            raise ImportError("obstore is not installed") from None
        super().__init__(target, threads)
        options: dict[str, Any] = {"region": target.region, "virtual_hosted_style_request": False}
        if target.endpoint:
            options["endpoint"] = target.endpoint
        if target.key and target.secret:
            options.update(access_key_id=target.key, secret_access_key=target.secret)
        http = bool(target.endpoint and target.endpoint.startswith("http://"))
        self.store = ObjectStoreS3(target.bucket, client_options={"allow_http": http}, **options)

    def complete(self, uploads: Sequence[Upload], prefix: str) -> int:
        raise ConfigError(f"obstore: {self.unsupported['magic']}")

    def rename(self, pairs: Sequence[tuple[str, str]], prefix: str) -> int:
        async def one(pair: tuple[str, str]) -> None:
            src, dst = pair
            await self.store.copy_async(src, dst)
            self._count()
            await self.store.delete_async(src)
            self._count()

        self._run(self._each(one, pairs))
        return self._run(self._list(prefix))

    async def _list(self, prefix: str) -> int:
        keys = 0
        async for chunk in self.store.list(prefix.rstrip("/"), chunk_size=LIST_PAGE):
            keys += len(chunk)
        self._count(list_pages(keys))
        return keys


DRIVERS: dict[str, type[Driver]] = {d.name: d for d in (Boto3Driver, S3fsDriver, ObstoreDriver)}
