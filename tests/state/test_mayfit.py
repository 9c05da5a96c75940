"""Screening verdicts remembered per pod shape and node state (app/state/mayfit.py), and the pod shape that
keys them (app/state/screen.py `shape`).

A verdict is reused only while its row's stamp is unchanged; a row whose node was freed, filled or
replaced is screened again before the fast path trusts it. test_fastpath.py checks the whole decision
against `decide` under random changes; these are the cases that pin each invalidation down.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from core_builders import VENDORS, context, ctr, gpu, node, pod

from app.core.model import DeviceUse
from app.devices.batch import Bools, Ints
from app.devices.nvidia import keys
from app.state.fastpath import FastPath
from app.state.ledger import BOUND, Entry
from app.state.mayfit import MayFit, Verdicts
from app.state.screen import shape
from app.state.snapshot import NodeRecord, Snapshot
from app.state.usage import UsageView

BY_KEY = {v.key: v for v in VENDORS}


class Screener:
    """Says `may_fit` = `answer[row]` and records what it was asked."""

    def __init__(self, answer: list[bool]) -> None:
        self.answer = np.array(answer)
        self.asked: list[list[int] | None] = []

    def __call__(self, rows: Ints | None) -> Bools:
        self.asked.append(None if rows is None else rows.tolist())
        result: Bools = self.answer.copy() if rows is None else self.answer[rows]
        return result


def test_only_rows_whose_stamp_moved_are_screened_again() -> None:
    verdicts, screen = Verdicts(16), Screener([True, False] * 8)
    stamp = np.arange(1, 17, dtype=np.int64)
    assert verdicts.refresh(np.array([1, 0]), stamp, screen).tolist() == [False, True]
    assert screen.asked == [[0, 1]]
    assert verdicts.known_unfit(np.array([0, 1, 3]), stamp).tolist() == [False, True, False]  # 3: unknown
    assert verdicts.refresh(np.array([0, 1, 1]), stamp, screen).tolist() == [True, False, False]
    assert screen.asked == [[0, 1]]  # nothing moved: nothing screened
    stamp[1] = 20  # row 1 changed (its usage, or its node record)
    screen.answer[1] = True
    assert verdicts.known_unfit(np.array([1]), stamp).tolist() == [False]
    assert verdicts.refresh(np.array([0, 1]), stamp, screen).tolist() == [True, True]
    assert screen.asked == [[0, 1], [1]]


def test_most_of_the_table_stale_is_one_screen_of_every_row() -> None:
    verdicts, screen = Verdicts(4), Screener([True, False, True, False])
    stamp = np.arange(1, 5, dtype=np.int64)
    assert verdicts.refresh(np.array([3]), stamp, screen).tolist() == [False]
    assert screen.asked == [None]  # one of four rows is a quarter: the whole table is screened
    assert verdicts.known_unfit(np.arange(4), stamp).tolist() == [False, True, False, True]


def test_shapes_are_bounded_and_a_resized_table_starts_afresh() -> None:
    shapes = MayFit(shapes=2)
    first = shapes.verdicts("a", 3)
    first.stamp[:] = 5
    assert shapes.verdicts("a", 3) is first
    shapes.verdicts("b", 3)
    shapes.verdicts("c", 3)  # "a" was the least recently used
    assert shapes.verdicts("a", 3) is not first
    assert shapes.verdicts("c", 4).stamp.tolist() == [0, 0, 0, 0]


def _ctx(annotations: dict[str, str], mem: int = 500, policy: str = "spread") -> Any:
    return context(pod(ctr(gpu=1, mem=mem), annotations=annotations), gpu_policy=policy)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        pytest.param(_ctx({}), _ctx({"example.com/run-seconds": "5"}), True, id="unread-annotation"),
        pytest.param(_ctx({}), _ctx({keys.USE_TYPE: "A100"}), False, id="type-selection"),
        pytest.param(_ctx({}), _ctx({keys.NOUSE_UUID: "GPU-1"}), False, id="uuid-exclusion"),
        pytest.param(_ctx({}), _ctx({keys.VGPU_MODE: "mig"}), False, id="mode-selection"),
        pytest.param(_ctx({}), _ctx({}, mem=600), False, id="other-request"),
        pytest.param(_ctx({}), _ctx({}, policy="binpack,mutex"), False, id="other-gpu-policy"),
    ],
)
def test_shape_keeps_what_screening_reads(a: Any, b: Any, same: bool) -> None:
    assert (shape(a, BY_KEY) == shape(b, BY_KEY)) is same


def _snapshot(*nodes: Any) -> Snapshot:
    return Snapshot(1, {n.name: NodeRecord(n, 1) for n in nodes}, {})


def test_a_node_freed_after_it_was_screened_out_can_win() -> None:
    """A was full when screened for this shape; then A is freed and B filled: A must be screened again
    (its stamp moved), not left out as known not to fit."""
    a, b = node("a", gpu("a0", 0, mem=1000)), node("b", gpu("b0", 0, mem=1000))
    snapshot, usage, fast = _snapshot(a, b), UsageView(), FastPath(first_screen=1)
    full_a = Entry("x", "default", "x", "a", BOUND, {"a0": DeviceUse(1, 900, 0)})
    full_b = Entry("y", "default", "y", "b", BOUND, {"b0": DeviceUse(1, 900, 0)})
    ctx = _ctx({})
    usage.load([full_a])
    first = fast.choose(ctx, ["a", "b"], snapshot, usage, VENDORS)
    assert first.winner is not None and first.winner.node == "b"
    usage.load([full_b])
    second = fast.choose(ctx, ["a", "b"], snapshot, usage, VENDORS)
    assert second.winner is not None and second.winner.node == "a"


def test_a_node_record_changed_after_it_was_screened_out_can_win() -> None:
    """The snapshot replaces A's record (a cordon lifted): its verdict is stale with its record."""
    a = node("a", gpu("a0", 0, mem=1000), cordoned=["a0"])
    b = node("b", gpu("b0", 0, mem=1000))
    usage, fast, ctx = UsageView(), FastPath(first_screen=1), _ctx({})
    usage.load([Entry("y", "default", "y", "b", BOUND, {"b0": DeviceUse(1, 900, 0)})])
    first = fast.choose(ctx, ["a", "b"], _snapshot(a, b), usage, VENDORS)
    assert first.winner is None
    lifted = Snapshot(2, {"a": NodeRecord(node("a", gpu("a0", 0, mem=1000)), 2), "b": NodeRecord(b, 1)}, {})
    second = fast.choose(ctx, ["a", "b"], lifted, usage, VENDORS)
    assert second.winner is not None and second.winner.node == "a"


def test_a_refiltered_pod_sees_its_own_node_without_its_reservation() -> None:
    """The pod's own previous reservation fills A; screened for another pod of the same shape A is out,
    but for this pod A is screened with its reservation subtracted, and that verdict is not stored."""
    a = node("a", gpu("a0", 0, mem=1000))
    usage, fast, ctx = UsageView(), FastPath(first_screen=1), _ctx({})
    usage.load([Entry("uid-p", "default", "p", "a", BOUND, {"a0": DeviceUse(1, 900, 0)})])
    snapshot = _snapshot(a)
    assert fast.choose(ctx, ["a"], snapshot, usage, VENDORS, exclude_uid="other").winner is None
    mine = fast.choose(ctx, ["a"], snapshot, usage, VENDORS, exclude_uid="uid-p")
    assert mine.winner is not None and mine.winner.node == "a"
    assert fast.choose(ctx, ["a"], snapshot, usage, VENDORS, exclude_uid="other").winner is None
