"""Properties of MIG decisions over random MIG nodes, slices in use, pods and policies (reference §4.7 "MIG
details", §4.2, §4.10).

- A fit never gives a GPU overlapping slices: the app containers' slices (which accumulate) overlap neither
  each other nor the slices in use; each init container's (fitted on the pod-free node, §4.3) overlap
  neither each other nor the slices in use.
- Every slice is a placement the GPU registered for that profile (so within the GPU's slices), large
  enough for the container's memory request, and the allocation carries the profile's memory and cores.
- The usage rebuilt from the annotations written for the winner equals the usage the decision records,
  placements included, and a later decision sees exactly those slices in use.
"""

from __future__ import annotations

import copy
from typing import Any

from core_builders import VENDORS, context, pod, run_scenario
from core_strategies import MigScenario, mig_scenarios
from hypothesis import given, settings

from app.core.decision import allocation_annotations
from app.core.mig import overlaps
from app.core.model import (
    PERCENT_UNSET,
    ContainerDevice,
    DeviceUse,
    MigPlacement,
)
from app.core.reservations import reservation_from_pod
from app.core.usage import allocation_uses, working_devices


def _memreq(container: dict[str, Any], totalmem: int) -> int:
    ctx = context(pod(container))
    request = ctx.requests.containers[0]["NVIDIA"]
    if request.mem_percentage != PERCENT_UNSET and request.memreq == 0:
        return totalmem * request.mem_percentage // 100
    return request.memreq


def _check_slices(
    scenario: MigScenario, node_name: str, groups: tuple[tuple[ContainerDevice, ...], ...]
) -> None:
    the_node = next(n for n in scenario.nodes if n.name == node_name)
    info = {d.id: d for d in the_node.devices}
    in_use = {uuid: [s.placement for s in use.mig] for uuid, use in scenario.usage[node_name].items()}
    spec = scenario.pod["spec"]
    containers = [*spec.get("initContainers", []), *spec["containers"]]
    init_count = len(spec.get("initContainers", []))
    app_slices: dict[str, list[MigPlacement]] = {}
    for position, group in enumerate(groups):
        own: dict[str, list[MigPlacement]] = {}
        for d in group:
            device = info[d.uuid]
            if device.mode != "mig":
                assert d.mig is None
                continue
            assert d.mig is not None
            profile = next(p for p in device.mig_profiles if p.name == d.mig.profile)
            assert d.mig.placement in profile.placements  # within the GPU's slices
            assert (d.usedmem, d.usedcores) == (profile.memory_mb, profile.core)
            assert profile.memory_mb >= _memreq(containers[position], device.devmem)
            taken = [*in_use.get(d.uuid, []), *own.get(d.uuid, [])]
            if position >= init_count:
                taken += app_slices.get(d.uuid, [])
            assert not any(overlaps(d.mig.placement, other) for other in taken), (d, taken)
            own.setdefault(d.uuid, []).append(d.mig.placement)
        if position >= init_count:
            for uuid, placements in own.items():
                app_slices.setdefault(uuid, []).extend(placements)


@settings(max_examples=300, deadline=None)
@given(mig_scenarios())
def test_mig_slices_never_overlap_and_stay_within_the_gpu(scenario: MigScenario) -> None:
    decision = run_scenario(scenario)
    for verdict in decision.ranked:
        assert verdict.devices is not None
        _check_slices(scenario, verdict.node, verdict.devices.get("NVIDIA", ()))


@settings(max_examples=200, deadline=None)
@given(mig_scenarios())
def test_rebuilt_usage_equals_the_decisions_with_its_placements(scenario: MigScenario) -> None:
    decision = run_scenario(scenario)
    winner = decision.winner
    if winner is None or winner.devices is None:
        return
    init_count = len(scenario.pod["spec"].get("initContainers", []))
    placed = copy.deepcopy(scenario.pod)
    placed["metadata"]["annotations"].update(allocation_annotations(winner.node, winner.devices, VENDORS, 1))
    reservation = reservation_from_pod(placed, VENDORS)
    assert reservation is not None
    decided = allocation_uses(winner.devices, init_count)
    assert reservation.uses == decided
    # the next decision sees the slices in use, on healthy GPUs
    the_node = next(n for n in scenario.nodes if n.name == winner.node)
    before = scenario.usage[winner.node]
    after = working_devices(
        the_node,
        {u: before.get(u, DeviceUse()).plus(decided.get(u, DeviceUse())) for u in {*before, *decided}},
    )
    for device in after:
        new = [
            d.mig.placement
            for group in winner.devices["NVIDIA"]
            for d in group
            if d.uuid == device.id and d.mig
        ]
        old = [s.placement for s in before.get(device.id, DeviceUse()).mig]
        assert sorted(device.mig_in_use, key=lambda p: (p.start, p.size)) == sorted(
            [*old, *new], key=lambda p: (p.start, p.size)
        )
        assert device.health
