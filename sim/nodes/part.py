"""One vendor's share of a simulated node (`VendorPart`) and the two shapes most vendors' plugins publish:
a HAMi-style JSON register annotation with the lock-and-to-allocate protocol (`registered`), or only a
count resource in the Node's capacity (`capacity_part`). The vendors themselves: sim/nodes/vendors.py and
sim/nodes/twobackends.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from app.core.model import DeviceInfo


@dataclass(frozen=True)
class VendorPart:
    """One vendor's share of a simulated node."""

    kind: str
    key: str  # the vendor key the scheduler uses
    resource: str  # the count resource the kubelet allocates
    devices: tuple[DeviceInfo, ...]
    annotations: dict[str, str] = field(default_factory=dict)
    capacity: dict[str, str] = field(default_factory=dict)
    allocatable: dict[str, str] = field(default_factory=dict)
    plugin: str = "hami"  # hami (lock + to-allocate), or a PLUGINS key of sim.nodes.vendorplugins
    to_allocate: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    other_resources: tuple[str, ...] = ()  # more resources the same plugin allocates (neuroncore)


REPORTED = "Reported_2026.01.01 00:00:00"  # the Ascend plugin's stamp (dots; HAMi never parses it)


def registered(
    node: str,
    kind: str,
    key: str,
    resource: str,
    annotation: str,
    devices: tuple[DeviceInfo, ...],
    **extra: Any,
) -> VendorPart:
    """A vendor whose plugin registers JSON and follows HAMi's lock-and-to-allocate protocol."""
    items = []
    for d in devices:
        item: dict[str, Any] = {"id": d.id, "index": d.index, "count": d.count, "devmem": d.devmem}
        item.update({"devcore": d.devcore, "type": d.type, "mode": d.mode, "health": True})
        if d.custom:
            item["custominfo"] = dict(d.custom)
        items.append({k: v for k, v in item.items() if v not in ("", 0) or k == "index"})
    count = {resource: str(sum(d.count for d in devices))}
    return VendorPart(
        kind=kind,
        key=key,
        resource=resource,
        devices=devices,
        annotations={annotation: json.dumps(items, separators=(",", ":")), **extra},
        capacity=count,
        allocatable=count,
        to_allocate=f"hami.io/{key.lower() if key == 'AMD' else key}-devices-to-allocate",
    )


def capacity_part(
    kind: str, key: str, resource: str, devices: tuple[DeviceInfo, ...], **kw: Any
) -> VendorPart:
    capacity = {resource: str(len(devices))}
    return VendorPart(kind, key, resource, devices, capacity=capacity, allocatable=dict(capacity), **kw)
