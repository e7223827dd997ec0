"""Every example in the README and in docs/ runs as a user runs it.

Each ```python block is saved as `example.py` in a fresh temporary directory and run with
`python example.py` in a subprocess, in that directory: it must be self-contained (its own
imports, data and files), and one that starts processes (Dask, Ray, a process pool) must keep
its work under `if __name__ == "__main__":`, as multiprocessing's spawn and forkserver re-import
the script. Each ```bash block runs its `dataferry` lines as commands (a comment saying "exit
code N" names the code expected; `make` lines are the setup, run by CI itself) in a fresh
directory too; first, in that directory and in page order, the page's earlier python blocks that
write a local path the commands name (a string in the block's code) run as scripts, so
`dataferry cleanup out/ops` finds the table a block above it wrote. Blocks are collected per
block, with ids `PAGE-N` (N counts the page's python and bash blocks from 1).
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PAGES = [p for p in PAGES if p.name != "benchmarks.md"]  # generated, no examples
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```", re.S | re.M)
RUN = ("python", "bash")
SCRIPT_TIMEOUT_S = 180  # one python block, or one command of a bash block
BUCKET = "bucket"  # the S3 examples' bucket
MEMORY_DISK = Path("/dev/shm")


@dataclass(frozen=True)
class Block:
    page: Path
    index: int  # among the page's python and bash blocks, from 1
    lang: str
    code: str
    line: int  # of the block's first code line in the page

    @property
    def id(self) -> str:
        return f"{self.page.name}-{self.index}"

    def describe(self) -> str:
        first = next((ln for ln in self.code.splitlines() if ln.strip()), "")
        return f"{self.page.relative_to(ROOT)} block {self.index} (line {self.line}): {first}"


def fences(page: Path) -> list[tuple[str, str, int]]:
    """(language, code, line of the first code line) of every fenced block of a page."""
    text = page.read_text()
    return [
        (m.group(1), m.group(2), text.count("\n", 0, m.start(2)) + 1) for m in FENCE.finditer(text)
    ]


def blocks(page: Path) -> list[Block]:
    runnable = [f for f in fences(page) if f[0] in RUN]
    return [Block(page, i, lang, code, line) for i, (lang, code, line) in enumerate(runnable, 1)]


ALL = [b for p in PAGES for b in blocks(p)]
PYTHON = [b for b in ALL if b.lang == "python"]


# --- what a block starts and names ------------------------------------------------------------

PROCESS_CALLS = {"LocalCluster", "Client", "ProcessPoolExecutor", "LocalShuffle"}
DOTTED_PROCESS_CALLS = {"ray.init", "multiprocessing.Pool", "multiprocessing.Process"}
ENGINE_CALLS = {"LocalEngine", "LocalEngineConfig"}  # processes unless told otherwise


def _starts_processes(call: ast.Call) -> bool:
    func = call.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    if name in PROCESS_CALLS or ast.unparse(func) in DOTTED_PROCESS_CALLS:
        return True
    if name in ENGINE_CALLS and not call.args:  # LocalEngine(config): the config decides
        kw = {k.arg: k.value for k in call.keywords}
        threads = isinstance(kw.get("executor"), ast.Constant) and kw["executor"].value == "threads"
        inline = isinstance(kw.get("workers"), ast.Constant) and kw["workers"].value == 0
        return not (threads or inline)
    return False


def _is_main_guard(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and ast.unparse(node.test).replace("'", '"') == '__name__ == "__main__"'
    )


def unguarded_process_starts(code: str) -> list[str]:
    """The calls of a script that start processes outside `if __name__ == "__main__":` (and
    outside any function, which only runs when called)."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if _is_main_guard(node) or isinstance(
            node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
        ):
            return
        if isinstance(node, ast.Call) and _starts_processes(node):
            found.append(f"line {node.lineno}: {ast.unparse(node.func)}(...)")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(code))
    return found


def string_literals(code: str) -> set[str]:
    return {
        n.value
        for n in ast.walk(ast.parse(code))
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def commands(block: Block) -> list[tuple[str, list[str], int]]:
    """(line, arguments after `dataferry`, expected exit code) of a bash block's commands."""
    out = []
    for line in block.code.splitlines():
        command, _, comment = line.partition("#")
        command = command.strip()
        if not command or command.startswith("make "):
            continue
        assert command.startswith("dataferry "), f"{block.describe()}: cannot run {line!r}"
        expected = int(m.group(1)) if (m := re.search(r"exit code (\d+)", comment)) else 0
        out.append((line, shlex.split(command)[1:], expected))
    return out


def setup_blocks(block: Block) -> list[Block]:
    """The earlier python blocks of a bash block's page that write a local path it names."""
    if block.lang != "bash":
        return []
    paths = {
        a.rstrip("/")
        for _, args, _ in commands(block)
        for a in args
        if not a.startswith("-") and "://" not in a
    }

    def related(a: str, b: str) -> bool:
        return a == b or a.startswith(b + "/") or b.startswith(a + "/")

    return [
        b
        for b in blocks(block.page)[: block.index - 1]
        if b.lang == "python"
        and any(related(p, s.rstrip("/")) for p in paths for s in string_literals(b.code) if s)
    ]


def needs_s3(block: Block) -> bool:
    return any("s3://" in b.code for b in [block, *setup_blocks(block)])


def needs_gcs(block: Block) -> bool:
    return any("gs://" in b.code for b in [block, *setup_blocks(block)])


# --- running ----------------------------------------------------------------------------------


def run(argv: list[str], cwd: Path, what: str) -> subprocess.CompletedProcess[str]:
    """Run a command in its own process group (so whatever it leaves behind is ended with it)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(cwd.parent / "tmp")}
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=SCRIPT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(
            f"{what}\n`{shlex.join(argv[1:])}` did not finish within {SCRIPT_TIMEOUT_S} s\n"
            f"--- stdout\n{stdout}\n--- stderr\n{stderr}",
            pytrace=False,
        )
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # stragglers of this command only
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


def run_python(block: Block, cwd: Path, what: str) -> None:
    script = cwd / "example.py"
    script.write_text(block.code)
    done = run([sys.executable, script.name], cwd, what)
    if done.returncode != 0:
        pytest.fail(
            f"{what}\n`python example.py` exited with {done.returncode}\n"
            f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}",
            pytrace=False,
        )


@pytest.fixture
def workdir(tmp_path):
    """A fresh, empty directory to run in, with a TMPDIR of its own beside it, on tmpfs where
    there is one: the examples, Dask, Ray and the crash harness make and remove thousands of
    small files, and on a disk mounted with `discard` every rmdir waits for the device."""
    memory = MEMORY_DISK.is_dir() and os.access(MEMORY_DISK, os.W_OK)
    base = Path(tempfile.mkdtemp(prefix="df-", dir=MEMORY_DISK)) if memory else tmp_path
    (base / "run").mkdir()
    (base / "tmp").mkdir()
    yield base / "run"
    if memory:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def examples_s3(s3_server):
    """The S3 server with the examples' bucket."""
    import boto3

    try:
        boto3.client("s3").create_bucket(Bucket=BUCKET)
    except Exception as e:  # made by an earlier session user of the server
        assert "BucketAlready" in type(e).__name__ or "BucketAlready" in str(e), e
    return s3_server


@pytest.fixture(scope="session")
def examples_gcs(fakegcs):
    """fake-gcs-server with the examples' bucket (gcsfs pointed at it by the environment)."""
    import urllib.error

    try:
        fakegcs.create_bucket(BUCKET)
    except urllib.error.HTTPError as e:  # made by an earlier session user of the server
        assert e.code == 409, e
    return fakegcs


# --- the tests --------------------------------------------------------------------------------


def test_every_page_with_examples_is_collected():
    names = {p.name for p in PAGES if blocks(p)}
    assert {"README.md", "protocols.md", "operations.md", "engines.md", "writing.md"} <= names


def test_no_example_hides_under_another_language():
    for page in PAGES:
        for lang, _, line in fences(page):
            assert lang not in {"py", "python3", "sh", "shell", "console", "zsh"}, (
                f"{page.name} line {line}: ```{lang} is not run; use ```python or ```bash"
            )


@pytest.mark.parametrize("block", PYTHON, ids=[b.id for b in PYTHON])
def test_process_starting_examples_have_a_main_guard(block):
    unguarded = unguarded_process_starts(block.code)
    if unguarded:
        pytest.fail(
            f'{block.describe()}\nstarts processes outside `if __name__ == "__main__":`, which '
            f"fails when it is saved and run as a script: {', '.join(unguarded)}",
            pytrace=False,
        )


@pytest.mark.parametrize(
    ("code", "unguarded"),
    [
        ("from distributed import LocalCluster\nc = LocalCluster(n_workers=2)", 1),
        ("import ray\nray.init(num_cpus=2)", 1),
        ("from dataferry.engine.local import LocalEngine\ne = LocalEngine(workers=2)", 1),
        ("import dataferry\ndataferry.write_dataset(t, 'o', engine=LocalEngineConfig())", 1),
        ("dataferry.write_dataset(t, 'o', engine=LocalEngineConfig(executor='threads'))", 0),
        ("dataferry.write_dataset(t, 'o', engine=LocalEngine(workers=0))", 0),
        ("dataferry.write_dataset(t, 'o')", 0),
        ("if __name__ == '__main__':\n    with LocalShuffle() as c:\n        pass", 0),
        ("def main():\n    Client(LocalCluster())\n\nif __name__ == '__main__':\n    main()", 0),
    ],
)
def test_main_guard_check_finds_process_starts(code, unguarded):
    assert len(unguarded_process_starts(code)) == unguarded


@pytest.mark.slow
@pytest.mark.parametrize("block", ALL, ids=[b.id for b in ALL])
def test_example_runs(block, workdir, request):
    if needs_s3(block):
        request.getfixturevalue("examples_s3")
    if needs_gcs(block):
        request.getfixturevalue("examples_gcs")
    if block.lang == "python":
        run_python(block, workdir, block.describe())
        return
    for setup in setup_blocks(block):
        run_python(setup, workdir, f"{setup.describe()} (run first for {block.id})")
    for line, args, expected in commands(block):
        done = run([sys.executable, "-m", "dataferry.cli", *args], workdir, block.describe())
        if done.returncode != expected:
            pytest.fail(
                f"{block.describe()}\n$ {line.strip()}\nexited with {done.returncode}, expected "
                f"{expected}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}",
                pytrace=False,
            )
