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
import dataclasses
from typing import Any

from core_builders import VENDORS, context, ctr, gpu, node, pod, run_scenario
from core_strategies import A100_MIG, GPU_POLICIES, NODE_POLICIES
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.decision import allocation_annotations
from app.core.model import (
    PERCENT_UNSET,
    ContainerDevice,
    DeviceInfo,
    DeviceUse,
    MigPlacement,
    MigSlice,
    NodeDevices,
)
from app.core.reservations import reservation_from_pod
from app.core.usage import allocation_uses, working_devices
from app.devices.nvidia.mig import overlaps

A100 = "NVIDIA A100-SXM4-40GB"


@dataclasses.dataclass(frozen=True)
class MigScenario:
    nodes: tuple[NodeDevices, ...]
    usage: dict[str, dict[str, DeviceUse]]
    pod: dict[str, Any]
    gpu_policy: str
    node_policy: str


@st.composite
def mig_scenarios(draw: st.DrawFn) -> MigScenario:
    nodes, usage = [], {}
    for n in range(draw(st.integers(1, 3))):
        devices = []
        for index in range(draw(st.integers(1, 3))):
            mig = draw(st.integers(0, 4)) > 0
            devices.append(
                gpu(
                    f"n{n}-GPU-{index}",
                    index,
                    count=7 if mig else 10,
                    mem=40960,
                    type=A100,
                    numa=draw(st.integers(0, 1)),
                    mode="mig" if mig else "hami-core",
                    mig_profiles=draw(st.sampled_from([A100_MIG, A100_MIG, A100_MIG[:2], A100_MIG[1:]]))
                    if mig
                    else (),
                )
            )
        name = f"node-{n}"
        nodes.append(node(name, *devices))
        usage[name] = {d.id: draw(_held(d)) for d in devices if d.mode == "mig" and draw(st.booleans())}
    containers = [draw(_container(f"app-{i}")) for i in range(draw(st.integers(1, 3)))]
    inits = [draw(_container(f"init-{i}")) for i in range(draw(st.integers(0, 1)))]
    if not any(c["resources"] for c in [*inits, *containers]):
        containers[0] = ctr("app-0", gpu=1)  # the filter passes GPU-less pods through without deciding
    return MigScenario(
        tuple(nodes),
        usage,
        pod(*containers, init=inits),
        draw(st.sampled_from(GPU_POLICIES)),
        draw(st.sampled_from(NODE_POLICIES)),
    )


@st.composite
def _held(draw: st.DrawFn, device: DeviceInfo) -> DeviceUse:
    """Slices other pods hold (non-overlapping, as our own decisions leave them), with their allocations."""
    held: list[MigSlice] = []
    for _ in range(draw(st.integers(0, 3))):
        profile = draw(st.sampled_from(device.mig_profiles))
        placement = draw(st.sampled_from(profile.placements))
        if not any(overlaps(placement, h.placement) for h in held):
            held.append(MigSlice(profile.name, placement))
    profiles = {p.name: p for p in device.mig_profiles}
    mem = sum(profiles[h.profile].memory_mb for h in held)
    cores = sum(profiles[h.profile].core for h in held)
    return DeviceUse(len(held), mem, min(cores, 100), len(held), tuple(sorted(held, key=MigSlice.key)))


@st.composite
def _container(draw: st.DrawFn, name: str) -> dict[str, Any]:
    if draw(st.integers(0, 4)) == 0:
        return ctr(name)
    return ctr(
        name,
        gpu=draw(st.integers(1, 4)),
        mem=draw(st.none() | st.sampled_from([0, 1000, 4864, 5000, 9984, 15000, 20096, 30000])),
        pct=draw(st.none() | st.none() | st.sampled_from([10, 25, 50])),
    )


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
