"""`dataferry bench table --frame zoo`: each table committer beside the format's own Python
writer on the type zoo, and whether every reader of the format reads what was written.

The frame is the type zoo (`verify.type_zoo`: what pandas, numpy and polars produce by
default, and the edge cases each format has rules for), scaled up by repeating a slice of it
with fresh ids (its narrow integer columns hold about 32k distinct ids), partitioned by its
`part` column (4 values). Per format (`table_peers.PEERS`: no branching on a format's name),
dataferry's committer on the embedded engine (`write_dataset`) and the format's own writer
(deltalake's `write_deltalake`; pyiceberg's `Table.append`, nanosecond timestamps downcast to
microseconds as its `downcast-ns-timestamp-to-us-on-write` does; Hudi has none):

1. Refusals, untimed: each writer writes a few rows of the zoo; if it refuses, each column
   alone (beside the key and partition columns), to name the columns it refuses and why.
   Both writers of a format then write the zoo's columns that every one of them accepts (the
   others are listed as left out, with who refused them), so the timing compares one frame.
2. Timing as `bench table` measures: a warm-up, then `repeats` runs, the order rotated each
   round (`write._measure`); medians, spread, files, and the ratio to the format's writer.
3. Readers, on each writer's first table: every reader of the format reads it; it passes
   when it gives the same rows and values (`same_values.differences`, rows matched by id) as
   the format's own writer's table read by the format's own library (deltalake, pyiceberg),
   or as the input frame where there is no such writer (Hudi). A reader that fails is
   reported with its error's first line; it never stops the bench.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

from ..errors import ConfigError
from ..verify.type_zoo import PARTITION, ZOO_COLUMNS, type_zoo
from .machine import machine_info
from .same_values import differences
from .table import FORMATS, registered
from .table_peers import PEERS, FormatPeers, Setting, sql_catalog
from .write import Progress, _check_names, _failure, _measure, _slug, _Steps
from .writers import FERRY_MODULES, Group, Writer, missing, parquet_rows

KEY = "id"
ZOO_SLICE = 16_384  # rows of one `type_zoo` call: its int16 column holds ids up to ~32k
TABLE_NAME = "zoo"


@dataclass(frozen=True)
class ZooBenchSpec:
    rows: int = 500_000
    repeats: int = 3
    formats: tuple[str, ...] = FORMATS
    probe_rows: int = 8  # rows each writer writes to find the columns it refuses
    columns: tuple[str, ...] = ZOO_COLUMNS  # the zoo's columns written (the key and partition)

    def __post_init__(self) -> None:
        for name in ("rows", "repeats", "probe_rows"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name} must be >= 1, got {getattr(self, name)}")
        _check_names(self.formats, FORMATS)
        unknown = [c for c in self.columns if c not in ZOO_COLUMNS]
        if unknown or KEY not in self.columns or PARTITION not in self.columns:
            raise ConfigError(
                f"columns must be the zoo's ({', '.join(ZOO_COLUMNS)}) with {KEY} and "
                f"{PARTITION}; got {', '.join(self.columns)}"
            )


@dataclass(frozen=True)
class Refusal:
    column: str  # "*": the writer refuses the zoo, though no column alone
    reason: str


def zoo_frame(rows: int) -> pa.Table:
    """`rows` rows of the type zoo, all its columns: a slice of `type_zoo` repeated with
    fresh ids 0..rows-1."""
    piece = type_zoo(min(rows, ZOO_SLICE))
    at = ZOO_COLUMNS.index(KEY)
    slices = []
    for start in range(0, rows, ZOO_SLICE):
        n = min(ZOO_SLICE, rows - start)
        ids = pa.array(range(start, start + n), pa.int64())
        slices.append(piece.slice(0, n).set_column(at, KEY, ids))
    return pa.concat_tables(slices).combine_chunks()


def first_line(error: BaseException) -> str:
    """The error's type and the first line of its message (a Rust backtrace is not news)."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}".strip()[:300]


Write = Callable[[pa.Table, str], Any]


def refusals(write: Write, sample: pa.Table, scratch: str) -> list[Refusal]:
    """The columns of `sample` that `write` refuses, each with its error's first line (the key
    and partition columns are always written)."""
    keys = [KEY, PARTITION]

    def error(columns: list[str], name: str) -> str | None:
        try:
            # the name is unique in the run: an Iceberg identifier is made of it
            write(
                sample.select(columns), os.path.join(scratch, f"{os.path.basename(scratch)}-{name}")
            )
            return None
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # a Rust panic (pyo3's) is no Exception
            return first_line(e)

    whole = error(sample.column_names, "all")
    if whole is None:
        return []
    if (keys_error := error(keys, "keys")) is not None:
        return [Refusal("*", keys_error)]
    found = [
        Refusal(column, reason)
        for column in sample.column_names
        if column not in keys and (reason := error([*keys, column], _slug(column))) is not None
    ]
    return found or [Refusal("*", whole)]


@dataclass(frozen=True)
class Verdict:
    reader: str
    status: str  # "same", "differs" (detail: the columns) or "fails" (detail: the error)
    detail: str = ""


@dataclass
class _Format:
    """One format's writers, what each refused, and what each reader read of each."""

    peers: FormatPeers
    setting: Setting
    writers: list[tuple[Writer, Write]]  # (timed writer, its raw write for the probe)
    refused: dict[str, list[Refusal]]
    reads: dict[str, dict[str, pa.Table | str]]  # writer -> reader -> rows, or its error
    verdicts: dict[str, list[Verdict]] = field(default_factory=dict)  # writer -> its readers

    @property
    def own(self) -> str | None:
        names = [w.name for w, _ in self.writers]
        return self.peers.writer if self.peers.writer in names else None

    def reading(self, writer: str) -> Callable[[str], int]:
        """The `rows` hook of `writer`: every reader reads its table (untimed, once), and the
        row count is that of the Parquet files, so a failing reader fails no timing."""

        def rows(dest: str) -> int:
            got: dict[str, pa.Table | str] = {}
            for reader in self.peers.readers:
                try:
                    got[reader.name] = reader.read(dest, self.setting)
                except (KeyboardInterrupt, SystemExit):
                    raise
                except BaseException as e:  # a Rust panic (pyo3's) is no Exception
                    got[reader.name] = first_line(e)
            self.reads[writer] = got
            return parquet_rows(dest)

        return rows


def _writers(fmt: str, setting: Setting, skipped: list[dict[str, str]]) -> _Format:
    """The format's own writer (where there is one and it is installed) and dataferry's."""
    peers = PEERS[fmt]
    state = _Format(peers, setting, [], {}, {})
    if peers.write is not None and peers.writer is not None:
        if absent := missing(peers.writer_needs):
            skipped.append({"writer": peers.writer, "reason": f"{absent} is not installed"})
        else:
            own = peers.write

            def own_write(data: pa.Table, dest: str) -> None:
                own(data, dest, setting)

            writer = Writer(
                peers.writer, own_write, rows=state.reading(peers.writer), warm=peers.writer_needs
            )
            state.writers.append((writer, own_write))
    name = f"dataferry {fmt}"
    if why := registered(fmt):
        skipped.append({"writer": name, "reason": why})
        return state

    def ferry_write(data: pa.Table, dest: str) -> None:
        from ..dataset.write import write_dataset

        write_dataset(
            data,
            dest,
            partition_by=list(setting.partition_by),
            committer=fmt,
            mode="append",
            committer_options=peers.options(dest, setting),
        )

    state.writers.append(
        (Writer(name, ferry_write, rows=state.reading(name), warm=FERRY_MODULES), ferry_write)
    )
    return state


def _readers(state: _Format, frame: pa.Table, columns: list[str]) -> tuple[str, list[str]]:
    """Each writer's readers judged against the expected table; (where the expected values
    come from, what the format's own writer changed of the input's values)."""
    own = state.own
    expected: pa.Table = frame.select(columns)
    source = "the input frame (no writer of the format's own to convert it)"
    changes: list[str] = []
    if own is not None:
        first = state.peers.readers[0].name
        read = state.reads.get(own, {}).get(first)
        if isinstance(read, pa.Table):
            expected = read
            source = f"{own}'s table as {first} reads it"
            changes = differences(frame, expected, columns, KEY)
        elif read is None:
            source = f"the input frame ({own}'s write failed)"
        else:
            source = f"the input frame ({own}'s table could not be read by {first}: {read})"
    verdicts = state.verdicts
    for writer, reads in state.reads.items():
        rows = []
        for reader, got in reads.items():
            if isinstance(got, str):
                rows.append(Verdict(reader, "fails", got))
                continue
            try:
                found = differences(expected, got, columns, KEY)
            except Exception as e:  # a table the comparison itself cannot take
                found = [first_line(e)]
            status = "differs" if found else "same"
            rows.append(Verdict(reader, status, "; ".join(found)))
        verdicts[writer] = rows
    return source, changes


def _run_format(
    fmt: str,
    frame: pa.Table,
    spec: ZooBenchSpec,
    setting: Setting,
    base: str,
    steps: _Steps,
    out: dict[str, list],
) -> None:
    state = _writers(fmt, setting, out["skipped"])
    sample = frame.slice(0, spec.probe_rows)
    alive: list[Writer] = []
    for writer, write in state.writers:
        steps(f"{fmt}: {writer.name}, finding the columns it refuses")
        scratch = os.path.join(base, "probe", f"{fmt}-{_slug(writer.name)}")
        found = refusals(write, sample, scratch)
        shutil.rmtree(scratch, ignore_errors=True)
        state.refused[writer.name] = found
        if any(r.column == "*" for r in found):
            reason = f"refuses the zoo: {found[0].reason}"
            out["failed"].append(_failure(writer.name, fmt, reason))
        else:
            alive.append(writer)
    left_out = sorted(
        {r.column for rs in state.refused.values() for r in rs if r.column != "*"},
        key=ZOO_COLUMNS.index,
    )
    columns = [c for c in frame.column_names if c not in left_out]
    data = frame.select(columns)
    group = Group(fmt, state.own or "", alive, data=data)
    rows = _measure(group, data.num_rows, spec.repeats, base, steps, out["failed"], warmup=True)
    source, changes = _readers(state, frame, columns)
    peer_wall = next((r["wall_s"] for r in rows if r["writer"] == state.own), None)
    for r in rows:
        r.update(
            format=fmt,
            peer=state.own,
            vs_peer=round(r["wall_s"] / peer_wall, 3) if peer_wall else None,
            refused=[asdict(x) for x in state.refused.get(r["writer"], [])],
            readers=[asdict(v) for v in state.verdicts.get(r["writer"], [])],
        )
        r.pop("run_details", None)
    out["results"] += rows
    out["formats"].append(
        {
            "format": fmt,
            "peer": state.own,
            "no_peer": state.peers.no_writer if state.peers.writer is None else "",
            "columns": columns,
            "left_out": [
                {
                    "column": c,
                    "refused_by": {
                        w: r.reason for w, rs in state.refused.items() for r in rs if r.column == c
                    },
                }
                for c in left_out
            ],
            "expected_from": source,
            "peer_changed": changes,
            "readers": [r.name for r in state.peers.readers],
        }
    )


def run_zoo_bench(spec: ZooBenchSpec, progress: Progress | None = None) -> dict[str, Any]:
    frame = zoo_frame(spec.rows).select(list(spec.columns))
    base = tempfile.mkdtemp(prefix="dataferry-bench-zoo-")
    setting = Setting(sql_catalog(os.path.join(base, "catalog")), (PARTITION,), KEY, TABLE_NAME)
    steps = _Steps(progress, len(spec.formats) * 2 * (spec.repeats + 2))
    out: dict[str, list] = {"results": [], "formats": [], "skipped": [], "failed": []}
    try:
        for fmt in spec.formats:
            _run_format(fmt, frame, spec, setting, base, steps, out)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    for s in out["skipped"]:
        s.setdefault("group", "embedded")
    notes = [
        f"the type zoo ({len(spec.columns)} columns) repeated with fresh ids, partitioned by "
        f"{PARTITION}; dataferry on the embedded engine (write_dataset)",
        "iceberg: a SQL catalog on SQLite in a temporary directory; pyiceberg creates the "
        "table in the timed write, as dataferry's committer does, and downcasts nanosecond "
        "timestamps to microseconds (its downcast-ns-timestamp-to-us-on-write)",
        *(f"{f}: {PEERS[f].no_writer}" for f in spec.formats if PEERS[f].writer is None),
    ]
    return {
        "benchmark": "table",
        "mode": "zoo",
        "spec": {**asdict(spec), "bytes": frame.nbytes, "partition_by": [PARTITION]},
        "machine": machine_info(),
        **out,
        "notes": notes,
    }
