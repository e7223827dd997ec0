"""The house's layers: every module of dataferry imports only from its own layer and below, and
no module in src/ is over 500 lines.

Each module is parsed with `ast` (nothing is imported), every import in it is resolved
(relative ones too, and those inside functions or under TYPE_CHECKING), and the importing
module's layer is compared with the imported module's. A module the table does not place fails
the test: a new top-level module or package gets its row here first.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

# The layers, top to bottom. A module may import from its own layer and from any layer below
# it, never from one above. Each entry is a module or package of `dataferry` (a package covers
# everything in it); "" is the package itself (`dataferry/__init__.py`, the public surface).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("cli", ("cli", "__main__")),  # the face: parse, call the library, render
    ("bench", ("bench", "demo")),  # benchmarks, the report, the demo
    ("verify", ("verify",)),  # the crash-point harness, the store probe
    ("testing", ("testing",)),  # the S3-protocol test server
    ("dataset", ("dataset", "dask", "ray", "daft", "")),  # write_dataset, the integrations
    ("engine", ("engine",)),  # who runs tasks: local, Dask, Ray; the shuffle's stages
    ("commit", ("commit",)),  # the commit protocol and every committer
    ("markers", ("markers",)),  # write markers, the marker service
    ("shuffle", ("shuffle",)),  # map outputs, merging, the shuffle service
    ("net", ("net",)),  # the services' shared footing (a module or a package)
    ("store", ("store",)),  # the only I/O layer
    # no dataferry imports but each other
    ("basics", ("ids", "errors", "stats", "stages", "extras", "liveness", "units", "progress")),
]
MAX_LINES = 500

PACKAGE = "dataferry"
SRC = Path(__file__).resolve().parents[1] / "src"
RANK = {name: rank for rank, (name, _) in enumerate(LAYERS)}


@dataclass(frozen=True)
class Module:
    name: str  # dotted: dataferry.store.base
    path: Path
    is_package: bool


@dataclass(frozen=True)
class Import:
    importer: Module
    line: int
    target: str  # dotted module name inside dataferry


def modules() -> list[Module]:
    found = []
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found.append(Module(".".join(parts), path, is_package))
    return found


def layer_of(module: str) -> str | None:
    """The layer of a dotted module name (its longest matching table entry), or None."""
    best, best_len = None, -1
    for layer, entries in LAYERS:
        for entry in entries:
            prefix = f"{PACKAGE}.{entry}" if entry else PACKAGE
            matches = module == prefix or (entry and module.startswith(prefix + "."))
            if matches and len(prefix) > best_len:
                best, best_len = layer, len(prefix)
    return best


def imports_of(module: Module, known: set[str]) -> list[Import]:
    """Every import of a dataferry module in `module`, resolved to the module it names."""
    tree = ast.parse(module.path.read_text(encoding="utf-8"), str(module.path))
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            # `from . import paths` names a module; `from .base import Store` a name in one
            targets = [
                f"{origin}.{a.name}" if f"{origin}.{a.name}" in known else origin
                for a in node.names
            ]
        else:
            continue
        for target in targets:
            if target == PACKAGE or target.startswith(PACKAGE + "."):
                out.append(Import(module, node.lineno, target))
    return out


def upward_imports(mods: list[Module]) -> list[str]:
    """One line per import of a module from a layer above its own: file, line, both modules."""
    known = {m.name for m in modules()} | {m.name for m in mods}
    problems = []
    for m in mods:
        own = layer_of(m.name)
        for imp in imports_of(m, known):
            theirs = layer_of(imp.target)
            if theirs is None or own is None:
                continue  # reported by test_every_module_has_a_layer
            if RANK[theirs] < RANK[own]:
                problems.append(
                    f"{_shown(m.path)}:{imp.line}: {m.name} ({own}) imports "
                    f"{imp.target} ({theirs}), a layer above its own"
                )
    return problems


def _shown(path: Path) -> str:
    return str(path.relative_to(SRC)) if path.is_relative_to(SRC) else path.name


def test_every_module_has_a_layer():
    unplaced = [str(m.path.relative_to(SRC)) for m in modules() if layer_of(m.name) is None]
    assert not unplaced, f"modules in no layer (add them to LAYERS): {unplaced}"


def test_no_module_imports_from_a_layer_above_its_own():
    problems = upward_imports(modules())
    assert not problems, "upward imports:\n" + "\n".join(problems)


def test_the_table_names_each_layer_once_and_each_entry_once():
    names = [name for name, _ in LAYERS]
    entries = [e for _, group in LAYERS for e in group]
    assert len(set(names)) == len(names)
    assert len(set(entries)) == len(entries)


def import_graph(mods: list[Module]) -> dict[str, set[str]]:
    """Module -> the dataferry modules it imports (a name imported from a module counts as
    that module; imports inside functions and under TYPE_CHECKING count too)."""
    known = {m.name for m in mods}
    graph: dict[str, set[str]] = {m.name: set() for m in mods}
    for m in mods:
        for imp in imports_of(m, known):
            target = imp.target
            while target not in known and "." in target:
                target = target.rpartition(".")[0]
            if target in known and target != m.name:
                graph[m.name].add(target)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    cycles.append(sorted(group))
    return cycles


def test_no_module_is_part_of_an_import_cycle():
    cycles = import_cycles(import_graph(modules()))
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_check_finds_a_cycle_through_a_function_level_import(tmp_path):
    a, b, c = tmp_path / "a.py", tmp_path / "b.py", tmp_path / "c.py"
    a.write_text("from . import b\n")
    b.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .c import X\n")
    c.write_text("def later():\n    from .a import Y\n")
    mods = [Module(f"dataferry.{p.stem}", p, False) for p in (a, b, c)]
    assert import_cycles(import_graph(mods)) == [["dataferry.a", "dataferry.b", "dataferry.c"]]
    c.write_text("X = 1\n")
    assert import_cycles(import_graph(mods)) == []


# --- the checker itself, on modules made up for it ---------------------------------------------


def test_the_checker_resolves_relative_and_nested_imports(tmp_path):
    source = tmp_path / "commit" / "x.py"
    source.parent.mkdir()
    source.write_text(
        "from ..store import paths\n"
        "from . import protocol\n"
        "def later():\n"
        "    from ..dataset.write import write_dataset\n"
        "    import dataferry.engine.local\n"
    )
    module = Module("dataferry.commit.x", source, is_package=False)
    known = {"dataferry.store.paths", "dataferry.commit.protocol"}
    found = [(i.line, i.target) for i in imports_of(module, known)]
    assert found == [
        (1, "dataferry.store.paths"),
        (2, "dataferry.commit.protocol"),
        (4, "dataferry.dataset.write"),
        (5, "dataferry.engine.local"),
    ]
    ranks = {t: RANK[layer_of(t)] for _, t in found}
    above = [t for t, r in ranks.items() if r < RANK["commit"]]
    assert above == ["dataferry.dataset.write", "dataferry.engine.local"]


def test_the_checker_names_an_upward_import_and_allows_the_rest(tmp_path):
    engine = tmp_path / "fake_engine.py"
    engine.write_text(
        '"""An engine module that reaches up."""\n'
        "from ..commit.protocol import Committer\n"
        "from .local import LocalEngine\n"
        "def later():\n"
        "    from ..dataset.write import write_dataset\n"
    )
    store = tmp_path / "fake_store.py"
    store.write_text("from ..errors import StoreError\nfrom . import paths\n")
    problems = upward_imports(
        [
            Module("dataferry.engine.fake_engine", engine, is_package=False),
            Module("dataferry.store.fake_store", store, is_package=False),
        ]
    )
    assert problems == [
        "fake_engine.py:5: dataferry.engine.fake_engine (engine) imports "
        "dataferry.dataset.write (dataset), a layer above its own"
    ]


def test_layer_of_places_packages_modules_and_the_public_surface():
    assert layer_of("dataferry.store.base") == "store"
    assert layer_of("dataferry.net") == layer_of("dataferry.net.server") == "net"
    assert layer_of("dataferry.cli") == layer_of("dataferry.cli.app") == "cli"
    assert layer_of("dataferry") == layer_of("dataferry.ray") == "dataset"
    assert layer_of("dataferry.errors") == "basics"
    assert layer_of("dataferry.nowhere") is None


# --- size -------------------------------------------------------------------------------------


def _too_long(cli: bool) -> list[str]:
    out = []
    for m in modules():
        if (layer_of(m.name) == "cli") != cli:
            continue
        lines = len(m.path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            out.append(f"{m.path.relative_to(SRC)}: {lines} lines")
    return out


def test_no_module_is_over_500_lines():
    too_long = _too_long(cli=False)
    assert not too_long, f"modules over {MAX_LINES} lines: {too_long}"


def test_no_command_line_module_is_over_500_lines():
    too_long = _too_long(cli=True)
    assert not too_long, f"modules over {MAX_LINES} lines: {too_long}"


@pytest.mark.parametrize("entry", [e for _, group in LAYERS for e in group])
def test_each_entry_of_the_table_names_a_module(entry):
    """A row whose module moved away is a stale rule: it must go with it."""
    name = f"{PACKAGE}.{entry}" if entry else PACKAGE
    assert name in {m.name for m in modules()}, f"{name} is in LAYERS but not in src/"


# --- names retired from src/ (dead code removed, misleading names renamed) -------------------

DEAD = ("is_task_attempt_path", "run_coroutine", "total_seconds")  # defined nowhere
RETIRED_CLASSES = (
    "MergerConfig",  # the shuffle service's config is ShuffleServiceConfig
    "StageClock",  # a multi-step algorithm's stages are of the stage base (stages.py)
)
ONE_CLASS = ("ServiceProcess",)  # one base class (net/process.py); each service names its own
RETIRED_CONSTANTS = ("MAGIC",)  # shuffle: FRAME_MAGIC (a frame) and BLOCK_MAGIC (a block)
COMMITTER_ABBREVIATION = "com"  # a committer is `committer` (or what it is for), never `com`


def names_in(path: Path) -> dict[str, list[str]]:
    """Functions, classes, module constants and local names (assigned or parameters)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: dict[str, list[str]] = {"def": [], "class": [], "constant": [], "local": []}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found["def"].append(node.name)
            found["local"] += [a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)]
        elif isinstance(node, ast.ClassDef):
            found["class"].append(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found["local"].append(node.id)
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        found["constant"] += [t.id for t in targets if isinstance(t, ast.Name)]
    return found


def retired_names(mods: list[Module]) -> dict[str, list[str]]:
    """What in `mods` uses a retired name, by rule: module path and the name."""
    out: dict[str, list[str]] = {"dead": [], "class": [], "one class": [], "constant": []}
    out["abbreviation"] = []
    classes: dict[str, list[str]] = {}
    for m in mods:
        shown = _shown(m.path)
        found = names_in(m.path)
        out["dead"] += [f"{shown}: {n}" for n in found["def"] if n in DEAD]
        out["class"] += [f"{shown}: {n}" for n in found["class"] if n in RETIRED_CLASSES]
        out["constant"] += [f"{shown}: {n}" for n in found["constant"] if n in RETIRED_CONSTANTS]
        if COMMITTER_ABBREVIATION in found["local"]:
            out["abbreviation"].append(f"{shown}: {COMMITTER_ABBREVIATION}")
        for n in found["class"]:
            if n in ONE_CLASS:
                classes.setdefault(n, []).append(shown)
    out["one class"] = [
        f"{n} in {', '.join(where)}" for n, where in classes.items() if len(where) > 1
    ]
    return out


def test_retired_names_stay_retired():
    found = retired_names(modules())
    assert not any(found.values()), found


def test_the_name_check_finds_each_retired_name(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text(
        "MAGIC = b'x'\n"
        "class MergerConfig: ...\n"
        "class ServiceProcess: ...\n"
        "def total_seconds(self): ...\n"
        "def run(com): ...\n"
    )
    b.write_text("class ServiceProcess: ...\ndef f():\n    com = 1\n")
    mods = [Module("dataferry.a", a, False), Module("dataferry.b", b, False)]
    found = retired_names(mods)
    assert found == {
        "dead": ["a.py: total_seconds"],
        "class": ["a.py: MergerConfig"],
        "one class": ["ServiceProcess in a.py, b.py"],
        "constant": ["a.py: MAGIC"],
        "abbreviation": ["a.py: com", "b.py: com"],
    }
    b.write_text("def f(committer):\n    FRAME_MAGIC = 1\n    return committer.name\n")
    assert not any(retired_names([Module("dataferry.b", b, False)]).values())


# --- one house plan: the architecture page states the table's order ----------------------------

ARCHITECTURE_PAGE = SRC.parent / "docs" / "architecture.md"


def page_layer_order(text: str) -> list[str]:
    """The layers in the order the page's diagram chains them (`a --> b --> c` lines)."""
    order: list[str] = []
    for line in text.splitlines():
        if "-->" not in line:
            continue
        for name in (part.strip() for part in line.split("-->")):
            if not order or order[-1] != name:
                order.append(name)
    return order


def test_the_architecture_page_states_the_layer_tables_order():
    order = page_layer_order(ARCHITECTURE_PAGE.read_text(encoding="utf-8"))
    assert order == [name for name, _ in LAYERS], (
        "docs/architecture.md orders the layers differently from LAYERS"
    )


def test_the_page_order_check_reads_a_chain_across_lines():
    text = "```mermaid\n    a --> b --> c\n    c --> d\n```\n"
    assert page_layer_order(text) == ["a", "b", "c", "d"]
