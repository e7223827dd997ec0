"""The store families' table: a URL's scheme finds one row, the row opens the store, and a store
joins with one row (and so the contract suite, tests/conftest.py's STORE_KINDS)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from dataferry.errors import ConfigError
from dataferry.store import FaultStore, LocalStore, Store, open_store, registry
from dataferry.store.registry import StoreRequest, StoreSpec

from ..conftest import make_store

STORE_SRC = Path(registry.__file__).parent
CONTRACT = [(spec, kind, key) for spec in registry.KNOWN.values() for kind, _, key in spec.contract]


def test_every_family_runs_the_contract_or_says_why():
    """A row with neither would be a store no test opens: its promises would go unchecked."""
    for spec in registry.KNOWN.values():
        assert spec.contract or spec.untested, spec.name


def test_no_scheme_is_claimed_by_two_rows():
    """Two rows on one scheme: which store a URL gets would hang on the table's order."""
    assert registry.duplicate_schemes() == []


@pytest.mark.parametrize(("spec", "kind", "key"), CONTRACT, ids=[kind for _, kind, _ in CONTRACT])
def test_each_contract_location_opens_its_row_with_the_declared_capabilities(
    spec, kind, key, tmp_path, request
):
    """The row's declared capabilities are what its store says: a row declaring more than its
    store keeps would let `auto` pick a committer that is unsafe there."""
    store = make_store(kind, tmp_path, request)
    assert type(store).__module__.startswith(spec.module + ".")
    assert store.capabilities == spec.declared_capabilities()[key]


def open_demo(request: StoreRequest) -> Store:
    """The opener of the row the next test adds: a local directory named by the URL."""
    return LocalStore(request.url.split("://", 1)[1])


def test_a_store_joins_with_one_row(tmp_path, monkeypatch):
    """open_store finds a new family by its row alone: were the opener choosing stores by
    scheme anywhere else, a family added the documented way would be unreachable."""
    url = f"demo://{tmp_path}/d"
    with pytest.raises(ConfigError, match="unsupported store URL 'demo://"):
        open_store(url)
    row = StoreSpec("demo", __name__, ("demo",), "a test family", opener="open_demo")
    monkeypatch.setitem(registry.KNOWN, "demo", row)
    store = open_store(url)
    store.write_bytes("f", b"1")
    assert isinstance(store, LocalStore) and (tmp_path / "d" / "f").read_bytes() == b"1"
    assert isinstance(open_store(url, faults=[]), FaultStore)  # the fault layer goes on top
    with pytest.raises(ConfigError, match="demo://"):
        open_store("nosuch://x")  # the message lists what the table serves


def test_unsupported_url_names_every_form_the_table_serves():
    """A user who mistyped a scheme is told every one that works."""
    with pytest.raises(ConfigError) as e:
        open_store("ftp://host/path")
    for spec in registry.KNOWN.values():
        for form in spec.url_forms():
            assert form in str(e.value)


def test_the_opener_branches_on_no_scheme():
    """No scheme, `scheme://` or `scheme:` literal tested in the opener or the table's lookups
    (comparisons, startswith, match): a store chosen by an if-ladder there would bypass the
    table (and its contract run)."""
    schemes = {s for spec in registry.KNOWN.values() for s in spec.schemes if s}
    literals = schemes | {f"{s}://" for s in schemes} | {f"{s}:" for s in schemes}
    found = []
    for name in ("__init__.py", "registry.py"):
        tree = ast.parse((STORE_SRC / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            tests_a_value = isinstance(node, ast.Compare | ast.MatchValue) or (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("startswith", "endswith")
            )
            if tests_a_value:
                for const in ast.walk(node):
                    if isinstance(const, ast.Constant) and const.value in literals:
                        found.append(f"{name}:{const.lineno}: {const.value!r}")
    assert found == []


def test_families_are_imported_only_when_opened():
    """`import dataferry.store` pulls in no family but those it re-exports (local, sim), and
    neither boto3 nor pyarrow: a table that imported its rows would slow every command."""
    code = (
        "import sys, dataferry.store\n"
        "heavy = [m for m in ('boto3', 'pyarrow', 'dataferry.store.s3', "
        "'dataferry.store.fsspec') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
