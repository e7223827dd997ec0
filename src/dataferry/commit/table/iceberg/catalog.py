"""The Iceberg committer's options and what it knows of catalogs and pyiceberg's errors: the
catalog's properties (what is compared, what may be written down without secrets), where the
table's own entries lie, and which errors of a commit are conflicts or final refusals; small readers of its metadata."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field, fields
from typing import Any

from ....errors import ConfigError
from ..base import TableConfig

ICEBERG_ROOT = "_dataferry_iceberg"  # the table's own entry (as `_delta_log`), not a job's
CATALOG_DB = f"{ICEBERG_ROOT}/catalog.db"  # the embedded catalog's SQLite file
TABLE_RECORD = f"{ICEBERG_ROOT}/table.json"  # where the catalog and the table are
EMBEDDED_CATALOG = "dataferry"
JOB_UUID_KEY = "dataferry.job-uuid"
JOB_ID_KEY = "dataferry.job-id"
GROUP_KEY = "dataferry.group-job-ids"  # the uuids of the other jobs a group's snapshot carries
NAME_MAPPING = "schema.name-mapping.default"
DEFAULT_NAMESPACE = "default"

log = logging.getLogger(__name__)

_SECRET = re.compile(r"secret|password|token|credential|access-key|session|private", re.I)
_CATALOG_TYPES = dict(SqlCatalog="sql", RestCatalog="rest", HiveCatalog="hive", GlueCatalog="glue")
_CATALOG_TYPES.update(DynamoDbCatalog="dynamodb", InMemoryCatalog="in-memory")
S3_PROPS = dict(AWS_ENDPOINT_URL="s3.endpoint", AWS_REGION="s3.region")
S3_PROPS.update(AWS_ACCESS_KEY_ID="s3.access-key-id", AWS_SECRET_ACCESS_KEY="s3.secret-access-key")
S3_PROPS.update(AWS_SESSION_TOKEN="s3.session-token")
CLIENT_PROPS = {
    k: v.replace("s3.", "client.", 1) for k, v in S3_PROPS.items() if k != "AWS_ENDPOINT_URL"
}


@dataclass(frozen=True)
class IcebergConfig(TableConfig):
    """The Iceberg committer's options (with pyiceberg's names).

    catalog: the properties `pyiceberg.catalog.load_catalog(name, **properties)` takes (its
        name under an optional "name" key), or a pyiceberg Catalog; None: an embedded SQL
        catalog on SQLite in the table's location (local tables only). A Catalog object is
        used on the driver only and is not sent to workers.
    identifier: the table's "namespace.table" ("" : the destination directory's name in
        namespace "default").
    properties: the table's properties, when the job creates it.
    snapshot_properties: extra keys for the summary of the job's snapshot.
    schema_mode: None refuses data whose columns differ from the table's (beyond Iceberg's
        type promotions); "merge" evolves the table's schema by name in the job's one
        commit (pyiceberg's `update_schema().union_by_name`: new columns added, types
        promoted), as deltalake's `schema_mode="merge"`.
    """

    catalog: Any = field(default=None, compare=False, repr=False)
    identifier: str = ""
    properties: dict[str, str] = field(default_factory=dict)
    snapshot_properties: dict[str, str] = field(default_factory=dict)
    schema_mode: str | None = None
    partition_spec: tuple[str, ...] = ()
    # set by the committer for a job (not an option): the key columns the rows get for the
    # split by the spec's transforms, which the data files leave out
    partition_keys: tuple[str, ...] = ()
    # set by the committer for a job (not an option): the existing table's columns as its
    # files hold them (an Arrow schema as text), for tasks to cast promoted columns to
    table_types: str = ""
    # set by the committer for a job (not an option): the table's schema, spec and metrics
    # properties as text, on which the tasks draft their files' DataFiles (`drafts.py`)
    file_basis: str = ""
    # the catalog's properties (from the dict or the Catalog object): what is compared
    catalog_properties: dict[str, str] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        given = self.catalog
        if given is not None and not isinstance(given, dict) and not hasattr(given, "load_table"):
            raise ConfigError(
                "catalog must be a dict of load_catalog properties or a pyiceberg Catalog, "
                f"got {type(given).__name__}"
            )
        props = catalog_properties_of(self.catalog) if self.catalog is not None else None
        object.__setattr__(self, "catalog_properties", props)
        if self.partition_spec:
            from .partitions import parse_spec

            parse_spec(self.partition_spec)  # ConfigError naming the field, now
            object.__setattr__(self, "partition_spec", tuple(self.partition_spec))
        if self.schema_mode not in (None, "merge"):
            raise ConfigError(f"schema_mode must be None or 'merge', got {self.schema_mode!r}")
        if self.identifier and len(split_identifier(self.identifier)) < 2:
            raise ConfigError(f"identifier must be 'namespace.table', got {self.identifier!r}")
        for name in ("properties", "snapshot_properties"):
            value = getattr(self, name)
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
                raise ConfigError(f"{name} must map str to str, got {value!r}")

    def __getstate__(self) -> dict[str, Any]:
        """A Catalog object stays on the driver (workers never need it, and it may hold a
        connection pool); its properties travel."""
        state = {f.name: getattr(self, f.name) for f in fields(self)}
        if state["catalog"] is not None and not isinstance(state["catalog"], dict):
            state["catalog"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            object.__setattr__(self, key, value)


def catalog_properties_of(catalog: Any) -> dict[str, str]:
    """A catalog's `load_catalog` properties, with its name under "name"."""
    if isinstance(catalog, dict):
        return {str(k): v for k, v in catalog.items()}
    props = {str(k): v for k, v in dict(getattr(catalog, "properties", {}) or {}).items()}
    props.setdefault("name", getattr(catalog, "name", "") or "default")
    kind = _CATALOG_TYPES.get(type(catalog).__name__)
    if kind and "type" not in props and "py-catalog-impl" not in props:
        props["type"] = kind
    return props


def without_secrets(props: dict[str, Any]) -> dict[str, Any]:
    """What may be written down of a catalog's properties (no keys, tokens or passwords)."""
    return {k: v for k, v in props.items() if not _SECRET.search(k)}


def split_identifier(identifier: str) -> tuple[str, ...]:
    return tuple(p for p in identifier.split(".") if p)


def is_conflict(error: BaseException) -> bool:
    from pyiceberg.exceptions import CommitFailedException, TableAlreadyExistsError

    return isinstance(error, CommitFailedException | TableAlreadyExistsError)


def fresh_connections(catalog: Any) -> None:
    """Close a SQL catalog's pooled connections, so the next question reads what the database
    holds: a connection whose COMMIT failed (SQLite's "database is locked", while another
    process reads the catalog) keeps its uncommitted update and would read it back, taking a
    lost commit for a landed one."""
    engine = getattr(catalog, "engine", None)
    dispose = getattr(engine, "dispose", None)
    if callable(dispose):
        dispose()


def open_catalog(name: str, props: dict[str, Any], tries: int = 5) -> Any:
    """`pyiceberg.catalog.load_catalog`, safe when jobs open a new SQL catalog at once: each
    creates the catalog's tables if absent, and between one's check and its CREATE another
    may have made them ("table ... already exists"). The tables are there then, so opening
    again finds them."""
    from pyiceberg.catalog import load_catalog

    for attempt in range(tries):
        try:
            return load_catalog(name, **props)
        except Exception as error:  # sqlalchemy's OperationalError, for any SQL dialect
            if attempt == tries - 1 or not lost_create_race(error):
                raise
            log.debug("catalog %s: tables created by another job meanwhile (%s)", name, error)
    raise AssertionError("unreachable")


def lost_create_race(error: BaseException) -> bool:
    """True for a CREATE TABLE that failed because another job created the table first."""
    text = str(error).lower()
    return type(error).__name__ in ("OperationalError", "ProgrammingError", "IntegrityError") and (
        "already exists" in text or "duplicate" in text
    )


# (catalog name, its properties, namespace): namespaces this process made or found in a catalog
_NAMESPACES: set[tuple[str, str, tuple[str, ...]]] = set()


def _namespace_key(catalog: Any, namespace: tuple[str, ...]) -> tuple[str, str, tuple[str, ...]]:
    props = json.dumps(dict(getattr(catalog, "properties", {}) or {}), sort_keys=True, default=str)
    return (str(getattr(catalog, "name", "")), props, namespace)


def ensure_namespace(catalog: Any, namespace: tuple[str, ...]) -> None:
    """`catalog.create_namespace_if_not_exists(namespace)`, once per catalog and namespace in
    this process: each asks the catalog (a SQL catalog: two queries, 2-4 ms) and a namespace
    is not dropped while it holds tables. One that was (a commit raising NoSuchNamespaceError)
    is forgotten (`forget_namespace`) and made again by the next job."""
    key = _namespace_key(catalog, namespace)
    if key not in _NAMESPACES:
        catalog.create_namespace_if_not_exists(namespace)
        _NAMESPACES.add(key)


def forget_namespace(catalog: Any, namespace: tuple[str, ...]) -> None:
    _NAMESPACES.discard(_namespace_key(catalog, namespace))


def norm_location(uri: str) -> str:
    return re.sub(r"^file:(//)?", "", uri).rstrip("/")


def refused(error: BaseException) -> bool:
    """True when building a transaction failed for good: the data or the table is at fault
    (a type Iceberg has none for, a file the spec cannot place, a schema the table refuses),
    not the catalog's reachability, which a later try (cleanup, the next job) may have."""
    from pyiceberg.exceptions import (
        BadRequestError,
        CommitFailedException,
        ResolveError,
        ValidationError,
        ValidationException,
    )
    from pyiceberg.io.pyarrow import UnsupportedPyArrowTypeException

    final = (TypeError, ValueError, LookupError, NotImplementedError, ResolveError)
    final += (UnsupportedPyArrowTypeException, ValidationError, ValidationException)
    final += (BadRequestError, CommitFailedException)
    return isinstance(error, final) and not isinstance(error, OSError)


def set_name_mapping(tx: Any) -> None:
    """The name mapping by which readers find the table's columns in files without ids."""
    tx.set_properties(**{NAME_MAPPING: tx.table_metadata.schema().name_mapping.model_dump_json()})


def jobs_of(summary: Any) -> set[str]:
    """The uuids of the jobs a snapshot's summary names: its own job's, and those of the jobs
    a group's snapshot carries (`group`)."""
    if summary is None:
        return set()
    found = {summary.get(JOB_UUID_KEY) or ""}
    found.update((summary.get(GROUP_KEY) or "").split(","))
    return found - {""}


def job_snapshot(tbl: Any, job_uuid: str) -> Any:
    """The table's snapshot made by the job, or carrying it (None if it has none)."""
    for snapshot in reversed(tbl.metadata.snapshots):
        if job_uuid in jobs_of(snapshot.summary):
            return snapshot
    return None


def current_id(tbl: Any) -> int | None:
    snapshot = tbl.current_snapshot()
    return snapshot.snapshot_id if snapshot is not None else None


def check_catalog(url: str, where: dict[str, Any], local: bool) -> None:
    """Refuse, before any file is written, a table on object storage (not `local`) with no
    catalog: the embedded catalog is a SQLite file, which needs a local disk's locks and
    writes in place (an object store has neither), so it cannot live with such a table."""
    if where.get("catalog") is None and not local:
        raise ConfigError(
            f"Iceberg table {url}: the embedded SQLite catalog is for "
            "tables on local disk; for a table on object storage give "
            "committer_options={'catalog': {...}} (the properties of pyiceberg's "
            "load_catalog, e.g. a REST, Glue or SQL catalog) and an 'identifier'"
        )


def check_location(tbl: Any, location_uri: str, url: str) -> None:
    """Refuse a table of the catalog whose location is not the store's (`location_uri`): its
    data files would lie where the job's markers and cleanup do not reach."""
    if norm_location(tbl.metadata.location) != norm_location(location_uri):
        raise ConfigError(
            f"Iceberg table {'.'.join(tbl.name())} lies at {tbl.metadata.location}, not at "
            f"{url}: write to its location, or give another identifier"
        )


def io_properties(storage_options: dict[str, Any]) -> dict[str, str]:
    """pyiceberg FileIO properties for an s3:// store (its endpoint, region and keys)."""
    return {S3_PROPS[k]: v for k, v in storage_options.items() if k in S3_PROPS}


def signing_properties(props: dict[str, Any], storage_options: dict[str, Any]) -> dict[str, str]:
    """The keys a REST catalog signed with SigV4 (`rest.sigv4-enabled`: S3 Tables, Glue,
    SeaweedFS) signs its requests with, from the table's s3:// store when the properties
    carry none: the catalog and the table's bucket are one account's. So a committer whose
    catalog properties were written down without their secrets (recovery, `dataferry
    cleanup`) still reaches the catalog. Nothing when signing is off or keys are given."""
    if str(props.get("rest.sigv4-enabled", "")).lower() != "true":
        return {}
    if any(k in props for k in ("client.access-key-id", "client.profile-name")):
        return {}
    return {CLIENT_PROPS[k]: v for k, v in storage_options.items() if k in CLIENT_PROPS}


def snapshot_properties(config: IcebergConfig, job_uuid: str, job_id: str) -> dict[str, str]:
    """The summary keys of a job's snapshot: the options' and the job's own."""
    return {**config.snapshot_properties, JOB_UUID_KEY: job_uuid, JOB_ID_KEY: job_id}
