"""/filter with DRA side by side: refuse what kube-scheduler's DRA allocator also serves, then decide.

The mode (docs/compatibility.md, "DRA side by side"): we never share a GPU or a resource name with
kube-scheduler's DynamicResources plugin, because the same device would be handed out twice.

- A pod asking for a resource name a DeviceClass serves by DRA (`extendedResourceName`) is refused on every
  candidate node with the reason (`app.core.dra.pod_refusal`);
- a node whose GPUs a DRA driver publishes in ResourceSlices is refused for our resources with a per-node
  reason (`app.core.dra.node_refusal`); the other candidates are decided as usual (app/filter/usecase.py).

Both go to kube-scheduler as `FailedAndUnresolvableNodes`, not as `Error`: the pod is then Unschedulable
with our reason in its FailedScheduling event and PodScheduled condition ("0/N nodes are available: N
hami-scheduler: nvidia.com/gpu is served by DRA DeviceClass ..."), waits in the unschedulable queue for a
cluster change instead of being retried in a tight error back-off, and preemption skips those nodes — no
victim could make them fit. An `Error` would fail the whole scheduling cycle as a scheduler error.

The facts come from the registration worker through the ledger (`Context.dra`); with none (no DRA, or no
collision) this is exactly app/filter/usecase.py. A pod asking for nothing we manage is never refused here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.context import Context
from app.core import dra
from app.core.inventory import node_name
from app.filter import usecase as filtering
from app.filter.outcome import FilterOutcome

DENIAL_RESOURCE, DENIAL_NODE = "dra-resource", "dra-node"


def filter_pod(
    context: Context,
    pod: Mapping[str, Any] | None,
    node_names: list[str] | None,
    nodes: list[dict[str, Any]] | None,
) -> FilterOutcome:
    facts = context.dra()
    if pod is None or not facts.any or not dra.asks_managed(pod, context.settings.vendors):
        return filtering.filter_pod(context, pod, node_names, nodes)
    candidates = node_names if node_names is not None else [node_name(n) for n in nodes or ()]
    refused = dra.pod_refusal(facts, pod)
    if refused:
        return FilterOutcome(unresolvable=dict.fromkeys(candidates, refused), denial=DENIAL_RESOURCE)
    overlapped = facts.overlapped()
    dropped = {n: dra.node_refusal(overlapped[n]) for n in candidates if n in overlapped}
    if not dropped:
        return filtering.filter_pod(context, pod, node_names, nodes)
    if len(dropped) == len(candidates):
        return FilterOutcome(unresolvable=dropped, denial=DENIAL_NODE)
    kept_names = [n for n in node_names if n not in dropped] if node_names is not None else None
    kept_nodes = [n for n in nodes if node_name(n) not in dropped] if nodes is not None else None
    outcome = filtering.filter_pod(context, pod, kept_names, kept_nodes)
    outcome.unresolvable = {**(outcome.unresolvable or {}), **dropped}
    return outcome
