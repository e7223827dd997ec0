"""The declarative committer registry and the hooks each committer declares."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dataferry import make_committer
from dataferry.commit.base import Committer
from dataferry.commit.factory import known_committers
from dataferry.commit.lookup import committer_for
from dataferry.commit.registry import KNOWN, committer_classes
from dataferry.errors import ConfigError


def test_every_committer_is_one_row_loaded_lazily():
    code = (
        "import sys, dataferry.commit.registry as r, dataferry.commit.protocol;"
        "mods=[m for m in sys.modules if m.startswith('dataferry.commit.')];"
        "print(sorted(mods))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = out.stdout
    for lazy in ("manifest", "magic", "staging", "hive", "direct", "fileoutput"):
        assert f"dataferry.commit.{lazy}" not in loaded, loaded
    # the protocol no longer reaches back into the factory (the old import cycle)
    import ast
    import inspect

    import dataferry.commit.protocol as protocol

    tree = ast.parse(inspect.getsource(protocol))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "factory" not in imported
    assert known_committers() == sorted([*KNOWN, "auto"])
    for spec in KNOWN.values():
        cls = spec.committer_class()
        assert issubclass(cls, Committer)
        spec.config_class()(**spec.defaults)  # the defaults build a valid config


def test_each_committer_class_declares_its_own_leftovers(tmp_path):
    classes = {cls.__name__ for cls in committer_classes()}
    assert classes == {
        "FileOutputCommitter",
        "ManifestCommitter",
        "MagicCommitter",
        "GcsMagicCommitter",
        "BlockListCommitter",
        "DirectoryStagingCommitter",
        "PartitionedStagingCommitter",
        "HiveCommitter",
        "DirectCommitter",
        *(s.class_name for s in KNOWN.values() if s.family == "table"),
    }
    for cls in committer_classes():
        assert cls.leftovers.__func__ is not Committer.leftovers.__func__, cls


def test_write_modes_are_prepared_by_the_committer(tmp_path):
    assert make_committer("manifest", tmp_path, mode="overwrite").write_mode == "overwrite"
    hive = make_committer("hive", tmp_path, mode="overwrite")
    assert hive.write_mode == "append" and hive.config.mode == "overwrite"
    assert make_committer("hive", tmp_path, mode="error").config.mode == "append"
    with pytest.raises(ConfigError, match="unknown write mode 'upsert'"):
        make_committer("manifest", tmp_path, mode="upsert")
    with pytest.raises(ConfigError, match="unknown hive mode 'upsert'"):
        make_committer("hive", tmp_path, mode="upsert")


def test_a_worker_rebuilds_the_committer_and_its_mode_from_the_context(tmp_path):
    c = make_committer("manifest", tmp_path, mode="overwrite", io_threads=3)
    job = c.new_job()
    rebuilt = committer_for(job.task(0))
    assert type(rebuilt) is type(c) and rebuilt.config.io_threads == 3
    assert rebuilt.write_mode == "overwrite" and job.mode == "overwrite"
