"""A missing optional package names the extra that installs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dataferry.errors import DataferryError
from dataferry.extras import MissingDependency, install_hint, missing_dependency, require

BLOCKER = str(Path(__file__).parent / "cli" / "blocked")


def test_require_imports_or_names_the_extra():
    assert require("json").dumps([]) == "[]"
    with pytest.raises(MissingDependency) as caught:
        require("distributed_that_is_not_there", "a feature")
    assert isinstance(caught.value, DataferryError) and isinstance(caught.value, ImportError)
    assert "a feature needs distributed_that_is_not_there" in str(caught.value)


def test_hints():
    assert install_hint("botocore.exceptions") == "pip install 'dataferry[s3]'"
    assert install_hint("distributed") == "pip install 'dataferry[dask]'"
    assert install_hint("matplotlib.pyplot") == "pip install 'dataferry[report]'"
    assert install_hint("gcsfs") == "pip install 'dataferry[gcs]'"
    assert install_hint("ossfs") == "pip install 'ossfs'"  # no extra: the package itself
    err = missing_dependency(ModuleNotFoundError("No module named 'ray'", name="ray"))
    assert err is not None and "pip install 'dataferry[ray]'" in str(err)
    err = missing_dependency(ImportError("Install s3fs to access S3"))
    assert err is not None and "pip install 'dataferry[s3]'" in str(err)
    assert missing_dependency(ImportError("cannot import name 'x' from 'y'")) is None


@pytest.mark.parametrize(
    ("blocked", "code", "extra"),
    [
        ("dask", "import dataferry.dask as d; d.to_parquet(None, 'out')", "dataferry[dask]"),
        ("distributed", "import dataferry.dask as d; d.shuffle(None, 'k')", "dataferry[dask]"),
        ("ray", "import dataferry.ray as r; r.CommitDatasink('out')", "dataferry[ray]"),
        ("daft", "import dataferry.daft as d; d.CommitSink('out')", "dataferry[daft]"),
        ("moto", "from dataferry.testing import LocalS3Server as S; S().start()", "[testserver]"),
    ],
)
def test_integrations_name_their_extra_when_it_is_missing(blocked, code, extra):
    env = {**os.environ, "PYTHONPATH": BLOCKER, "DATAFERRY_TEST_BLOCK": blocked}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("dataferry.extras.MissingDependency") and extra in last, last


# what the core install leaves out: each comes with the extra that needs it
NOT_CORE = ("pandas", "pyroaring", "cryptography", "moto")


def test_the_core_install_is_what_a_local_write_and_the_command_line_need():
    import re
    from importlib.metadata import requires

    core = {
        re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0].lower()
        for r in requires("dataferry") or []
        if "extra ==" not in r
    }
    # h11: the marker service's HTTP/1.1 (pure Python, no dependencies of its own);
    # msgspec: the manifest committer's decoder (the default committer of a local write)
    assert core == {"pyarrow", "numpy", "fsspec", "typer", "rich", "h11", "msgspec"}


def test_a_write_and_the_demo_run_without_the_extras_and_import_none_of_them(tmp_path):
    env = {**os.environ, "PYTHONPATH": BLOCKER, "DATAFERRY_TEST_BLOCK": ",".join(NOT_CORE)}
    code = (
        "import sys, pyarrow as pa, dataferry, dataferry.cli\n"
        "t = pa.table({'k': ['a', 'b'] * 50, 'v': list(range(100))})\n"
        "dataferry.write_dataset(t, sys.argv[1], partition_by=['k'])\n"
        f"loaded = [m for m in {NOT_CORE!r} if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "_SUCCESS").exists()
    demo = subprocess.run(
        [sys.executable, "-m", "dataferry.cli", "demo", "--rows", "20000", "--tasks", "4"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert demo.returncode == 0, demo.stderr
    assert "shuffle tour skipped" in demo.stdout and "dataferry[shuffle]" in demo.stdout
