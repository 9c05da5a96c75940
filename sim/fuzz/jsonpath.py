"""Paths into a JSON value and edits at them: how the fuzzer (sim/fuzz/gen.py) picks the one place of a
realistic request body that it breaks.
"""

from __future__ import annotations

from typing import Any

Path = tuple[str | int, ...]


def json_paths(value: Any, prefix: Path = ()) -> list[Path]:
    """Every path into a JSON value (objects and lists), the root excluded."""
    found: list[Path] = []
    items: list[tuple[str | int, Any]] = []
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    for key, child in items:
        found.append((*prefix, key))
        found.extend(json_paths(child, (*prefix, key)))
    return found


def set_at(value: Any, path: Path, new: Any) -> None:
    for key in path[:-1]:
        value = value[key]
    value[path[-1]] = new


def delete_at(value: Any, path: Path) -> None:
    for key in path[:-1]:
        value = value[key]
    del value[path[-1]]


def get_at(value: Any, path: Path) -> Any:
    for key in path:
        value = value[key]
    return value
