"""Reading node capacity and allocatable the way HAMi's backends do (`Quantity.AsInt64` / `Value`).

Capacity-derived vendors (Cambricon, Mthreads, Kunlunxin XPU, AWS Neuron, Metax GPU, Enflame GCU: vendors
§1.2) compute their devices from these numbers, and handshake vendors judge health by the allocatable count.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.core import quantity
from app.core.codec import CodecError
from app.core.vendor import NodeView


def allocatable_count(node: NodeView, resource: str) -> int:
    """`status.allocatable[resource]` as a count; absent, unparsable or negative counts as 0."""
    return _count(node.allocatable, resource)


def capacity_count(node: NodeView, resource: str) -> int:
    """`status.capacity[resource]` as a count; absent, unparsable or negative counts as 0."""
    return _count(node.capacity, resource)


def _count(values: Mapping[str, Any], resource: str) -> int:
    value = values.get(resource) if resource else None
    if value is None:
        return 0
    return max(0, quantity.as_int64(value) or 0)


def capacity_int64(node: NodeView, resource: str) -> int | None:
    """`status.capacity[resource]` when it is an integer quantity (HAMi `AsInt64`), None when absent;
    raises CodecError for a value that is not an integer."""
    value = node.capacity.get(resource)
    if value is None:
        return None
    number = quantity.as_int64(value)
    if number is None:
        raise CodecError(f"capacity {resource}={value!r} is not an integer")
    return number
