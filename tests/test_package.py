"""The package's face: what `dir(dataferry)` offers (IPython completes from it)."""

from __future__ import annotations

import subprocess
import sys

import dataferry


def test_dir_lists_every_lazy_entry_point_and_each_resolves():
    """Breaking it: `dataferry.wri<TAB>` in IPython completes nothing (the entry points load
    lazily through a module `__getattr__`, which `dir()` cannot see without `__dir__`)."""
    names = dir(dataferry)
    for name in (*dataferry.__all__, "write_dataset", "write_deltalake", "make_committer"):
        assert name in names, name
        assert getattr(dataferry, name) is not None
    assert dataferry.write_dataset.__module__ == "dataferry.dataset.write"
    assert names == sorted(names)


def test_dir_loads_nothing_heavy():
    """Completing names must not import the write path (pyarrow and all) behind the user's
    back: `dir()` names the lazy entry points without loading them."""
    code = (
        "import sys, dataferry\n"
        "names = dir(dataferry)\n"
        "assert 'write_deltalake' in names, names\n"
        "assert 'dataferry.dataset.write' not in sys.modules\n"
        "assert 'dataferry.dataset.tables' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
