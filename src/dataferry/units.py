"""Durations and sizes as people write them ('90s', '6h', '64MiB'), parsed in one place."""

from __future__ import annotations

import re

from .errors import ConfigError


def parse_duration(text: str) -> float:
    """'90s', '30m', '6h', '2d' or plain seconds -> seconds; ConfigError naming a bad value."""

    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    t = text.strip().lower()
    try:
        if t and t[-1] in units:
            return float(t[:-1]) * units[t[-1]]
        return float(t)
    except ValueError:
        raise ConfigError(f"not a duration: {text!r} (use e.g. 90s, 30m, 6h, 2d)") from None


_UNITS = {
    "": 1,
    "b": 1,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
}


def parse_size(text: str) -> int:
    """'1GiB', '256MiB', '500MB', '1048576' -> bytes."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise ConfigError(f"size {text!r}: expected a number with KiB, MiB, GiB, KB, MB or GB")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])
