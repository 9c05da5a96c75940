"""Invariants of mixed-vendor decisions (NVIDIA, Ascend incl. 910C, Hygon, Cambricon, Moore Threads, AWS
Neuron, AMD, Vastai, Biren): a device of any vendor is never given more than it has (a Neuron core bit
never twice), the allocation read back from the pod's annotations is exactly what the filter reserved, and
every vendor's list has one group per container."""

from __future__ import annotations

from core_builders import context
from hypothesis import HealthCheck, given, settings
from vendor_strategies import VENDORS, MixedScenario, scenarios

from app.core.decision import allocation_annotations, decide
from app.core.reservations import reservation_from_pod, vendor_tags
from app.core.usage import allocation_uses
from app.core.vendor import core_masks
from app.devices.awsneuron.fit import popcount

EXAMPLES = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@EXAMPLES
@given(scenarios())
def test_no_device_of_any_vendor_is_oversubscribed(scenario: MixedScenario) -> None:
    ctx = context(
        scenario.pod, gpu_policy=scenario.gpu_policy, node_policy=scenario.node_policy, vendors=VENDORS
    )
    nodes = {n.name: n for n in scenario.nodes}
    decision = decide(ctx, list(nodes), nodes, scenario.usage, VENDORS)
    for verdict in decision.ranked:
        assert verdict.devices is not None
        uses = allocation_uses(verdict.devices, ctx.requests.init_count)
        existing = scenario.usage[verdict.node]
        capacity = {d.id: d for d in nodes[verdict.node].devices}
        for uuid, use in uses.items():
            device = capacity[uuid]
            total = existing[uuid].plus(use) if uuid in existing else use
            assert total.slots <= device.count, (uuid, total, device)
            assert total.mem <= device.devmem, (uuid, total, device)
            assert total.cores <= device.devcore, (uuid, total, device)
        for key, groups in verdict.devices.items():
            assert len(groups) == len(ctx.requests.containers), key  # padded by vendor key
            for group in groups:
                # AMD records the card's product name (vendors §3.11 #2), every other vendor its key
                assert all(d.type == (capacity[d.uuid].type if key == "AMD" else key) for d in group)
        # Neuron cores are bits: never one bit twice among the app containers (they run together), nor in
        # one init container (each runs alone, before them: its bits may be the app containers' again)
        neuron, init = verdict.devices.get("AWSNeuron", ()), ctx.requests.init_count
        for masks in ([d for group in neuron[init:] for d in group], *(list(g) for g in neuron[:init])):
            for uuid in {d.uuid for d in masks}:
                taken = [d.usedcores for d in masks if d.uuid == uuid]
                held = existing[uuid].cores if uuid in existing else 0
                assert popcount(sum(taken) | held) == sum(map(popcount, taken)) + popcount(held), (
                    uuid,
                    taken,
                    held,
                )


@EXAMPLES
@given(scenarios(max_nodes=2))
def test_rebuild_from_the_pod_annotations_equals_the_reservation(scenario: MixedScenario) -> None:
    ctx = context(
        scenario.pod, gpu_policy=scenario.gpu_policy, node_policy=scenario.node_policy, vendors=VENDORS
    )
    nodes = {n.name: n for n in scenario.nodes}
    winner = decide(ctx, list(nodes), nodes, scenario.usage, VENDORS).winner
    if winner is None or winner.devices is None:
        return
    tags = vendor_tags(ctx.annotations, VENDORS)
    live = allocation_uses(winner.devices, ctx.requests.init_count, tags, core_masks(VENDORS))
    placed = dict(scenario.pod)
    placed["metadata"] = dict(placed["metadata"])
    placed["metadata"]["annotations"] = {
        **placed["metadata"]["annotations"],
        **allocation_annotations(winner.node, winner.devices, VENDORS, 1, scenario.pod),
    }
    rebuilt = reservation_from_pod(placed, VENDORS)
    assert rebuilt is not None and rebuilt.node == winner.node
    assert rebuilt.uses == live
