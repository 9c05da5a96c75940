"""What the demo prints at the end: the placement table and the per-device utilisation bars.

Both read only the API objects (the pods' allocation annotations, the nodes' registrations), as the report
does. Every number is in its vendor's units (`app.core.units`: AMD compute units, NeuronCores, Moore
Threads' 16 cores per GPU, GCU tokens; MiB and percent otherwise), every device is named with its vendor
where a pod or a node has devices of several (device indexes repeat across vendors on a mixed node), and an
unschedulable pod's reason is printed whole, wrapped under its column: reasons differ at their end.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from app.core import units
from app.core.model import DeviceInfo
from app.core.vendor import CoreMasks
from sim.kit import podutil
from sim.nodes.objects import ZONE_LABEL
from sim.workload.report import (
    VENDOR_BY_KEY,
    DeviceLoad,
    device_loads,
    inventory,
    kind_of,
    outcome_of,
    pod_device_use,
)

Obj = dict[str, Any]
HEADERS = ("POD", "KIND", "VENDOR", "PHASE", "NODE / ZONE", "DEVICES / REASON")
MIN_LAST_COLUMN = 40


def width() -> int:
    """The terminal's width (120 when it is not a terminal)."""
    return shutil.get_terminal_size((120, 24)).columns


def device_text(device: DeviceInfo, mem: int, cores: int, *, named: bool) -> str:
    """`#2 16384 MiB 30%` in the device's vendor's units; `NVIDIA#2 ...` when `named`. Memory and cores
    are left out for devices that do not account them (a Neuron device's memory, Vastai's dies)."""
    vendor = VENDOR_BY_KEY.get(device.vendor)
    parts = [f"{device.vendor if named else ''}#{device.index}"]
    if device.devmem > 0:
        parts.append(units.memory_text(vendor, mem))
    if device.devcore > 0:
        parts.append(units.cores_text(vendor, cores))
    return " ".join(parts)


def _devices(pod: Obj, known: Mapping[str, DeviceInfo]) -> tuple[str, list[str]]:
    """(the pod's vendors, its devices), devices by vendor then index."""
    use = pod_device_use(pod)
    held = sorted(
        ((known[u], used) for u, used in use.items() if u in known), key=lambda x: (x[0].vendor, x[0].index)
    )
    vendors = sorted({d.vendor for d, _ in held})
    named = len(vendors) > 1
    texts = [device_text(d, mem, cores, named=named) for d, (_, mem, cores) in held]
    unknown = [f"{u} (not on its node)" for u in sorted(use) if u not in known]
    return "+".join(vendors) or "-", [*texts, *unknown]


def placement_table(pods: list[Obj], nodes: list[Obj], columns: int | None = None) -> list[str]:
    """One row per pod (bound first, by node), the last column wrapped at `columns` (the terminal's)."""
    zones = {podutil.name(n): podutil.labels(n).get(ZONE_LABEL, "") for n in nodes}
    known = {d.id: d for devs in inventory(nodes).values() for d in devs}
    rows: list[tuple[list[str], list[str], str]] = []
    for pod in sorted(pods, key=lambda p: (podutil.node_name(p) or "~", podutil.key(p))):
        outcome = outcome_of(pod)
        if outcome == "bound":
            vendor, pieces = _devices(pod, known)
            where = f"{podutil.node_name(pod)} {zones.get(podutil.node_name(pod), '')}".strip()
            joint = "  "
        else:  # a reason wraps between words, a device list between devices
            vendor, where, joint = "-", outcome.upper(), " "
            pieces = (podutil.unschedulable_reason(pod) or "").split()
        rows.append(([podutil.key(pod), kind_of(pod), vendor, podutil.phase(pod), where], pieces, joint))
    return _render(rows, columns or width())


def _packed(pieces: Sequence[str], joint: str, size: int) -> list[str]:
    """`pieces` joined by `joint` into lines of at most `size` characters, never splitting a piece."""
    lines: list[str] = []
    for piece in pieces:
        if lines and len(lines[-1]) + len(joint) + len(piece) <= size:
            lines[-1] += joint + piece
        else:
            lines.append(piece)
    return lines or [""]


def _render(rows: Sequence[tuple[list[str], list[str], str]], columns: int) -> list[str]:
    cells = [head for head, _, _ in rows]
    sizes = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(HEADERS[:-1])]
    indent = sum(sizes) + len(sizes)
    wrap = max(MIN_LAST_COLUMN, columns - indent)
    lines = [" ".join(h.ljust(s) for h, s in zip(HEADERS, sizes, strict=False)) + " " + HEADERS[-1]]
    lines.append("-" * min(columns, len(lines[0])))
    for head, pieces, joint in rows:
        packed = _packed(pieces, joint, wrap)
        lines.append(
            " ".join(cell.ljust(size) for cell, size in zip(head, sizes, strict=False)) + " " + packed[0]
        )
        lines.extend(" " * indent + line for line in packed[1:])
    return lines


def _bar(fraction: float, size: int = 16) -> str:
    full, empty = ("█", "░") if (sys.stdout.encoding or "").lower().startswith("utf") else ("#", ".")
    filled = max(0, min(size, round(fraction * size)))
    return full * filled + empty * (size - filled)


def _share(used: int, capacity: int, size: int, *, masks: bool = False) -> str:
    """A bar and a percentage; `masks`: both are bitmasks of core units (AWS Neuron), counted by bits."""
    if capacity <= 0:  # not accounted on this device (no memory on a Neuron device, a Vastai die)
        return f"{'-':<{size}} {'-':>6}"
    if masks:
        used, capacity = used.bit_count(), capacity.bit_count()
    fraction = used / capacity
    return f"{_bar(fraction, size)} {100 * fraction:5.1f}%"


def _device_line(load: DeviceLoad) -> str:
    d = load.device
    flag = "  OVER " + ",".join(load.over()) if load.over() else ""
    masks = isinstance(VENDOR_BY_KEY.get(d.vendor), CoreMasks)
    cores = _share(load.cores, d.devcore, 10, masks=masks)
    memory = _share(load.mem, d.devmem, 16)
    return f"    #{d.index} mem {memory}  cores {cores}  tasks {load.slots:>2}/{d.count}{flag}"


def _heading(vendor: str, loads: Iterable[DeviceLoad]) -> str:
    """`  NVIDIA: NVIDIA A100-SXM4-80GB`, or the vendor alone where its devices' type is its key."""
    models = [m for m in dict.fromkeys(load.device.type for load in loads) if m != vendor]
    return f"  {vendor}: {', '.join(models)}" if models else f"  {vendor}"


def utilisation_chart(pods: list[Obj], nodes: list[Obj]) -> list[str]:
    """Per node, per vendor (in registration order), one bar line per device: memory, cores, tasks."""
    loads, _, _ = device_loads(pods, inventory(nodes))
    by_node: dict[str, dict[str, list[DeviceLoad]]] = {}
    for load in loads:
        by_node.setdefault(load.node, {}).setdefault(load.device.vendor, []).append(load)
    zones = {podutil.name(n): podutil.labels(n).get(ZONE_LABEL, "") for n in nodes}
    lines = []
    for node in sorted(by_node):
        lines.append(f"{node}  {zones.get(node, '')}".rstrip())
        for vendor, vendor_loads in by_node[node].items():
            lines.append(_heading(vendor, vendor_loads))
            lines.extend(_device_line(load) for load in sorted(vendor_loads, key=lambda x: x.device.index))
    return lines
