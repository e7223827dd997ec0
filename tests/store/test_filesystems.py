"""The file systems and options PyData users pass: `storage_options=` (fsspec/Dask style, s3fs's
names for S3), `filesystem=` (fsspec and pyarrow objects), and `hdfs://`.

S3 tests run against the real S3-protocol test server (moto in its own process)."""

from __future__ import annotations

import functools
import os
import pickle
import uuid
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from multiprocessing import get_context
from unittest import mock

import fsspec
import pyarrow.fs as pafs
import pytest

import dataferry
from dataferry.commit.factory import choose_committer
from dataferry.engine import LocalEngine
from dataferry.errors import AccessDenied, ConfigError, DataferryError, StoreError
from dataferry.store import Capabilities, open_store
from dataferry.store.fsspec.arrow import ARROW_CAPABILITIES, hdfs_missing
from dataferry.store.fsspec.store import PROTOCOL_CAPABILITIES
from dataferry.store.local.store import LOCAL_CAPABILITIES

from . import test_contract

try:
    from pyarrow.fs import S3FileSystem
except ImportError:  # a pyarrow built without S3
    S3FileSystem = None

needs_arrow_s3 = pytest.mark.skipif(S3FileSystem is None, reason="pyarrow without S3 support")
KEY, SECRET = "testing", "testing"  # what the test server's fixture exports


def _capture_requests(store):
    """The headers of every HTTP request the store's boto3 client sends from now on."""
    sent: list[dict[str, str]] = []

    def hook(request=None, **_):
        sent.append(
            {k: v.decode() if isinstance(v, bytes) else str(v) for k, v in request.headers.items()}
        )

    store.client.meta.events.register("before-send.s3", hook)
    return sent


@pytest.fixture
def aws_env_elsewhere(monkeypatch, tmp_path):
    """The AWS variables point at nothing: a store that still reaches the test server got its
    endpoint and credentials from its options."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # the discard port: refused
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))


def _read_in_worker(store, path):
    return store.read_bytes(path)


# --- S3: s3fs-style storage_options ------------------------------------------------------------


def test_s3fs_style_storage_options_reach_the_server(s3_server, s3_url, aws_env_elsewhere):
    options = {
        "key": "df-key",
        "secret": "df-secret",
        "client_kwargs": {"endpoint_url": s3_server.endpoint, "region_name": "us-east-1"},
        "config_kwargs": {"s3": {"addressing_style": "path"}, "retries": {"max_attempts": 2}},
    }
    store = open_store(s3_url, storage_options=options)
    sent = _capture_requests(store)
    store.write_bytes("dir/f.txt", b"round trip")
    assert store.read_bytes("dir/f.txt") == b"round trip"
    assert [s.path for s in store.walk("")] == ["dir/f.txt"]
    assert sent and all("Credential=df-key/" in h["Authorization"] for h in sent)
    assert store.client.meta.config.s3 == {"addressing_style": "path"}
    # nested dicts: the clone reuses the cached client (canonical key) and reads the same object
    clone = pickle.loads(pickle.dumps(store))
    assert clone.client is store.client
    assert clone.read_bytes("dir/f.txt") == b"round trip"
    # and a worker process rebuilds it from the pickle alone
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        assert pool.submit(_read_in_worker, store, "dir/f.txt").result(60) == b"round trip"


def test_top_level_endpoint_url_and_token(s3_server, s3_url, aws_env_elsewhere):
    store = open_store(
        s3_url,
        storage_options={
            "key": "k2",
            "secret": "s2",
            "token": "session-token",
            "endpoint_url": s3_server.endpoint,
        },
    )
    sent = _capture_requests(store)
    store.write_bytes("x", b"1")
    assert sent[-1]["X-Amz-Security-Token"] == "session-token"
    assert "Credential=k2/" in sent[-1]["Authorization"]


def test_anon_sends_unsigned_requests(s3_url):
    signed = open_store(s3_url)
    signed.write_bytes("public/f", b"open")
    signed.write_bytes("private/f", b"closed")
    signed.client.put_object_acl(
        Bucket=signed.bucket, Key=signed._key("public/f"), ACL="public-read"
    )
    anon = open_store(s3_url, storage_options={"anon": True})
    sent = _capture_requests(anon)
    assert anon.read_bytes("public/f") == b"open"
    with pytest.raises(AccessDenied):  # the server saw no credentials
        anon.read_bytes("private/f")
    assert len(sent) == 2 and not any("Authorization" in h for h in sent)


def test_profile_is_a_boto3_session_profile(s3_server, s3_url, aws_env_elsewhere, tmp_path):
    (tmp_path / "credentials").write_text(
        "[dftest]\naws_access_key_id = profile-key\naws_secret_access_key = x\n"
    )
    os.environ["AWS_SHARED_CREDENTIALS_FILE"] = str(tmp_path / "credentials")  # monkeypatched
    store = open_store(
        s3_url, storage_options={"profile": "dftest", "endpoint_url": s3_server.endpoint}
    )
    sent = _capture_requests(store)
    store.write_bytes("p", b"1")
    assert "Credential=profile-key/" in sent[-1]["Authorization"]
    with pytest.raises(ConfigError, match="nosuchprofile"):
        open_store(s3_url, storage_options={"profile": "nosuchprofile"})


@pytest.mark.parametrize(
    ("options", "names"),
    [
        ({"kee": "x"}, ["'kee'", "key", "secret", "client_kwargs", "anon", "profile"]),
        ({"requester_pays": True}, ["'requester_pays'", "config_kwargs"]),
        ({"client_kwargs": {"regoin_name": "x"}}, ["'regoin_name'", "region_name"]),
        ({"client_kwargs": {"config": object()}}, ["config_kwargs"]),
        ({"config_kwargs": {"no_such_setting": 1}}, ["no_such_setting"]),
        ({"anon": True, "key": "k"}, ["anon"]),
        ({"anon": "yes"}, ["anon"]),
        (
            {"endpoint_url": "http://a:1", "client_kwargs": {"endpoint_url": "http://b:2"}},
            ["endpoint_url", "twice"],
        ),
    ],
)
def test_s3_storage_options_it_does_not_understand(options, names):
    with pytest.raises(ConfigError) as e:
        open_store("s3://bucket/prefix", storage_options=options)
    for name in names:
        assert name in str(e.value)


def test_s3_boto_failures_are_dataferry_errors(s3_url, aws_env_elsewhere):
    store = open_store(
        s3_url,
        storage_options={
            "key": "k",
            "secret": "s",
            "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 2},
        },
    )  # endpoint from the environment: nothing listens there
    with pytest.raises(StoreError, match="get_file_status"):
        store.exists("x")


# --- filesystem= objects -------------------------------------------------------------------


def _arrow_s3(s3_server):
    return S3FileSystem(
        endpoint_override=s3_server.endpoint.split("://", 1)[1],
        scheme="http",
        access_key=KEY,
        secret_key=SECRET,
        region="us-east-1",
    )


def make_fs_store(kind, tmp_path, request):
    if kind == "fsspec-memory":
        return open_store(f"/df-fs/{uuid.uuid4().hex}", filesystem=fsspec.filesystem("memory"))
    if kind == "fsspec-local":
        return open_store(str(tmp_path / "fsspec"), filesystem=fsspec.filesystem("file"))
    if kind == "pyarrow-local":
        return open_store(str(tmp_path / "arrow"), filesystem=pafs.LocalFileSystem())
    if kind == "pyarrow-s3":
        if S3FileSystem is None:
            pytest.skip("pyarrow without S3 support")
        server = request.getfixturevalue("s3_server")
        return open_store(
            f"{server.create_bucket()}/{uuid.uuid4().hex[:8]}", filesystem=_arrow_s3(server)
        )
    if kind in ("pyarrow-s3-seaweedfs", "s3fs-seaweedfs"):  # a real S3 server
        if kind.startswith("pyarrow") and S3FileSystem is None:
            pytest.skip("pyarrow without S3 support")
        server = request.getfixturevalue("seaweed")
        where = request.getfixturevalue("seaweed_url")[len("s3://") :]
        if kind.startswith("pyarrow"):
            return open_store(where, filesystem=_arrow_s3(server))
        import s3fs

        fs = s3fs.S3FileSystem(endpoint_url=server.endpoint, key=KEY, secret=SECRET)
        return open_store(where, filesystem=fs)
    raise ValueError(kind)


FS_KINDS = [
    "fsspec-memory",
    "fsspec-local",
    "pyarrow-local",
    "pyarrow-s3",
    "pyarrow-s3-seaweedfs",
    "s3fs-seaweedfs",
]
CONTRACT = [getattr(test_contract, n) for n in sorted(dir(test_contract)) if n.startswith("test_")]


@pytest.mark.parametrize("check", CONTRACT, ids=lambda f: f.__name__[len("test_") :])
@pytest.mark.parametrize("kind", FS_KINDS)
def test_the_store_contract_holds_on_filesystem_objects(kind, check, tmp_path, request):
    check(make_fs_store(kind, tmp_path, request))


def test_fsspec_memory_object():
    fs = fsspec.filesystem("memory")
    name = uuid.uuid4().hex
    store = open_store(f"/df-fs/{name}", filesystem=fs)
    assert store.url == f"memory://df-fs/{name}"
    assert store.capabilities == PROTOCOL_CAPABILITIES["memory"]
    store.write_bytes("a/b.txt", b"in memory")
    assert fs.cat_file(f"/df-fs/{name}/a/b.txt") == b"in memory"
    # the same data as the memory:// URL, and a URL of its own scheme is accepted
    assert open_store(f"memory://df-fs/{name}").read_bytes("a/b.txt") == b"in memory"
    assert open_store(f"memory://df-fs/{name}", filesystem=fs).read_bytes("a/b.txt") == (
        b"in memory"
    )
    clone = pickle.loads(pickle.dumps(store))
    assert clone.read_bytes("a/b.txt") == b"in memory"
    assert clone.capabilities == store.capabilities


def test_fsspec_local_object_has_the_local_file_systems_capabilities(tmp_path):
    store = open_store(str(tmp_path / "out"), filesystem=fsspec.filesystem("file"))
    assert store.url == f"file://{tmp_path}/out"
    # the same renames as the local store; appends and in-place writes go through fsspec's
    # whole-file writes, so they are not native
    assert replace(store.capabilities, native_append=True, native_positional_write=True) == (
        LOCAL_CAPABILITIES
    )
    assert not store.capabilities.native_append
    assert not store.capabilities.native_positional_write
    assert choose_committer(store) == "manifest"
    store.write_bytes("d/f", b"on disk")
    assert (tmp_path / "out" / "d" / "f").read_bytes() == b"on disk"
    tag = store.stat("d/f").etag
    store.rename("d", "e")  # etags survive a rename, as declared
    assert tag and store.stat("e/f").etag == tag
    store.write_bytes("e/f", b"rewritten, longer")
    assert store.stat("e/f").etag != tag
    assert store.create_if_absent("once", b"1") and not store.create_if_absent("once", b"2")


def test_pyarrow_local_object(tmp_path):
    fs = pafs.LocalFileSystem()
    store = open_store(str(tmp_path / "out"), filesystem=fs)
    assert store.url == f"file://{tmp_path}/out"
    caps = store.capabilities
    assert caps == ARROW_CAPABILITIES["local"]
    assert (caps.atomic_file_rename, caps.atomic_dir_rename, caps.o1_dir_rename) == (
        True,
        True,
        True,
    )
    assert not caps.etags and not caps.multipart_upload and not caps.conditional_create
    store.write_bytes("d/f", b"through pyarrow")
    assert (tmp_path / "out" / "d" / "f").read_bytes() == b"through pyarrow"
    assert open_store(f"file://{tmp_path}/out", filesystem=fs).read_bytes("d/f") == (
        b"through pyarrow"
    )
    clone = pickle.loads(pickle.dumps(store))
    assert clone.read_bytes("d/f") == b"through pyarrow"
    assert (clone.url, clone.capabilities) == (store.url, store.capabilities)


@needs_arrow_s3
def test_pyarrow_s3_object_against_the_test_server(s3_server, s3_url):
    bucket_and_prefix = s3_url[len("s3://") :]
    store = open_store(bucket_and_prefix, filesystem=_arrow_s3(s3_server))
    assert store.url == s3_url
    # the object reaches dataferry's own S3 store (`store/s3/objects.py`): its multipart
    # uploads make `auto` pick the magic committer, as for the s3:// URL
    assert store.capabilities == open_store(s3_url).capabilities
    assert store.capabilities.multipart_upload and not store.capabilities.atomic_dir_rename
    assert choose_committer(store) == "magic"
    store.write_bytes("t/one", b"via pyarrow")
    store.rename("t", "u")  # per object on S3
    # boto3's S3 store sees the same objects on the same server
    assert open_store(s3_url).read_bytes("u/one") == b"via pyarrow"
    assert not open_store(s3_url).exists("t/one")
    # an s3:// URL with the object is accepted too
    assert open_store(s3_url, filesystem=_arrow_s3(s3_server)).read_bytes("u/one") == (
        b"via pyarrow"
    )
    clone = pickle.loads(pickle.dumps(store))
    assert clone.read_bytes("u/one") == b"via pyarrow"
    assert clone.capabilities == store.capabilities


@needs_arrow_s3
def test_pyarrow_errors_are_dataferry_errors(s3_server):
    store = open_store("no-such-bucket-df/x", filesystem=_arrow_s3(s3_server))
    with pytest.raises(DataferryError):
        store.write_bytes("f", b"1")


def test_other_pyarrow_file_systems_get_the_conservative_default(tmp_path):
    fs = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    store = open_store("inner", filesystem=fs)
    assert store.capabilities == Capabilities()
    assert choose_committer(store) == "direct"
    store.write_bytes("f", b"sub")
    assert (tmp_path / "inner" / "f").read_bytes() == b"sub"


def _fake_hdfs(types):
    """A stand-in for pyarrow's HadoopFileSystem (the real one needs libhdfs and a JVM): an
    autospec of the class, answering get_file_info from `types`."""
    fake = mock.create_autospec(pafs.HadoopFileSystem, instance=True)
    fake.type_name = "hdfs"
    fake.get_file_info.side_effect = lambda ps: [
        pafs.FileInfo(p, types.get(p, pafs.FileType.NotFound)) for p in ps
    ]
    return fake


def test_hadoop_file_system_capabilities_and_calls():
    fake = _fake_hdfs({"/data/out/a": pafs.FileType.File, "/data/out": pafs.FileType.Directory})
    store = open_store("hdfs://nn:8020/data/out", filesystem=fake)
    assert store.url == "hdfs://nn:8020/data/out"
    assert store.capabilities == ARROW_CAPABILITIES["hdfs"]
    caps = store.capabilities
    assert caps.atomic_file_rename and caps.atomic_dir_rename and caps.o1_dir_rename
    assert choose_committer(store) == "manifest"
    store.rename("a", "b")  # one HDFS rename
    fake.move.assert_called_once_with("/data/out/a", "/data/out/b")
    store.mkdirs("new/dir")
    fake.create_dir.assert_called_with("/data/out/new/dir", recursive=True)


def test_hdfs_without_libhdfs_says_what_is_missing(monkeypatch):
    for name in ("ARROW_LIBHDFS_DIR", "HADOOP_HOME", "JAVA_HOME", "CLASSPATH"):
        monkeypatch.delenv(name, raising=False)
    for url in ("hdfs://namenode:8020/data/out", "viewfs://cluster/data/out"):
        with pytest.raises(ConfigError) as e:
            open_store(url)
        msg = str(e.value)
        assert url in msg and "libhdfs" in msg
        for needed in ("ARROW_LIBHDFS_DIR", "HADOOP_HOME", "JAVA_HOME", "hadoop classpath --glob"):
            assert needed in msg


def test_hdfs_message_names_only_what_is_missing(monkeypatch, tmp_path):
    libdir = tmp_path / "native"
    libdir.mkdir()
    (libdir / "libhdfs.so").write_bytes(b"")  # present (not loadable: no JVM to run it anyway)
    monkeypatch.setenv("ARROW_LIBHDFS_DIR", str(libdir))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))  # holds no libjvm.so
    monkeypatch.setenv("CLASSPATH", "/opt/app/lib/app.jar")
    with pytest.raises(ConfigError) as e:
        open_store("hdfs://namenode/data")
    msg = str(e.value)
    assert "libhdfs.so (" not in msg  # found, so not listed as missing
    assert f"JAVA_HOME={tmp_path / 'jdk'} has no libjvm.so" in msg
    assert "CLASSPATH names no Hadoop jar" in msg


def test_hdfs_missing_checks_each_requirement(tmp_path):
    (tmp_path / "hadoop" / "lib" / "native").mkdir(parents=True)
    (tmp_path / "hadoop" / "lib" / "native" / "libhdfs.so").write_bytes(b"")
    (tmp_path / "jdk" / "lib" / "server").mkdir(parents=True)
    (tmp_path / "jdk" / "lib" / "server" / "libjvm.so").write_bytes(b"")
    ready = {
        "HADOOP_HOME": str(tmp_path / "hadoop"),
        "JAVA_HOME": str(tmp_path / "jdk"),
        "CLASSPATH": "/opt/hadoop/share/hadoop/common/hadoop-common.jar",
    }
    assert hdfs_missing(ready) == []
    without_java = hdfs_missing({**ready, "JAVA_HOME": ""})
    assert len(without_java) == 1 and without_java[0].startswith("JAVA_HOME is not set")
    without_classpath = hdfs_missing({k: v for k, v in ready.items() if k != "CLASSPATH"})
    assert len(without_classpath) == 1 and "hadoop classpath --glob" in without_classpath[0]


def test_hdfs_storage_options_are_checked_before_loading():
    with pytest.raises(ConfigError, match=r"'kerberos'.*kerb_ticket"):
        open_store("hdfs://nn:8020/x", storage_options={"kerberos": "/tmp/krb5cc"})


# --- what to pass instead ------------------------------------------------------------------


@pytest.mark.parametrize(
    "fs", [fsspec.filesystem("memory"), pafs.LocalFileSystem()], ids=["fsspec", "pyarrow"]
)
def test_a_file_system_where_the_url_belongs(fs):
    with pytest.raises(ConfigError, match="filesystem="):
        open_store(fs)


def test_a_url_of_another_scheme_than_the_file_system(tmp_path):
    with pytest.raises(ConfigError, match=r"open_store\('bucket/key', filesystem=fs\)"):
        open_store("s3://bucket/key", filesystem=fsspec.filesystem("memory"))
    with pytest.raises(ConfigError, match=r"open_store\('bucket/key', filesystem=fs\)"):
        open_store("s3://bucket/key", filesystem=pafs.LocalFileSystem())
    with pytest.raises(ConfigError, match="configure that object"):
        open_store(str(tmp_path), filesystem=pafs.LocalFileSystem(), storage_options={"a": 1})
    with pytest.raises(ConfigError, match="fsspec AbstractFileSystem or a pyarrow"):
        open_store(str(tmp_path), filesystem="memory")
    with pytest.raises(ConfigError, match="sim:"):
        open_store(f"sim:hdfs:{tmp_path}", filesystem=pafs.LocalFileSystem())


def test_unsupported_url_lists_hdfs():
    with pytest.raises(ConfigError, match="hdfs://"):
        open_store("ftp://host/path")


def test_storage_options_for_fsspec_urls_and_the_local_store(tmp_path):
    name = uuid.uuid4().hex
    store = open_store(f"memory://df-so/{name}", storage_options={"skip_instance_cache": True})
    store.write_bytes("f", b"1")
    assert store.read_bytes("f") == b"1"
    assert open_store(str(tmp_path), storage_options={"auto_mkdir": True}).url.startswith("file")
    with pytest.raises(ConfigError, match="'anon'"):
        open_store(str(tmp_path), storage_options={"anon": True})


def test_open_location_passes_the_file_system_on(tmp_path):
    fs = pafs.LocalFileSystem()
    open_store(str(tmp_path), filesystem=fs).write_bytes("dir/_SUCCESS", b"{}")
    store, name = dataferry.store.open_location(
        str(tmp_path / "dir" / "_SUCCESS"), "x", filesystem=fs
    )
    assert (store.url, name) == (f"file://{tmp_path}/dir", "_SUCCESS")
    assert store.read_bytes(name) == b"{}"


# --- a whole job through a file system object ------------------------------------------------


def _write_part(task: int, out) -> int:
    out.write(f"a/part-{task}.txt", f"x{task}".encode())
    return task


@pytest.mark.parametrize(
    ("kind", "committer"),
    [
        ("pyarrow-local", "manifest"),
        ("fsspec-memory", "manifest"),
        ("pyarrow-s3", "magic"),
        ("s3fs-seaweedfs", "magic"),
    ],
)
def test_a_committed_job_through_a_file_system_object(kind, committer, tmp_path, request):
    store = make_fs_store(kind, tmp_path, request)
    chosen = dataferry.make_committer("auto", store)
    assert choose_committer(store) == committer == chosen.name
    LocalEngine(workers=0).run_job(chosen, [functools.partial(_write_part, i) for i in range(3)])
    files = sorted(s.path for s in store.walk(""))
    assert "_SUCCESS" in files
    parts = [f for f in files if f.startswith("a/")]  # the direct committer adds a unique suffix
    assert len(parts) == 3 and all(p.startswith(f"a/part-{i}") for i, p in enumerate(parts))
    assert [store.read_bytes(p) for p in parts] == [b"x0", b"x1", b"x2"]
    if kind == "pyarrow-local":
        assert (tmp_path / "arrow" / "_SUCCESS").is_file()
        assert (tmp_path / "arrow" / "a" / "part-0.txt").read_bytes() == b"x0"


def test_a_job_in_worker_processes_with_a_pyarrow_file_system(tmp_path):
    store = open_store(str(tmp_path / "out"), filesystem=pafs.LocalFileSystem())
    committer = dataferry.make_committer("auto", store)
    LocalEngine(workers=1, executor="processes").run_job(
        committer, [functools.partial(_write_part, i) for i in range(2)]
    )
    assert (tmp_path / "out" / "_SUCCESS").is_file()
    assert sorted(p.name for p in (tmp_path / "out" / "a").iterdir()) == [
        "part-0.txt",
        "part-1.txt",
    ]
