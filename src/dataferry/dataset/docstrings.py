"""Numpydoc docstrings, read and written: the sections of a docstring, the entries of its
Parameters section, and a section with entries merged in (for `params.write_params`)."""

from __future__ import annotations

import textwrap

_HEADERS = ("Parameters", "Returns", "Yields", "Raises", "Attributes", "Notes", "Examples")


def sections(doc: str) -> tuple[list[str], dict[str, list[str]], list[str]]:
    """A cleaned numpydoc docstring as (the lines before its first section, each section's
    lines by header, the headers in order)."""
    lines = doc.splitlines()
    body: dict[str, list[str]] = {}
    order: list[str] = []
    head: list[str] = []
    current = head
    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line in _HEADERS and nxt and set(nxt) == {"-"}:
            order.append(line)
            current = body[line] = []
            i += 2
            continue
        current.append(line)
        i += 1
    return head, body, order


def parameter_entries(lines: list[str]) -> list[list[str]]:
    """The entries of a Parameters section: each starts with an unindented line."""
    entries: list[list[str]] = []
    for line in lines:
        if line and not line[0].isspace():
            entries.append([line])
        elif entries:
            entries[-1].append(line)
    return [_trimmed(e) for e in entries]


def entry_names(entry: list[str]) -> list[str]:
    """The parameter names an entry documents (``a, b : int`` -> a, b; ``**kw`` -> kw)."""
    names = entry[0].split(" : ")[0]
    return [n.strip().lstrip("*") for n in names.split(",") if n.strip()]


def add_parameters(hand: str, shared: list[str], order: list[str]) -> str:
    """`hand` with the `shared` entries merged into its Parameters section (made before its
    first other section when it has none), all in the signature's `order`."""
    if not shared:
        return hand
    head, body, headers = sections(hand)
    own = [e for e in parameter_entries(body.get("Parameters", [])) if e]

    def position(entry: list[str]) -> int:
        first = entry_names(entry)[:1]
        return order.index(first[0]) if first and first[0] in order else len(order)

    merged = sorted(own + [s.splitlines() for s in shared], key=position)
    body["Parameters"] = [line for e in merged for line in e]
    if "Parameters" not in headers:
        headers.insert(0, "Parameters")
    out = _trimmed(head)
    for h in headers:
        out += ["", h, "-" * len(h), *_trimmed(body[h])]
    return "\n".join(out).strip() + "\n"


def _trimmed(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    while lines and not lines[0].strip():
        lines = lines[1:]
    return lines


def indent(text: str, width: int = 84) -> str:
    return textwrap.fill(
        text,
        width,
        initial_indent="    ",
        subsequent_indent="    ",
        break_on_hyphens=False,
        break_long_words=False,
    )
