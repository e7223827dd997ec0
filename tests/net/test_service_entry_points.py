"""A service process is started without importing the command line: each service's entry point
lives in its own layer and parses only its own arguments (net is below cli; a
``python -m dataferry.cli`` in a service's launcher is an upward dependency the layer test
cannot see, so it is checked here)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from dataferry.markers import MarkerServiceProcess
from dataferry.shuffle import ShuffleServiceProcess

SRC = Path(__file__).resolve().parents[2] / "src" / "dataferry"
ENTRY_POINTS = ("dataferry.markers.serve", "dataferry.shuffle.serve")


@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_entry_point_does_not_import_the_command_line(module):
    code = (
        f"import sys, runpy; sys.argv = [{module!r}, '--help']\n"
        "try:\n"
        f"    runpy.run_module({module!r}, run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "assert 'dataferry.cli' not in sys.modules, 'dataferry.cli imported'\n"
        "assert 'typer' not in sys.modules, 'typer imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "--port" in done.stdout and "--tls-cert" in done.stdout


def test_service_processes_run_their_own_layers_entry_point(tmp_path):
    markers = MarkerServiceProcess(str(tmp_path / "t"), "token")
    shuffle = ShuffleServiceProcess(str(tmp_path / "n"), "token")
    assert markers.program == [sys.executable, "-m", "dataferry.markers.serve"]
    assert shuffle.program == [sys.executable, "-m", "dataferry.shuffle.serve"]


def test_no_layer_below_the_command_line_launches_it():
    """No module outside cli/ names ``dataferry.cli`` (as a module to run or import)."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path.relative_to(SRC).parts[0] == "cli":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            text = node.value if isinstance(node, ast.Constant) else None
            if isinstance(text, str) and (
                text == "dataferry.cli" or text.startswith("dataferry.cli.")
            ):
                found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not found, found


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["dataferry.markers.serve", "--dest", "d", "--port", "70000"], "--port"),
        (["dataferry.shuffle.serve", "--dir", "d", "--host", "999.1.1.1"], "999.1.1.1"),
        (["dataferry.shuffle.serve", "--dir", "d", "--tls-cert", "c.pem"], "go together"),
    ],
)
def test_bad_usage_is_refused_before_the_service_starts(argv, words):
    done = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and words in done.stderr, done.stderr
