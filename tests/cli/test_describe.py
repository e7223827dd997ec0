"""Errors from outside dataferry's own tree, described in one line that names what is at
fault (the errors the stores do not translate themselves)."""

from __future__ import annotations

import socket
import sqlite3

import pytest

from dataferry.cli.failures import describe, one_line
from dataferry.errors import ConfigError
from dataferry.extras import MissingDependency


class NoCredentialsError(Exception):
    """botocore's exception of this name, as the CLI sees it (by name: boto3 is optional)."""


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (ConfigError("option 'x' out of range"), "option 'x' out of range"),
        (MissingDependency("boto3", "s3://"), "pip install 'dataferry[s3]'"),
        (ModuleNotFoundError("No module named 'distributed'", name="distributed"), "[dask]"),
        (NoCredentialsError("Unable to locate credentials"), "AWS_ACCESS_KEY_ID"),
        (socket.gaierror(-2, "Name or service not known"), "Name or service not known"),
        (sqlite3.DatabaseError("file is not a database"), "file is not a database"),
        (FileNotFoundError(2, "No such file or directory", "in.parquet"), "in.parquet: No such"),
        (PermissionError(13, "Permission denied", "a", None, "b"), "a -> b: Permission denied"),
        (OverflowError("bind(): port must be 0-65535."), "OverflowError: bind(): port"),
        (RuntimeError("surprise"), "--debug shows where"),
    ],
)
def test_describe_names_what_is_at_fault(error, says):
    line = describe(error)
    assert says in line and "\n" not in line


def test_one_line_joins_lines():
    assert one_line("first\n\n  second  \n") == "first second"
