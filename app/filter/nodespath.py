"""The Nodes path of /filter (reference §4.9): kube-scheduler sent whole Node objects instead of names.

HAMi then decides on the devices decoded from those nodes alone, with zero usage, and records nothing: no
reservation, no annotation. It is a what-if answer, so it lives apart from the Filter use case proper.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.context import Context
from app.core.decision import decide, pod_context
from app.core.inventory import NodeUnregistered, decode_node, node_name
from app.core.model import NodeDevices
from app.filter.outcome import FilterOutcome


def simulate(context: Context, pod: Mapping[str, Any], nodes: list[dict[str, Any]]) -> FilterOutcome:
    """The Nodes path (§4.9): devices decoded from the given nodes, zero usage, nothing recorded."""
    if not nodes:  # HAMi answers nothing at all; kube-scheduler never sends an empty list
        return FilterOutcome(error="extender args carry Nodes without any node object", denial="bad-request")
    vendors = context.settings.vendors
    registered: dict[str, NodeDevices] = {}
    broken: dict[str, str] = {}
    for node in nodes:
        try:
            registered[node_name(node)] = decode_node(node, vendors)
        except NodeUnregistered as exc:
            if str(exc) != "no device registration":
                broken[node_name(node)] = str(exc)
    ctx = pod_context(pod, vendors, context.settings.policies, {})
    decision = decide(ctx, [node_name(n) for n in nodes], registered, {}, vendors, broken)
    winner = decision.winner
    if winner is None:
        return FilterOutcome(failed=decision.failed, denial="no-fit")
    chosen = [n for n in nodes if node_name(n) == winner.node][:1]
    return FilterOutcome(nodes=chosen, failed=decision.failed or None)
