"""Hudi's upsert on a copy-on-write table, decided on the driver at the job commit, before the
intent record: the job's files (its tasks wrote every input row as new file groups) are
matched by record key against the table's latest file slices, as Hudi's SIMPLE index does
(non-global: a key is looked up in its own partition).

    1. combine:  of the job's rows with one key, the one with the largest precombine value
                 wins (ties: the later row in input order), as Hudi's preCombine does
    2. tag:      a winner whose key is in a latest file slice of its partition updates it,
                 unless the stored row's precombine value is larger (it then stays)
    3. merge:    each file group holding an updated key gets a new file slice under the
                 job's instant (same fileId): its untouched rows, then the new versions
    4. inserts:  the rest stay in the tasks' files; a task file that lost rows to steps 1-3
                 is written again (a new file group) without them, and the original is stray

Every file written here is marked first (`MERGE` for a file group's new slice, `CREATE`
for a task file written again), so a rollback finds it; none is visible before the instant
completes. Names are the same for the same plan, so a plan made again writes the same files.
"""

from __future__ import annotations

import io
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ....errors import CommitError
from ....markers.base import IOType
from ....stages import stage
from ....store import IOPool, Store, paths
from ...protocol import CommitPlan, StageContext
from ..footers import file_facts
from ..layout import partition_dir
from .keys import record_keys
from .plan import HudiPlan, SliceFacts
from .timeline import base_file_name, parse_base_file_name

log = logging.getLogger("dataferry.commit")

RECORD_KEY = "_hoodie_record_key"
FILE_NAME = "_hoodie_file_name"
SEQNO = "_hoodie_commit_seqno"
Mark = Callable[[str, str, IOType], object]  # (partition dir, file name, io type)


@dataclass(frozen=True)
class KeySpec:
    """How a row's record key is made: its fields, the complex form (`f:v,...`) or the
    value, and the precombine field ("" none)."""

    fields: tuple[str, ...]
    complex: bool
    precombine: str = ""


@dataclass
class Upsert:
    """The merge's outcome: the job's files now (kept task files and the files written),
    the task files they supersede (stray now), and the new slices of existing groups."""

    files: list[str] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)
    slices: dict[str, SliceFacts] = field(default_factory=dict)
    dropped: int = 0  # input rows no version keeps (combined away, or older than stored)


def merge_token(index: int, job_attempt: int) -> str:
    """The write token of a file the driver's merge writes: `<n>-<job attempt>-m`, which no
    task attempt's token (`<task>-<job attempt>-<attempt number>`) can be."""
    return f"{index}-{job_attempt}-m"


def read_parquet(store: Store, path: str, columns: Sequence[str] | None = None) -> pa.Table:
    try:
        return pq.read_table(pa.BufferReader(store.read_bytes(path)), columns=columns)
    except (pa.ArrowInvalid, OSError) as e:
        raise CommitError(f"cannot read {store.full_url(path)} for the upsert: {e}") from None


def _keys(store: Store, path: str, spec: KeySpec, meta: bool) -> pa.Table:
    """k (record key), o (precombine value) and r (row number) of one file's rows."""
    wanted = [RECORD_KEY] if meta else list(spec.fields)
    if spec.precombine:
        wanted.append(spec.precombine)
    rows = read_parquet(store, path, sorted(set(wanted)))
    keys = rows.column(RECORD_KEY) if meta else record_keys(rows, spec.fields, spec.complex, path)
    order = rows.column(spec.precombine) if spec.precombine else pa.nulls(rows.num_rows, pa.int8())
    r = pa.array(np.arange(rows.num_rows, dtype=np.int64))
    return pa.table({"k": pc.cast(keys, pa.string()), "o": order, "r": r})


def _task_order(path: str) -> tuple[int, str]:
    parsed = parse_base_file_name(paths.name(path))
    head = parsed[1].split("-")[0] if parsed else ""
    return (int(head) if head.isdigit() else 0, path)


def _stack(tables: Sequence[pa.Table], spec: KeySpec) -> pa.Table:
    """One table of keys of several files (`f`: the file's number); precombine values of
    types that differ are promoted to one (int32 and int64: int64), or refused."""
    out = [
        t.append_column("f", pa.array(np.full(t.num_rows, i, dtype=np.int64)))
        for i, t in enumerate(tables)
    ]
    if not out:
        return pa.table(
            {
                "k": pa.array([], pa.string()),
                "o": pa.array([], pa.int8()),
                "r": pa.array([], pa.int64()),
                "f": pa.array([], pa.int64()),
            }
        )
    try:
        return pa.concat_tables(out, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise CommitError(
            f"precombine field {spec.precombine!r} has types that do not compare in the "
            f"files of the upsert: {e}"
        ) from None


def _winners(incoming: pa.Table) -> tuple[pa.Table, int]:
    """The last row of each key after sorting by (key, precombine with nulls first, input
    order): the combined input; and how many rows lost."""
    if not incoming.num_rows:
        return incoming, 0
    has = pc.is_valid(incoming.column("o"))  # false first: a null is the smallest value
    ranked = (
        incoming.append_column("has", has)
        .sort_by(
            [
                ("k", "ascending"),
                ("has", "ascending"),
                ("o", "ascending"),
                ("f", "ascending"),
                ("r", "ascending"),
            ]
        )
        .drop_columns(["has"])
    )
    k = ranked.column("k").combine_chunks()
    last = np.ones(len(k), dtype=bool)
    if len(k) > 1:
        last[:-1] = pc.not_equal(k.slice(0, len(k) - 1), k.slice(1)).to_numpy(zero_copy_only=False)
    winners = ranked.filter(pa.array(last))
    return winners, incoming.num_rows - winners.num_rows


def _newer(incoming: pa.ChunkedArray, stored: pa.ChunkedArray) -> np.ndarray:
    """Whether each incoming version replaces the stored one: its precombine value is at
    least the stored one (a null is the smallest value), as DefaultHoodieRecordPayload."""
    if pa.types.is_null(stored.type) and pa.types.is_null(incoming.type):
        return np.ones(len(incoming), dtype=bool)
    try:
        if stored.type != incoming.type and not pa.types.is_null(incoming.type):
            stored = pc.cast(stored, incoming.type)
        ge = pc.fill_null(pc.greater_equal(incoming, stored), False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise CommitError(
            f"the precombine values of the upsert ({incoming.type}) do not compare with the "
            f"table's ({stored.type}): {e}"
        ) from None
    wins = pc.or_(pc.is_null(stored), ge)
    return wins.to_numpy(zero_copy_only=False).astype(bool)


def _restamp(rows: pa.Table, name: str, seqno_prefix: str = "") -> pa.Table:
    """Meta columns (a meta-column table's) of rows now in base file `name`: the file name on
    every row, as Hudi's merge handle rewrites it; given `seqno_prefix` (`<instant>_<n>_`),
    `_hoodie_commit_seqno` numbered from 0 (rows this instant writes)."""
    if FILE_NAME not in rows.column_names:
        return rows
    n = rows.num_rows
    i = rows.column_names.index(FILE_NAME)
    rows = rows.set_column(i, FILE_NAME, pa.repeat(pa.scalar(name, pa.string()), n))
    if seqno_prefix and SEQNO in rows.column_names:
        seq = pc.cast(pa.array(np.arange(n, dtype=np.int64)), pa.string())
        numbered = pc.binary_join_element_wise(seqno_prefix, seq, "")
        rows = rows.set_column(rows.column_names.index(SEQNO), SEQNO, numbered)
    return rows


def _conform(old: pa.Table, schema: pa.Schema, path: str) -> pa.Table:
    """The stored rows in the new rows' schema (the same columns, cast where they differ)."""
    missing = [n for n in schema.names if n not in old.column_names]
    if missing:
        raise CommitError(
            f"the upsert cannot merge into {path}: it has no column {missing[0]!r}; write "
            "with mode='overwrite' to change the table's columns"
        )
    try:
        return old.select(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise CommitError(f"the upsert cannot merge into {path}: {e}") from None


def _write(store: Store, path: str, rows: pa.Table, mark: Mark, kind: IOType) -> None:
    mark(paths.parent(path), paths.name(path), kind)
    buf = io.BytesIO()
    pq.write_table(rows, buf)
    store.write_bytes(path, buf.getvalue())


@dataclass(frozen=True)
class UpsertJob:
    """What the merge needs to know of the job: its uuid, attempt and instant, and how to
    mark a file before writing it."""

    job_uuid: str
    attempt: int
    instant: str
    mark: Mark


def upsert(
    store: Store,
    job: UpsertJob,
    files: Sequence[str],
    live: Mapping[str, Mapping[str, str]],
    spec: KeySpec,
    meta: bool,
    pool: IOPool,
) -> Upsert:
    """Combine, tag and merge the job's `files` against the latest slices `live` (partition
    -> {fileId: base file}); write what changes; return the job's files now."""
    files = sorted(files, key=_task_order)
    incoming = _stack(pool.map(lambda f: _keys(store, f, spec, meta), files), spec)
    parts = [partition_dir(f) for f in files]
    incoming = incoming.append_column(
        "p", pa.array([parts[i] for i in incoming.column("f").to_pylist()], pa.string())
    )
    winners, combined = _winners(incoming)
    groups = [
        (p, fid, path) for p in sorted(set(parts)) for fid, path in sorted(live.get(p, {}).items())
    ]
    stored = _stack(pool.map(lambda g: _keys(store, g[2], spec, meta), groups), spec)
    stored = stored.append_column(
        "p", pa.array([groups[i][0] for i in stored.column("f").to_pylist()], pa.string())
    )
    stored = stored.rename_columns(["k", "so", "sr", "g", "p"])
    matched = winners.join(stored, keys=["p", "k"], join_type="inner") if stored.num_rows else None

    keep_in = np.zeros(incoming.num_rows, dtype=bool)  # by (f, r): rows staying in task files
    sizes = np.bincount(incoming.column("f").to_numpy(), minlength=len(files))
    offsets = np.concatenate([[0], np.cumsum(sizes)])[:-1]
    wf, wr = winners.column("f").to_numpy(), winners.column("r").to_numpy()
    keep_in[offsets[wf] + wr] = True
    drop_stored: dict[int, set[int]] = {}  # group -> its rows a new version replaces
    moved: dict[int, list[tuple[int, int]]] = {}  # group -> (file, row) of the new versions
    older = 0
    if matched is not None and matched.num_rows:
        newer = _newer(matched.column("o"), matched.column("so"))
        mf, mr = matched.column("f").to_numpy(), matched.column("r").to_numpy()
        mg, msr = matched.column("g").to_numpy(), matched.column("sr").to_numpy()
        target: dict[tuple[int, int], int] = {}
        for f, r, g, sr, new in zip(mf, mr, mg, msr, newer, strict=True):
            keep_in[offsets[f] + r] = False  # an update (or older than stored): not an insert
            if new:
                drop_stored.setdefault(int(g), set()).add(int(sr))
                key = (int(f), int(r))
                target[key] = min(target.get(key, int(g)), int(g))
        for (f, r), g in target.items():
            moved.setdefault(g, []).append((f, r))
        updated_rows = {(int(f), int(r)) for f, r in zip(mf, mr, strict=True)}
        older = len(updated_rows) - len(target)

    result = Upsert(dropped=combined + older)
    full: dict[int, pa.Table] = {}

    def rows_of(f: int) -> pa.Table:
        if f not in full:
            full[f] = read_parquet(store, files[f])
        return full[f]

    for f, path in enumerate(files):
        kept = keep_in[offsets[f] : offsets[f] + sizes[f]]
        if kept.all():
            result.files.append(path)
            continue
        result.superseded.append(path)
        if not kept.any():
            continue
        parsed = parse_base_file_name(paths.name(path))
        task = int(parsed[1].split("-")[0]) if parsed and parsed[1][:1].isdigit() else f
        token = merge_token(task, job.attempt)
        fid = f"{uuid.uuid5(uuid.NAMESPACE_URL, f'{job.job_uuid}/upsert/{path}')}-0"
        name = base_file_name(fid, token, job.instant)
        new_path = paths.join(paths.parent(path), name)
        rows = _restamp(rows_of(f).filter(pa.array(kept)), name, f"{job.instant}_{task}_")
        _write(store, new_path, rows, job.mark, IOType.CREATE)
        result.files.append(new_path)

    for g in sorted(set(drop_stored) | set(moved)):
        part, fid, old_path = groups[g]
        old = read_parquet(store, old_path)
        gone = np.zeros(old.num_rows, dtype=bool)
        gone[sorted(drop_stored.get(g, ()))] = True
        n = len(files) + g
        name = base_file_name(fid, merge_token(n, job.attempt), job.instant)
        by_file: dict[int, list[int]] = {}
        for f, r in sorted(moved.get(g, [])):
            by_file.setdefault(f, []).append(r)
        taken = [rows_of(f).take(rs) for f, rs in by_file.items()]
        schema = taken[0].schema if taken else old.schema
        new_rows = (
            pa.concat_tables([_conform(t, schema, name) for t in taken])
            if taken
            else schema.empty_table()
        )
        untouched = _conform(old.filter(pa.array(~gone)), schema, store.full_url(old_path))
        merged = pa.concat_tables(
            [_restamp(untouched, name), _restamp(new_rows, name, f"{job.instant}_{n}_")]
        )
        new_path = paths.join(part, name)
        _write(store, new_path, merged, job.mark, IOType.MERGE)
        result.files.append(new_path)
        result.slices[new_path] = SliceFacts(prev_path=old_path, updates=new_rows.num_rows)
    return result


@stage("job_stage_upsert", "upsert")
def upsert_stage(
    ctx: StageContext,
    plan: CommitPlan,
    job: UpsertJob,
    live: Mapping[str, Mapping[str, str]],
    spec: KeySpec,
    meta: bool,
) -> Upsert:
    """The upsert's merge, then the plan made to say so: its files, their facts, the task
    files superseded (stray now: deleted before the commit, as strays are) and the new
    slices (`plan.payload.table.slices`, checked again at the commit)."""
    payload: HudiPlan = plan.payload
    done = upsert(ctx.store, job, payload.files, live, spec, meta, ctx.pool)
    facts = {f.path: f for f in payload.facts}
    written = [f for f in done.files if f not in facts]
    facts.update({f: file_facts(ctx.store, f) for f in written})
    files = sorted(done.files)
    plan.payload = msgspec.structs.replace(
        payload,
        files=files,
        facts=[facts[f] for f in files],
        stray=sorted((set(payload.stray) - set(done.files)) | set(done.superseded)),
        table=msgspec.structs.replace(payload.table, slices=dict(done.slices)),
    )
    plan.files = len(done.files)
    plan.bytes = sum(facts[f].size for f in files)
    log.info(
        "Hudi upsert %s: %d files, %d file groups updated, %d task files superseded, "
        "%d input rows kept by no version",
        job.instant,
        len(done.files),
        len(done.slices),
        len(done.superseded),
        done.dropped,
    )
    return done
