"""The bind-time re-check (app.core.recheck): what no longer fits is named, and a fresh decision always
fits (the re-check never fails a bind the filter could have made)."""

from __future__ import annotations

import pytest
from core_builders import gpu, node, run_scenario
from core_strategies import MigScenario, Scenario, mig_scenarios, scenarios
from hypothesis import given, settings

from app.core.model import DeviceUse, MigPlacement, MigSlice
from app.core.recheck import misfit
from app.core.usage import allocation_uses

NODE = node(
    "n1",
    gpu("GPU-A", count=2, mem=1000, core=100),
    gpu("GPU-M", 1, count=7, mem=40960, mode="mig"),
)


def _slice(start: int, size: int, profile: str = "1g.5gb") -> MigSlice:
    return MigSlice(profile, MigPlacement(start, size))


CASES = [
    ("room-left", {"GPU-A": DeviceUse(1, 400, 50)}, {"GPU-A": DeviceUse(1, 600, 50)}, ""),
    (
        "memory",
        {"GPU-A": DeviceUse(1, 600, 0)},
        {"GPU-A": DeviceUse(1, 401, 0)},
        "GPU-A would hold 1001 of 1000 memory",
    ),
    (
        "slots",
        {"GPU-A": DeviceUse(2, 0, 0)},
        {"GPU-A": DeviceUse(1, 1, 0)},
        "GPU-A would hold 3 of 2 slots",
    ),
    (
        "cores",
        {"GPU-A": DeviceUse(1, 0, 60)},
        {"GPU-A": DeviceUse(1, 1, 41)},
        "GPU-A would hold 101 of 100 cores",
    ),
    (
        "unknown-device",
        {},
        {"GPU-Z": DeviceUse(1, 1, 0)},
        "device GPU-Z is not registered on node n1",
    ),
    (
        "others-over-on-another-device",  # only the pod's own devices are its business
        {"GPU-A": DeviceUse(5, 5000, 500)},
        {"GPU-M": DeviceUse(1, 4864, 14, 1, (_slice(6, 1),))},
        "",
    ),
    (
        "mig-disjoint",
        {"GPU-M": DeviceUse(1, 4864, 14, 1, (_slice(5, 1),))},
        {"GPU-M": DeviceUse(1, 4864, 14, 1, (_slice(6, 1),))},
        "",
    ),
    (
        "mig-overlap",
        {"GPU-M": DeviceUse(1, 20096, 42, 1, (_slice(4, 4, "3g.20gb"),))},
        {"GPU-M": DeviceUse(1, 4864, 14, 1, (_slice(6, 1),))},
        "MIG slice 1g.5gb@6 on GPU-M overlaps 3g.20gb@4 held by another pod",
    ),
    (
        "mig-ignores-slots-and-memory",  # between revisits only placements limit slices (quirk #12)
        {"GPU-M": DeviceUse(7, 40960, 100, 7, (_slice(0, 1),))},
        {"GPU-M": DeviceUse(1, 4864, 14, 1, (_slice(6, 1),))},
        "",
    ),
]


@pytest.mark.parametrize(("others", "own", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_misfit_names_what_no_longer_fits(
    others: dict[str, DeviceUse], own: dict[str, DeviceUse], expected: str
) -> None:
    assert misfit(NODE, others, own) == expected


def _fresh_decision_fits(scenario: Scenario | MigScenario) -> None:
    winner = run_scenario(scenario).winner
    if winner is None or winner.devices is None:
        return
    the_node = next(n for n in scenario.nodes if n.name == winner.node)
    init_count = len(scenario.pod["spec"].get("initContainers", []))
    own = allocation_uses(winner.devices, init_count)
    assert misfit(the_node, scenario.usage.get(winner.node, {}), own) == ""


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_the_recheck_never_fails_a_fresh_decision(scenario: Scenario) -> None:
    _fresh_decision_fits(scenario)


@settings(max_examples=150, deadline=None)
@given(mig_scenarios())
def test_the_recheck_never_fails_a_fresh_mig_decision(scenario: MigScenario) -> None:
    _fresh_decision_fits(scenario)
