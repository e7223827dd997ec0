"""Every example in the README and in docs/ runs: Python blocks in order (one namespace per
page, in a scratch directory), and the `dataferry` lines of bash blocks as commands (a comment
saying "exit code N" names the code expected; `make` lines are the setup, run by CI itself)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PAGES = [p for p in PAGES if p.name != "benchmarks.md"]  # generated, no examples
BLOCK = re.compile(r"```(python|bash)\n(.*?)```", re.S)


def blocks(page: Path) -> list[tuple[str, str]]:
    return BLOCK.findall(page.read_text())


def test_every_page_with_examples_is_collected():
    names = {p.name for p in PAGES if blocks(p)}
    assert {"README.md", "protocols.md", "operations.md", "engines.md"} <= names


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_examples_run(page, tmp_path, monkeypatch, s3_server):
    found = blocks(page)
    if not found:
        pytest.skip("no examples")
    import boto3

    try:
        boto3.client("s3").create_bucket(Bucket="bucket")  # the examples' S3 bucket
    except Exception as e:  # made for an earlier page
        assert "BucketAlready" in type(e).__name__ or "BucketAlready" in str(e), e
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    for lang, code in found:
        if lang == "python":
            exec(compile(code, f"{page.name}", "exec"), namespace)
            continue
        for line in code.splitlines():
            command, _, comment = line.partition("#")
            if not command.strip().startswith("dataferry "):
                assert not command.strip() or command.strip().startswith("make "), line
                continue
            expected = int(m.group(1)) if (m := re.search(r"exit code (\d+)", comment)) else 0
            args = shlex.split(command)[1:]
            done = subprocess.run(
                [sys.executable, "-m", "dataferry.cli", *args],
                capture_output=True,
                text=True,
                timeout=600,
                env=os.environ.copy(),
            )
            assert done.returncode == expected, f"{line}\n{done.stdout}\n{done.stderr}"
