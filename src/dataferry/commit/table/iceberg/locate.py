"""Where an Iceberg table is, for its committer: the table's location and its files' URIs,
the catalog and identifier (the options', else what an earlier job recorded beside the
table, else an embedded SQLite catalog), the catalogs opened, and the table as it is now."""

from __future__ import annotations

import json
import re
from typing import Any

from ....store import Store
from ..location import TableLocation, table_location
from .catalog import (
    CATALOG_DB,
    DEFAULT_NAMESPACE,
    EMBEDDED_CATALOG,
    ICEBERG_ROOT,
    TABLE_RECORD,
    IcebergConfig,
    check_catalog,
    check_location,
    io_properties,
    norm_location,
    open_catalog,
    signing_properties,
)


class IcebergLocator:
    """The locating half of `IcebergFormat`, a mixin: its `store` and `config` are the
    format's; `_location` (None until asked) and `_catalogs` are set by its `__init__`."""

    store: Store
    config: Any
    _location: TableLocation | None
    _catalogs: dict[str, Any]

    @property
    def location(self) -> TableLocation:
        if self._location is None:
            self._location = table_location(self.store, "an Iceberg table")
        return self._location

    @property
    def location_uri(self) -> str:
        """The table's location as pyiceberg names it (`file://` + path for local disk)."""
        loc = self.location
        return f"file://{loc.uri}" if loc.local else loc.uri

    def file_uri(self, relpath: str) -> str:
        return f"{self.location_uri}/{relpath}"

    def relative(self, uri: str) -> str:
        """A data file's path in the store (the URI itself if it lies elsewhere)."""
        root = norm_location(self.location_uri) + "/"
        plain = norm_location(uri)
        return plain[len(root) :] if plain.startswith(root) else uri

    def default_identifier(self) -> str:
        name = self.location.uri.rstrip("/").rsplit("/", 1)[-1] or "table"
        return f"{DEFAULT_NAMESPACE}.{re.sub(r'[^A-Za-z0-9_-]', '_', name)}"

    def where(self) -> dict[str, Any]:
        """{"catalog": properties or None (embedded), "identifier": ...}: the options', else
        what an earlier job recorded in the table's location, else the defaults."""
        config: IcebergConfig = self.config
        recorded = self.recorded_where() if config.catalog is None or not config.identifier else {}
        catalog = (
            config.catalog_properties if config.catalog is not None else recorded.get("catalog")
        )
        identifier = config.identifier or recorded.get("identifier") or self.default_identifier()
        return {"catalog": catalog, "identifier": identifier}

    def recorded_where(self) -> dict[str, Any]:
        try:
            return json.loads(self.store.read_bytes(TABLE_RECORD))
        except Exception:
            return {}

    def catalog(self, where: dict[str, Any]) -> Any:
        """The catalog `where` names (the options' Catalog object itself, when given)."""
        config: IcebergConfig = self.config
        props = where.get("catalog")
        live = config.catalog is not None and not isinstance(config.catalog, dict)
        if live and props is not None and props == config.catalog_properties:
            return config.catalog
        key = json.dumps(props, sort_keys=True, default=str)
        if key not in self._catalogs:
            self._catalogs[key] = self._load_catalog(props)
        return self._catalogs[key]

    def check_catalog(self, where: dict[str, Any]) -> None:
        check_catalog(self.store.full_url(), where, self.location.local)

    def check_location(self, tbl: Any) -> None:
        check_location(tbl, self.location_uri, self.store.full_url())

    def _load_catalog(self, props: dict[str, Any] | None) -> Any:
        if props is None:
            loc = self.location
            self.check_catalog({"catalog": None})
            self.store.mkdirs(ICEBERG_ROOT)
            uri = f"sqlite:///{loc.uri}/{CATALOG_DB}"
            return open_catalog(
                EMBEDDED_CATALOG, dict(type="sql", uri=uri, warehouse=self.location_uri)
            )
        props = dict(props)
        name = str(props.pop("name", "") or "default")
        options = self.location.storage_options
        for key, value in {**io_properties(options), **signing_properties(props, options)}.items():
            props.setdefault(key, value)
        return open_catalog(name, props)

    def table(self, where: dict[str, Any] | None = None) -> Any:
        """The table as it is now (None if there is none)."""
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        where = where or self.where()
        if where.get("catalog") is None and not self.store.exists(CATALOG_DB):
            return None
        try:
            return self.catalog(where).load_table(where["identifier"])
        except (NoSuchTableError, NoSuchNamespaceError):
            return None

    def exists(self) -> bool:
        return self.table() is not None
