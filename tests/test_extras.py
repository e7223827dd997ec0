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
        ("moto", "from dataferry.testing import LocalS3Server as S; S().start()", "[report]"),
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
