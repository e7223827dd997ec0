"""The partition catalog: the role of Hive's metastore in a load.

It records tables, their partitions, each partition's file count and bytes, and the job that last
wrote it. The embedded default is a SQLite file (standard library; beside or outside the table).
A load records all of its partitions in one transaction, and recording is idempotent (the values
are the partition's state after the load), so a load rerun after a crash between moving files
and registering them leaves the catalog consistent with the table.
"""

from __future__ import annotations

import os
import sqlite3
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote

from ...errors import ConfigError, NotFound

Replace = Literal["none", "partitions", "table"]


@dataclass(frozen=True)
class PartitionRecord:
    spec: str  # "day=2026-11-01/region=eu", or "" for an unpartitioned table
    location: str
    files: int
    bytes: int
    job_id: str = ""
    updated: float = 0.0


@dataclass(frozen=True)
class TableRecord:
    name: str
    location: str
    partitions: int
    files: int
    bytes: int


class Catalog(ABC):
    @abstractmethod
    def record_load(
        self,
        table: str,
        location: str,
        partitions: Iterable[PartitionRecord],
        job_id: str,
        replace: Replace = "none",
    ) -> None:
        """Register a load: its partitions' states after the load, in one transaction.
        replace="table" drops partitions the load did not write."""

    @abstractmethod
    def tables(self) -> list[TableRecord]: ...

    @abstractmethod
    def partitions(self, table: str) -> list[PartitionRecord]: ...

    def find_table(self, name_or_location: str) -> TableRecord:
        """The table with this name, or else at this location; when there is none, the
        error lists the tables there are."""
        tables = self.tables()
        for t in tables:
            if t.name == name_or_location:
                return t
        wanted = location_forms(name_or_location)
        for t in tables:
            if t.location.rstrip("/") in wanted:
                return t
        known = ", ".join(t.name for t in tables) or "none"
        raise ConfigError(
            f"table {name_or_location!r} is not in the catalog {self.where()} "
            f"(by name or location); its tables: {known}"
        )

    def where(self) -> str:
        """Where the catalog is, for messages."""
        return type(self).__name__


def location_forms(location: str) -> set[str]:
    """The ways a table's location may have been recorded: as given, and for a local path,
    absolute and as a file:// URL."""
    forms = {location, location.rstrip("/")}
    if "://" not in location:
        absolute = os.path.abspath(location).rstrip("/")
        forms |= {absolute, f"file://{absolute}"}
    return forms


SCHEMA = """
CREATE TABLE IF NOT EXISTS tables (
    name TEXT PRIMARY KEY,
    location TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS partitions (
    table_name TEXT NOT NULL REFERENCES tables(name),
    spec TEXT NOT NULL,
    location TEXT NOT NULL,
    files INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    job_id TEXT NOT NULL,
    updated REAL NOT NULL,
    PRIMARY KEY (table_name, spec)
);
"""


class SQLiteCatalog(Catalog):
    """The catalog in a SQLite file. With `create=False` the file must exist and is opened
    read-only: looking at a catalog never creates or changes one."""

    def __init__(self, path: str, create: bool = True) -> None:
        self.path = os.path.abspath(path)
        self.create = create
        if not create:
            if not os.path.isfile(self.path):
                raise NotFound(f"catalog {self.path}: no such file", self.path)
            return
        parent = os.path.dirname(self.path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        with self._connect() as db:
            db.executescript(SCHEMA)

    def __reduce__(self):
        return (SQLiteCatalog, (self.path, self.create))

    def where(self) -> str:
        return self.path

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            if self.create:
                db = sqlite3.connect(self.path, timeout=30)
            else:
                db = sqlite3.connect(f"file:{quote(self.path)}?mode=ro", uri=True, timeout=30)
            try:
                with db:  # one transaction: commit on success, roll back on error
                    yield db
            finally:
                db.close()
        except sqlite3.DatabaseError as e:
            raise ConfigError(f"catalog {self.path}: not a dataferry catalog ({e})") from e

    def record_load(
        self,
        table: str,
        location: str,
        partitions: Iterable[PartitionRecord],
        job_id: str,
        replace: Replace = "none",
    ) -> None:
        now = time.time()
        rows = [(table, p.spec, p.location, p.files, p.bytes, job_id, now) for p in partitions]
        with self._connect() as db:
            db.execute(
                "INSERT INTO tables(name, location, created) VALUES (?, ?, ?) "
                "ON CONFLICT(name) DO UPDATE SET location = excluded.location",
                (table, location, now),
            )
            if replace == "table":
                db.execute("DELETE FROM partitions WHERE table_name = ?", (table,))
            db.executemany(
                "INSERT INTO partitions(table_name, spec, location, files, bytes, job_id, updated) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(table_name, spec) DO UPDATE SET "
                "location = excluded.location, files = excluded.files, bytes = excluded.bytes, "
                "job_id = excluded.job_id, updated = excluded.updated",
                rows,
            )

    def tables(self) -> list[TableRecord]:
        with self._connect() as db:
            rows = db.execute(
                "SELECT t.name, t.location, COUNT(p.spec), COALESCE(SUM(p.files), 0), "
                "COALESCE(SUM(p.bytes), 0) FROM tables t LEFT JOIN partitions p "
                "ON p.table_name = t.name GROUP BY t.name ORDER BY t.name"
            ).fetchall()
        return [TableRecord(*r) for r in rows]

    def partitions(self, table: str) -> list[PartitionRecord]:
        """A table's partitions; `table` is its name or its location (a path or URL)."""
        name = self.find_table(table).name
        with self._connect() as db:
            rows = db.execute(
                "SELECT spec, location, files, bytes, job_id, updated FROM partitions "
                "WHERE table_name = ? ORDER BY spec",
                (name,),
            ).fetchall()
        return [PartitionRecord(*r) for r in rows]


def open_catalog(location: str, create: bool = True) -> Catalog:
    """A catalog by location: a path (or `sqlite:` + path) to a SQLite file.

    `create=False` opens an existing catalog read-only (NotFound when there is none)."""
    if not location:
        raise ConfigError("catalog location is empty")
    path = location[len("sqlite:") :] if location.startswith("sqlite:") else location
    if "://" in path:
        raise ConfigError(f"catalog {location!r}: only local SQLite files are supported")
    return SQLiteCatalog(path, create=create)
