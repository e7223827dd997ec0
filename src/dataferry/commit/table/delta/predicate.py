"""deltalake's `predicate=` (replace where) on partition columns: a conjunction of
`col = literal` and `col IN (literal, ...)`, e.g. `day = '2024-01-01' AND region IN ('eu',
'us')`. An overwrite with a predicate replaces the files of the partitions it selects, in the
job's one transaction, and every row the job writes must match it (deltalake refuses data
that does not, and so does dataferry, before the commit is decided).

A predicate on other columns would rewrite the files that hold some matching rows (deltalake
does that through DataFusion); dataferry refuses it naming the column.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from ....errors import ConfigError
from .types import log_partition_value

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>'(?:[^']|'')*')
      | (?P<number>-?\d+(?:\.\d+)?)
      | (?P<quoted>"(?:[^"]|"")+"|`[^`]+`)
      | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<punct><>|[<>!]=?|[=(),])
    )""",
    re.X,
)


@dataclass(frozen=True)
class Term:
    """`column IN values` (an `=` is a one-value IN); values as text, None for NULL."""

    column: str
    values: tuple[str | None, ...]


def parse(predicate: str) -> list[Term]:
    """The predicate's terms; ConfigError naming what is not a conjunction of `=`/`IN`."""
    tokens = _tokens(predicate)
    terms: list[Term] = []
    i = 0

    def fail(why: str) -> ConfigError:
        return ConfigError(
            f"predicate {predicate!r}: {why}; dataferry takes a conjunction of "
            "`col = literal` and `col IN (literal, ...)` on partition columns"
        )

    while True:
        if i >= len(tokens) or tokens[i][0] not in ("word", "quoted"):
            raise fail("a column name was expected")
        column = _column(tokens[i])
        i += 1
        if i < len(tokens) and tokens[i] == ("punct", "="):
            value, i = _literal(tokens, i + 1, fail)
            terms.append(Term(column, (value,)))
        elif i < len(tokens) and tokens[i][0] == "word" and tokens[i][1].upper() == "IN":
            if i + 1 >= len(tokens) or tokens[i + 1] != ("punct", "("):
                raise fail("IN needs a parenthesised list")
            values: list[str | None] = []
            i += 2
            while True:
                value, i = _literal(tokens, i, fail)
                values.append(value)
                if i < len(tokens) and tokens[i] == ("punct", ","):
                    i += 1
                    continue
                if i < len(tokens) and tokens[i] == ("punct", ")"):
                    i += 1
                    break
                raise fail("an IN list must end with ')'")
            terms.append(Term(column, tuple(values)))
        else:
            raise fail(f"only = and IN are taken after {column!r}")
        if i == len(tokens):
            return terms
        if tokens[i][0] == "word" and tokens[i][1].upper() == "AND":
            i += 1
            continue
        raise fail(f"{tokens[i][1]!r} is not AND")


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text.rstrip()):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ConfigError(f"predicate {text!r}: cannot read it from {text[pos:]!r}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def _column(token: tuple[str, str]) -> str:
    kind, text = token
    if kind == "quoted":
        return text[1:-1].replace('""', '"')
    return text


def _literal(tokens: Sequence[tuple[str, str]], i: int, fail) -> tuple[str | None, int]:
    if i >= len(tokens):
        raise fail("a value was expected")
    kind, text = tokens[i]
    if kind == "string":
        return text[1:-1].replace("''", "'"), i + 1
    if kind == "number":
        return text, i + 1
    if kind == "word" and text.upper() in ("TRUE", "FALSE"):
        return text.lower(), i + 1
    if kind == "word" and text.upper() == "NULL":
        raise fail("NULL equals nothing in SQL (a null partition is `IS NULL`, not taken)")
    raise fail(f"{text!r} is not a literal")


def check_columns(predicate: str, terms: Sequence[Term], partition_by: Sequence[str]) -> None:
    """Refuse a term on a column that is not a partition column."""
    for term in terms:
        if term.column not in partition_by:
            raise ConfigError(
                f"predicate {predicate!r} names column {term.column!r}, which is not a "
                f"partition column of the table ({list(partition_by)}): dataferry replaces "
                "whole partitions; overwrite without a predicate, or select partitions"
            )


def normalized(terms: Sequence[Term], types: Mapping[str, pa.DataType]) -> list[Term]:
    """The terms' values as the log records partition values (`log_partition_value`)."""
    return [
        Term(
            t.column,
            tuple(
                log_partition_value(t.column, v, types.get(t.column, pa.string())) for v in t.values
            ),
        )
        for t in terms
    ]


def matches(terms: Sequence[Term], values: Mapping[str, str | None]) -> bool:
    """Whether partition values (as the log records them) satisfy every term."""
    return all(values.get(t.column) in t.values for t in terms)
