"""Issue 19: the informers' pod shape keeps every key a vendor declares (workers/shapes.py derives it from
`pod_keys`), so a ledger rebuilt from the worker's copies equals the filter's reservation for every vendor,
and `inspect` and the webhook see the same keys the device plugins read."""

from __future__ import annotations

from core_builders import context
from hypothesis import HealthCheck, given, settings
from vendor_strategies import VENDORS, MixedScenario, scenarios

from app.core.decision import allocation_annotations, decide
from app.core.reservations import reservation_from_pod, vendor_tags
from app.core.usage import allocation_uses
from app.core.vendor import core_masks
from workers.shapes import pod_shape

EXAMPLES = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SHAPE = pod_shape(VENDORS)


@EXAMPLES
@given(scenarios(max_nodes=2))
def test_rebuild_from_the_workers_copy_equals_the_reservation(scenario: MixedScenario) -> None:
    ctx = context(
        scenario.pod, gpu_policy=scenario.gpu_policy, node_policy=scenario.node_policy, vendors=VENDORS
    )
    nodes = {n.name: n for n in scenario.nodes}
    winner = decide(ctx, list(nodes), nodes, scenario.usage, VENDORS).winner
    if winner is None or winner.devices is None:
        return
    written = allocation_annotations(winner.node, winner.devices, VENDORS, 1, scenario.pod, 5)
    placed = {**scenario.pod, "metadata": {**scenario.pod["metadata"]}}
    placed["metadata"]["annotations"] = {**placed["metadata"].get("annotations", {}), **written}
    shaped = SHAPE(placed)
    kept = shaped["metadata"]["annotations"]
    assert {k: kept.get(k) for k in written} == written  # every written key survives the shape
    tags = vendor_tags(ctx.annotations, VENDORS)
    live = allocation_uses(winner.devices, ctx.requests.init_count, tags, core_masks(VENDORS))
    rebuilt = reservation_from_pod(shaped, VENDORS)
    assert rebuilt is not None and rebuilt.uses == live
