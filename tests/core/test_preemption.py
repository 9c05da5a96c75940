"""Device-aware preemption victims (app/core/preemption.py, docs/preemption.md)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from core_builders import NVIDIA, context, ctr, gpu, node, pod
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.fit import PodContext, evaluate_node
from app.core.model import DeviceUse, NodeDevices
from app.core.preemption import Holder, NodeCase, choose_victims, node_budget, priority, started
from app.core.usage import sum_uses

VENDORS = {NVIDIA.key: NVIDIA}
MEM = 32768
TWO_CARDS = node("n1", gpu("GPU-A", 0, mem=MEM), gpu("GPU-B", 1, mem=MEM))


def holder(uid: str, prio: int, card: str, mem: int, *, t: int = 0, cores: int = 0) -> Holder:
    return Holder(uid, prio, f"2026-01-01T00:00:{t:02d}Z", {card: DeviceUse(1, mem, cores)})


def wants(mem: int, gpus: int = 1, cores: int | None = None) -> PodContext:
    return context(pod(ctr(gpu=gpus, mem=mem, cores=cores)))


@dataclass(frozen=True)
class Case:
    id: str
    holders: tuple[Holder, ...]
    pod: PodContext
    preemptor: int
    expected: tuple[str, ...] | None
    chosen: frozenset[str] = frozenset()
    fixed: tuple[dict[str, DeviceUse], ...] = ()


CASES = [
    Case(
        "one-card-freed-by-one-big-victim-not-two-small",
        (
            holder("small-a", 1, "GPU-A", 16000),
            holder("small-b", 1, "GPU-A", 16000),
            holder("big", 1, "GPU-B", MEM),
        ),
        wants(MEM),
        10,
        ("big",),
    ),
    Case(
        "lowest-priority-among-equal-sized-sets",
        (holder("mid", 5, "GPU-A", MEM), holder("low", 1, "GPU-B", MEM)),
        wants(MEM),
        10,
        ("low",),
    ),
    Case(
        "newest-among-equal-priorities",
        (holder("old", 1, "GPU-A", MEM, t=1), holder("new", 1, "GPU-B", MEM, t=9)),
        wants(MEM),
        10,
        ("new",),
    ),
    Case(
        "never-equal-priority",
        (holder("equal", 10, "GPU-A", MEM), holder("low", 1, "GPU-B", MEM)),
        wants(MEM),
        10,
        ("low",),
    ),
    Case(
        "never-higher-priority-so-node-dropped",
        (holder("high", 20, "GPU-A", MEM), holder("equal", 10, "GPU-B", MEM)),
        wants(MEM),
        10,
        None,
    ),
    Case(
        "two-victims-when-one-card-holds-two",
        (
            holder("a1", 1, "GPU-A", 16000),
            holder("a2", 2, "GPU-A", 16000),
            holder("b1", 3, "GPU-B", 16000),
            holder("b2", 9, "GPU-B", 16768),
        ),
        wants(MEM),
        10,
        ("a1", "a2"),
    ),
    Case(
        "in-flight-reservation-is-not-a-victim",
        (holder("low", 1, "GPU-B", 16000),),
        wants(MEM),
        10,
        None,
        fixed=({"GPU-A": DeviceUse(1, MEM, 0)}, {"GPU-B": DeviceUse(1, 20000, 0)}),
    ),
    Case(
        "kube-schedulers-victims-are-kept-and-count-as-freed",
        (
            holder("cpu-victim", 1, "GPU-A", 16000),
            holder("other", 1, "GPU-A", 16000),
            holder("b", 1, "GPU-B", MEM),
        ),
        wants(MEM),
        10,
        ("cpu-victim", "other"),
        chosen=frozenset({"cpu-victim"}),
    ),
    Case(
        "fits-with-kube-schedulers-victims-alone",
        (holder("cpu-victim", 1, "GPU-A", MEM), holder("b", 1, "GPU-B", MEM)),
        wants(MEM),
        10,
        ("cpu-victim",),
        chosen=frozenset({"cpu-victim"}),
    ),
    Case(
        "two-gpus-need-both-cards-freed",
        (holder("a", 1, "GPU-A", 1000), holder("b", 2, "GPU-B", 1000), holder("c", 3, "GPU-B", 1000)),
        wants(MEM, gpus=2),
        10,
        ("a", "b", "c"),
    ),
    Case(
        "cores-count-too",
        (holder("busy", 1, "GPU-A", 1000, cores=100), holder("idle", 1, "GPU-B", 1000, cores=60)),
        wants(1000, cores=50),
        10,
        ("idle",),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_choose_victims(case: Case) -> None:
    node_case = NodeCase(TWO_CARDS, case.fixed, case.holders, case.chosen)
    assert choose_victims(node_case, case.preemptor, case.pod, VENDORS) == case.expected


def test_greedy_set_when_the_search_budget_runs_out() -> None:
    holders = tuple(holder(f"p{i}", i, "GPU-A" if i % 2 else "GPU-B", 4000) for i in range(8))
    node_case = NodeCase(TWO_CARDS, (), holders)
    victims = choose_victims(node_case, 100, wants(MEM), VENDORS, max_evaluations=1)
    assert victims is not None and _fits(node_case, frozenset(victims), wants(MEM))
    assert all(h.priority < 100 for h in holders if h.uid in victims)


@pytest.mark.parametrize(
    ("candidates", "budget"),
    [(1, 1024), (4, 1024), (10, 409), (100, 64), (5000, 64), (0, 1024)],
    ids=["one-node", "few-nodes", "ten-nodes-share", "hundred-nodes-floor", "many-nodes-floor", "none"],
)
def test_node_budget(candidates: int, budget: int) -> None:
    assert node_budget(candidates) == budget


def test_many_small_holders_cost_a_bounded_search() -> None:
    cards = [gpu(f"G{i}", i, mem=MEM) for i in range(8)]
    holders = tuple(holder(f"p{i}", i % 5, f"G{i % 8}", 3270, t=i % 60) for i in range(80))
    node_case = NodeCase(node("n8", *cards), (), holders)
    ctx = wants(MEM)  # a whole card: ten holders must go
    victims = choose_victims(node_case, 10, ctx, VENDORS, max_evaluations=64)
    assert victims is not None and len(victims) == 10
    assert len({next(iter(h.uses)) for h in holders if h.uid in victims}) == 1  # all from one card


@pytest.mark.parametrize(
    ("the_pod", "expected_priority", "expected_started"),
    [
        (
            {"spec": {"priority": 1000}, "status": {"startTime": "2026-01-02T00:00:00Z"}},
            1000,
            "2026-01-02T00:00:00Z",
        ),
        ({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": {}}, 0, "2026-01-01T00:00:00Z"),
        ({"spec": {"priority": True}, "status": None}, 0, ""),
        ({"spec": {"priority": "high"}}, 0, ""),
    ],
    ids=["set", "unset-falls-back-to-creation", "bool-is-not-a-priority", "text-is-not-a-priority"],
)
def test_priority_and_start(
    the_pod: dict[str, object], expected_priority: int, expected_started: str
) -> None:
    assert priority(the_pod) == expected_priority
    assert started(the_pod) == expected_started


def _fits(case: NodeCase, removed: frozenset[str], ctx: PodContext, devices: NodeDevices = TWO_CARDS) -> bool:
    kept = [h.uses for h in case.holders if h.uid not in removed]
    return evaluate_node(devices, sum_uses([*case.fixed, *kept]), ctx, VENDORS).fits


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[NodeCase, int, PodContext]:
    """Up to six holders on two 32 GiB cards, some of them kube-scheduler's own (lower-priority) victims."""
    preemptor = draw(st.integers(0, 7))
    holders = []
    for i in range(draw(st.integers(0, 6))):
        card = draw(st.sampled_from(["GPU-A", "GPU-B"]))
        mem = draw(st.integers(1, 4)) * 4096
        holders.append(holder(f"p{i}", draw(st.integers(0, 6)), card, mem, t=draw(st.integers(0, 59))))
    lower = [h.uid for h in holders if h.priority < preemptor]
    chosen = draw(st.sets(st.sampled_from(lower), max_size=2)) if lower else set()
    ctx = wants(draw(st.integers(1, 8)) * 4096, gpus=draw(st.integers(1, 2)))
    return NodeCase(TWO_CARDS, (), tuple(holders), frozenset(chosen)), preemptor, ctx


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_victims_are_lower_priority_fit_and_fewest(scenario: tuple[NodeCase, int, PodContext]) -> None:
    case, preemptor, ctx = scenario
    victims = choose_victims(case, preemptor, ctx, VENDORS)
    eligible = [h.uid for h in case.holders if h.priority < preemptor and h.uid not in case.chosen]
    fitting = [
        set(combo)
        for size in range(len(eligible) + 1)
        for combo in itertools.combinations(eligible, size)
        if _fits(case, case.chosen | frozenset(combo), ctx)
    ]
    if victims is None:
        assert not fitting  # no set of lower-priority pods makes it fit
        return
    assert set(victims) >= case.chosen and len(set(victims)) == len(victims)  # kube-scheduler's are kept
    added = set(victims) - case.chosen
    priorities = {h.uid: h.priority for h in case.holders}
    assert all(priorities[v] < preemptor for v in added)  # strictly lower priority, never equal or higher
    assert _fits(case, frozenset(victims), ctx)  # with them out the pod fits
    assert len(added) == min(len(f) for f in fitting)  # and no smaller set would
