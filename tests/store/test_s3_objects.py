"""One S3 store whatever the user hands in: a URL with storage_options, an s3fs file system,
a pyarrow S3 file system, or the environment's credentials reach the same store with the same
capabilities, so `auto` picks the same committer, and no plain reader sees a job's partial
output."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.dataset as pads
import pytest

import dataferry
from dataferry.errors import ConfigError
from dataferry.store import open_store
from dataferry.store.s3.store import S3Store
from dataferry.testing import CREDENTIALS

KEY, SECRET = CREDENTIALS["AWS_ACCESS_KEY_ID"], CREDENTIALS["AWS_SECRET_ACCESS_KEY"]
TABLE = pa.table({"x": list(range(3000)), "day": ["a", "b", "c"] * 1000})


def doors(endpoint: str, path: str) -> dict[str, dict]:
    """Each way in: open_store keywords for the same location."""
    import s3fs
    from pyarrow.fs import S3FileSystem

    options = {"key": KEY, "secret": SECRET, "endpoint_url": endpoint}
    return {
        "storage_options": {"url_or_path": f"s3://{path}", "storage_options": options},
        "environment": {"url_or_path": f"s3://{path}"},
        "s3fs": {
            "url_or_path": path,
            "filesystem": s3fs.S3FileSystem(
                key=KEY, secret=SECRET, endpoint_url=endpoint, use_listings_cache=False
            ),
        },
        "pyarrow": {
            "url_or_path": path,
            "filesystem": S3FileSystem(
                access_key=KEY,
                secret_key=SECRET,
                endpoint_override=endpoint.split("://", 1)[1],
                scheme="http",
                region="us-east-1",
            ),
        },
    }


def test_every_door_reaches_the_same_store_and_committer(s3_server, s3_url):
    path = s3_url.split("://", 1)[1]
    stores = {name: open_store(**kw) for name, kw in doors(s3_server.endpoint, path).items()}
    assert all(isinstance(s, S3Store) for s in stores.values()), stores
    assert {s.full_url() for s in stores.values()} == {s3_url}
    caps = {s.capabilities for s in stores.values()}
    assert len(caps) == 1 and next(iter(caps)).multipart_upload
    committers = {name: dataferry.make_committer("auto", s).name for name, s in stores.items()}
    assert set(committers.values()) == {"magic"}, committers
    # and they are one store: what one writes, the others read
    stores["s3fs"].write_bytes("probe", b"one store")
    assert stores["pyarrow"].read_bytes("probe") == b"one store"


@pytest.mark.parametrize("door", ["s3fs", "pyarrow"])
def test_a_file_system_object_write_shows_no_partial_output(door, s3_server, s3_url):
    """In the middle of the job, a plain reader through the user's own file system object
    sees none of it; afterwards it sees all of it."""
    path = s3_url.split("://", 1)[1]
    kw = doors(s3_server.endpoint, path)[door]
    reader = doors(s3_server.endpoint, path)["pyarrow"]["filesystem"]
    seen: list[int] = []

    def on_event(event: str, task: int, attempt: int) -> None:
        if event == "job_commit_started":
            info = reader.get_file_info(pa.fs.FileSelector(path, allow_not_found=True))
            seen.append(len([i for i in info if i.type == pa.fs.FileType.File]))

    result = dataferry.write_dataset(
        TABLE,
        kw["url_or_path"],
        filesystem=kw["filesystem"],
        partition_by=["day"],
        tasks=3,
        on_event=on_event,
    )
    assert result.committer == "magic" and seen == [0]
    back = pads.dataset(path, filesystem=reader, partitioning="hive", format="parquet")
    assert back.count_rows() == TABLE.num_rows


def test_settings_that_cannot_be_carried_over_are_named():
    import s3fs

    fs = s3fs.S3FileSystem(key=KEY, secret=SECRET, requester_pays=True)
    with pytest.raises(ConfigError, match="requester_pays"):
        open_store("bucket/out", filesystem=fs)
    from pyarrow.fs import S3FileSystem

    class AssumesRole(S3FileSystem):
        """pyarrow's S3FileSystem(role_arn=...) as dataferry reads it (its pickled arguments).
        A real one calls STS while it is made: over a minute where STS is unreachable."""

        def __reduce__(self):
            rebuild, (args,) = super().__reduce__()
            return rebuild, ({**args, "role_arn": "arn:aws:iam::1:role/r"},)

    with pytest.raises(ConfigError, match="role_arn"):
        open_store("bucket/out", filesystem=AssumesRole(region="us-east-1"))
