"""Damage to an intent record's plan, as the typed-plan tests inflict it: one field set to a
value of the wrong type, or one field dropped, at a path of keys into the payload."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Damage = Callable[[dict[str, Any]], None]


def _parent(payload: dict[str, Any], path: Sequence[str]) -> dict[str, Any]:
    for key in path:
        payload = payload[key]
    return payload


def set_field(keys: Sequence[str], value: Any) -> Damage:
    """Set the field at `keys` to `value` (a wrong type, for the tests)."""

    def damage(payload: dict[str, Any]) -> None:
        _parent(payload, keys[:-1])[keys[-1]] = value

    return damage


def drop_field(keys: Sequence[str]) -> Damage:
    """Remove the field at `keys`."""

    def damage(payload: dict[str, Any]) -> None:
        del _parent(payload, keys[:-1])[keys[-1]]

    return damage
