"""Faces only translate: no face (nor the dataset layer under it) reads a committer's own
options, the network services a committer's tasks reach are asked of the committer, Dask's
errors use Dask's words, and the Dask shuffle keeps nothing on the Client object."""

from __future__ import annotations

import ast
import gc
import weakref
from pathlib import Path
from types import SimpleNamespace

import pytest

from dataferry.dataset.write import check_services_reachable, services_tasks_reach
from dataferry.errors import ConfigError, DestinationError

SRC = Path(__file__).resolve().parents[2] / "src" / "dataferry"
FACES = [*sorted((SRC / "dask").glob("*.py")), *sorted((SRC / "ray").glob("*.py"))]
FACES += sorted((SRC / "daft").glob("*.py"))
FACES += sorted((SRC / "dataset").glob("*.py"))


def _named(node: ast.AST, name: str) -> bool:
    """`name`, `x.name`, or `(name or {})`."""
    if isinstance(node, ast.BoolOp):
        return any(_named(v, name) for v in node.values)
    return (isinstance(node, ast.Name) and node.id == name) or (
        isinstance(node, ast.Attribute) and node.attr == name
    )


@pytest.mark.parametrize("path", FACES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_face_reads_a_committers_options(path):
    """`committer_options` is passed on whole (``**committer_options``), never looked into."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _named(node.value, "committer_options"):
            found.append(node.lineno)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop", "setdefault", "__getitem__")
            and _named(node.func.value, "committer_options")
        ):
            found.append(node.lineno)
        if isinstance(node, ast.Constant) and node.value in ("service_url", "service_token"):
            found.append(node.lineno)
    assert not found, f"{path.name} reads a committer's options at lines {found}"


def _committer(services):
    config = SimpleNamespace()
    if services is not None:
        config.services_tasks_reach = lambda: services
    return SimpleNamespace(config=config)


def test_services_are_asked_of_the_committer():
    assert services_tasks_reach(_committer(None)) == []
    assert services_tasks_reach(SimpleNamespace()) == []
    declared = [("http://127.0.0.1:7340", "marker service")]
    assert services_tasks_reach(_committer(declared)) == declared
    check_services_reachable(_committer(declared), ["127.0.0.1"])  # one machine: fine
    with pytest.raises(
        ConfigError, match=r"marker service http://127\.0\.0\.1:7340 is on loopback"
    ):
        check_services_reachable(_committer(declared), ["127.0.0.1", "10.200.0.9"])
    with pytest.raises(ConfigError, match="where a service binds"):
        check_services_reachable(_committer([("http://0.0.0.0:1", "marker service")]), [])


def test_the_direct_committer_declares_its_marker_service(tmp_path):
    """The commit side's half of the hook: the direct committer with a marker service declares
    it (and declares nothing without one)."""
    import dataferry

    kwargs = {"markers": "service", "service_url": "http://127.0.0.1:7340", "service_token": "t"}
    committer = dataferry.make_committer("direct", str(tmp_path), **kwargs)
    assert services_tasks_reach(committer) == [("http://127.0.0.1:7340", "marker service")]
    plain = dataferry.make_committer("direct", str(tmp_path))
    assert services_tasks_reach(plain) == []


def test_dask_refuses_a_non_empty_destination_in_dasks_words(tmp_path):
    dd = pytest.importorskip("dask.dataframe")
    import pandas as pd

    import dataferry.dask as fdask

    ddf = dd.from_pandas(pd.DataFrame({"a": range(10)}), npartitions=2)
    out = tmp_path / "out"
    fdask.to_parquet(ddf, out, compute_kwargs={"scheduler": "sync"})
    with pytest.raises(DestinationError, match="not empty") as refused:
        fdask.to_parquet(ddf, out, compute_kwargs={"scheduler": "sync"})
    assert "overwrite=True" in str(refused.value) and "mode=" not in str(refused.value)


def test_the_shuffle_keeps_nothing_on_the_client():
    """Per-client state lives in registries keyed by the client, and goes with it."""
    pytest.importorskip("distributed")
    from dataferry.dask import push_shuffle as dask_shuffle
    from dataferry.dask import shuffle_report as dask_shuffle_report

    class FakeClient:
        def __init__(self):
            self.subscribed = []

        def subscribe_topic(self, topic, handler):
            self.subscribed.append((topic, handler))

    client = FakeClient()
    report = dask_shuffle_report.DaskShuffleReport(False, 0, 0)
    dask_shuffle_report.watch(client, "app-1", report)
    dask_shuffle_report.watch(client, "app-2", report)
    assert len(client.subscribed) == 1  # one subscription per client
    topic, route = client.subscribed[0]
    assert topic == dask_shuffle_report.REPORT_TOPIC
    route((0.0, {"app": "app-1", "kind": "finalize", "merge_id": 3, "push": True, "finalize": {}}))
    assert report.merge_id == 3 and report.push
    dask_shuffle._state(client).plans["app-1"] = "a plan"
    assert dask_shuffle._state(client).plans == {"app-1": "a plan"}
    assert set(vars(client)) == {"subscribed"}  # nothing set on the client
    assert client in dask_shuffle._CLIENTS and client in dask_shuffle_report._SUBSCRIPTIONS
    gone = weakref.ref(client)
    del client, route
    gc.collect()
    assert gone() is None  # the registries hold the client weakly: its entries go with it
