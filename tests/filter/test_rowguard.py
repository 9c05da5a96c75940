"""The filter's rule for the pod's own ledger row (app/filter/rowguard.py, docs/ledger-writers.md): which
rows it goes on with, which it refuses at once, and which it reads the pod for first."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.nodelock import BIND_PHASE, BIND_TIME, PHASE_ALLOCATING, PHASE_SUCCESS
from app.filter.rowguard import GO_ON, after_read, judge
from app.state.rows import ASSUMED, BIND_REBUILT, BIND_UNKNOWN, BOUND, CONFIRMED, NO_BIND, RowState

NOW, TTL = 1_800_000_000.0, 60.0


def _row(state: str, bind: str = NO_BIND, age: float = 5.0) -> RowState:
    return RowState("u", state, NOW - age, "default", "p", bind, "n1")


JUDGED = [
    pytest.param(None, "go", id="no row: go on"),
    pytest.param(_row(ASSUMED), "go", id="assumed, unmarked: go on (replaced by the new decision)"),
    pytest.param(_row(CONFIRMED), "go", id="confirmed, unmarked: go on (no bind acted on it)"),
    pytest.param(_row(BOUND), "already bound to node n1", id="bound: refused without a read"),
    pytest.param(_row(CONFIRMED, "bind-x"), "is in progress", id="a running bind: refused, retry later"),
    pytest.param(_row(CONFIRMED, "bind-x", TTL + 1), "read", id="a running bind past the TTL: read the pod"),
    pytest.param(_row(CONFIRMED, BIND_UNKNOWN), "read", id="bind outcome unknown: read the pod"),
    pytest.param(_row(CONFIRMED, BIND_REBUILT), "read", id="rebuilt by a new leader: read the pod"),
]


@pytest.mark.parametrize(("row", "expected"), JUDGED)
def test_judge(row: RowState | None, expected: str) -> None:
    guard = judge(row, NOW, TTL)
    if expected == "go":
        assert guard == GO_ON
    elif expected == "read":
        assert guard.read and not guard.error
    else:
        assert expected in guard.error and not guard.read
        assert guard.error.startswith("hami-scheduler: ")


def _pod(phase: str | None, stamped: float | None) -> dict[str, Any]:
    annotations = {}
    if phase is not None:
        annotations[BIND_PHASE] = phase
    if stamped is not None:
        annotations[BIND_TIME] = str(int(stamped))
    return {"metadata": {"name": "p", "namespace": "default", "annotations": annotations}, "spec": {}}


FRESH, OLD = _pod(PHASE_ALLOCATING, NOW - 1), _pod(PHASE_ALLOCATING, NOW - TTL - 5)
READ = [
    pytest.param(BIND_UNKNOWN, FRESH, "", id="unknown, unbound: replace (our bind ended)"),
    pytest.param(BIND_REBUILT, _pod(None, None), "", id="rebuilt, never stamped: replace"),
    pytest.param(BIND_REBUILT, FRESH, "may be landing", id="rebuilt, fresh stamp: refused"),
    pytest.param(BIND_REBUILT, OLD, "", id="rebuilt, stamp past the TTL: replace"),
    pytest.param(BIND_REBUILT, _pod(PHASE_SUCCESS, NOW - 1), "", id="rebuilt, phase not allocating: replace"),
    pytest.param("bind-x", FRESH, "", id="a running mark past the TTL: replace"),
]  # fmt: skip


@pytest.mark.parametrize(("bind", "pod", "expected"), READ)
def test_after_read(bind: str, pod: dict[str, Any], expected: str) -> None:
    refused = after_read(_row(CONFIRMED, bind, TTL + 1), pod, NOW, TTL)
    assert (expected in refused) if expected else refused == ""
