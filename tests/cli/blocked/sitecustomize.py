"""Make the modules named in DATAFERRY_TEST_BLOCK (comma-separated) impossible to import, as if
they were not installed. Put this directory first on PYTHONPATH of a subprocess."""

import os
import sys
from importlib.abc import MetaPathFinder

BLOCKED = {n.strip() for n in os.environ.get("DATAFERRY_TEST_BLOCK", "").split(",") if n.strip()}


class _Blocker(MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


if BLOCKED:
    sys.meta_path.insert(0, _Blocker())
