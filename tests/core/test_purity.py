"""The decision core reads no clock, no environment and no randomness (ARCHITECTURE.md, layer rules).

The import-linter contract forbids modules such as `os` and `time`; this test also catches the clock and
environment reached through allowed modules (`datetime.now()`) and aliases (`from os import environ`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*(ROOT / "app" / "core").rglob("*.py"), *(ROOT / "app" / "devices").rglob("*.py")])

FORBIDDEN_ATTRIBUTES = {
    ("datetime", "now"),
    ("datetime", "utcnow"),
    ("datetime", "today"),
    ("date", "today"),
    ("time", "time"),
    ("time", "time_ns"),
    ("time", "monotonic"),
    ("time", "perf_counter"),
    ("os", "environ"),
    ("os", "environb"),
    ("os", "getenv"),
}
FORBIDDEN_MODULES = {"random", "secrets", "os", "time"}
CLOCK_MODULES = {"datetime", "os", "time"}
FORBIDDEN_NAMES = {"now", "utcnow", "today", "environ", "getenv", "time", "time_ns", "monotonic"}
CLOCK_METHODS = {"now", "utcnow", "today"}  # on any object: catches `dt.now()` after `datetime as dt`


def _dotted(node: ast.AST) -> list[str]:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return list(reversed(parts))


def violations(source: str) -> list[str]:
    """Every line of `source` that imports randomness or reads the clock or the environment."""
    found = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            found += [
                f"{line}: import {a.name}" for a in node.names if a.name.split(".")[0] in FORBIDDEN_MODULES
            ]
        elif isinstance(node, ast.ImportFrom):
            module = (node.module or "").split(".")[0]
            if module in FORBIDDEN_MODULES:
                found.append(f"{line}: from {node.module} import ...")
            elif module in CLOCK_MODULES:
                found += [
                    f"{line}: from {node.module} import {a.name}"
                    for a in node.names
                    if a.name in FORBIDDEN_NAMES
                ]
        elif isinstance(node, ast.Attribute):
            dotted = _dotted(node)
            if node.attr in CLOCK_METHODS or (
                len(dotted) >= 2 and (dotted[-2], dotted[-1]) in FORBIDDEN_ATTRIBUTES
            ):
                found.append(f"{line}: {'.'.join(dotted)}")
    return found


def test_sources_are_found() -> None:
    names = {p.name for p in SOURCES}
    assert {"codec.py", "fit.py", "decision.py", "nodelock.py", "requests.py", "admission.py"} <= names


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_clock_environment_or_randomness(path: Path) -> None:
    assert violations(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "source",
    [
        "from datetime import datetime\nx = datetime.now()",
        "import datetime\nx = datetime.datetime.utcnow()",
        "from datetime import date\nx = date.today()",
        "import time\nx = time.time()",
        "import os\nx = os.environ['A']",
        "import os\nx = os.getenv('A')",
        "from os import environ",
        "import random",
        "from random import choice",
        "from time import monotonic",
        "from datetime import datetime as dt\nx = dt.now",
    ],
    ids=[
        "datetime-now",
        "utcnow",
        "date-today",
        "time-time",
        "os-environ",
        "os-getenv",
        "from-os-environ",
        "random",
        "from-random",
        "from-time",
        "aliased-now-attribute",
    ],
)
def test_the_checker_catches(source: str) -> None:
    assert violations(source)


def test_the_checker_allows_pure_datetime_use() -> None:
    source = (
        "from datetime import UTC, datetime, timedelta\nx = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(1)"
    )
    assert violations(source) == []
