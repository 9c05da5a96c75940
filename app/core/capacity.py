"""Node capacity as users read it: per vendor, the devices, memory and cores a node registers and how much
of them is still free, as one JSON node annotation (`CAPACITY_ANNOTATION`, docs/registration.md).

Why an annotation and not node status: HAMi's device-memory and core names (`nvidia.com/gpumem`, ...) are
what pods request from us; published as `status.capacity`/`allocatable` kube-scheduler would fit them
itself, and a new extended resource (`hami.io/gpumem`) can only say a total — "free" is ours to say, since
no pod requests that name (HAMi #2839; docs/compatibility.md). The annotation is information only: nothing
reads it back to decide.

Pure: the caller passes each registered device with its use (the ledger's reservations) and whether it is
cordoned; it gets plain data and a canonical encoding back, so equal capacity is the equal string and the
writer can skip a write when nothing changed.

Invariants: totals count every registered device (its vendor's units: memory in MiB, cores as the vendor
registers `devcore`, 100 per whole card for most); `free` counts only what a new pod could still be given —
devices that are healthy, not cordoned and have a sharing slot left, each contributing its memory and cores
not reserved (never below zero) — so `0 <= free <= total` always holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app.core.model import DeviceInfo, DeviceUse

CAPACITY_ANNOTATION = "hami.io/device-capacity"
FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class VendorCapacity:
    """One vendor's devices on one node."""

    devices: int = 0
    devices_free: int = 0  # devices that could still take a pod (healthy, uncordoned, a slot left)
    memory: int = 0  # MiB
    memory_free: int = 0
    cores: int = 0
    cores_free: int = 0

    def plus(self, device: DeviceInfo, use: DeviceUse, cordoned: bool) -> VendorCapacity:
        usable = device.health and not cordoned and use.slots < device.count
        return VendorCapacity(
            self.devices + 1,
            self.devices_free + usable,
            self.memory + device.devmem,
            self.memory_free + (max(0, device.devmem - use.mem) if usable else 0),
            self.cores + device.devcore,
            self.cores_free + (max(0, device.devcore - use.cores) if usable else 0),
        )


# vendor key (the device's `vendor`, e.g. NVIDIA) -> its capacity on the node
NodeCapacity = Mapping[str, VendorCapacity]

_UNUSED = DeviceUse()


def node_capacity(
    devices: Iterable[DeviceInfo], uses: Mapping[str, DeviceUse], cordoned: frozenset[str] = frozenset()
) -> dict[str, VendorCapacity]:
    """Per vendor, in order of first appearance: `uses` by device UUID (absent: unused)."""
    result: dict[str, VendorCapacity] = {}
    for device in devices:
        current = result.get(device.vendor, VendorCapacity())
        result[device.vendor] = current.plus(device, uses.get(device.id, _UNUSED), device.id in cordoned)
    return result


def figures(c: VendorCapacity) -> dict[str, int]:
    """One vendor's entry of the annotation."""
    return {
        "devices": c.devices,
        "devicesFree": c.devices_free,
        "memory": c.memory,
        "memoryFree": c.memory_free,
        "cores": c.cores,
        "coresFree": c.cores_free,
    }


def as_json(capacity: NodeCapacity) -> dict[str, object]:
    """The annotation's document: `{"version": 1, "vendors": {"NVIDIA": {"devices": ..., ...}}}`."""
    return {"version": FORMAT_VERSION, "vendors": {v: figures(c) for v, c in sorted(capacity.items())}}


def encode(capacity: NodeCapacity) -> str:
    """Canonical (sorted keys, no spaces): equal capacity gives the equal string."""
    return json.dumps(as_json(capacity), sort_keys=True, separators=(",", ":"))


def published_state(published: str | None, vendor: str, capacity: VendorCapacity) -> str:
    """How a node's annotation (`published`) agrees with `capacity` computed for `vendor`: "same",
    "differs", "absent" (no annotation, or the vendor not in it) or "unreadable" (not this format)."""
    if published is None:
        return "absent"
    try:
        document = json.loads(published)
        vendors = document["vendors"] if document.get("version") == FORMAT_VERSION else None
    except (ValueError, TypeError, AttributeError, KeyError):
        vendors = None
    if not isinstance(vendors, dict):
        return "unreadable"
    if vendor not in vendors:
        return "absent"
    return "same" if figures(capacity) == vendors[vendor] else "differs"


def changes(current: Mapping[str, str], wanted: Mapping[str, str]) -> dict[str, str | None]:
    """The writes that make `current` (node -> the annotation it carries now) equal `wanted` (node -> the
    value it should carry): a new value where it differs, None (remove) where a node carries one it
    should not. Nodes already right get no write."""
    writes: dict[str, str | None] = {
        node: value for node, value in wanted.items() if current.get(node) != value
    }
    writes.update({node: None for node in current if node not in wanted})
    return writes
