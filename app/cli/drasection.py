"""`inspect`'s DRA section: which resource names and which nodes kube-scheduler's DRA allocator also serves.

Live (`from_cluster`): DeviceClasses and ResourceSlices listed read-only and compared with the nodes the
view registers, with the rules the registration worker uses (`app.core.dra`); `--url`: the facts that
replica's worker published (its /debug/state `dra`). A dump carries no DRA objects: no section.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from app.cli import tables
from app.core import dra
from app.core.dra import DraFacts
from app.core.vendor import Vendor
from app.devices.dra import drivers_for
from app.state import drafacts


def live(
    lists: tuple[list[dict[str, Any]], list[dict[str, Any]]] | None,
    vendors: Sequence[Vendor],
    registered: Collection[str],
) -> DraFacts:
    classes, slices = lists if lists is not None else (None, None)
    return dra.facts(classes, slices, vendors, drivers_for({v.key for v in vendors}), registered, 0.0)


def from_state(state: Any) -> DraFacts | None:
    raw = state.get("dra") if isinstance(state, dict) else None
    return drafacts.decode(raw) if raw is not None else None


def render(facts: DraFacts) -> str:
    if not facts.available:
        return "DRA\nthe cluster serves no resource.k8s.io/v1: nothing is shared with kube-scheduler's DRA"
    if not facts.any:
        return "DRA\nno resource name or registered node of ours is served by DRA"
    parts = ["DRA (kube-scheduler allocates these too; hami-scheduler refuses them)"]
    if facts.collisions:
        rows = [
            [c.resource, c.vendor, ", ".join(c.classes), "pods asking for it are refused"]
            for c in facts.collisions
        ]
        parts.append(tables.table(["RESOURCE", "VENDOR", "DEVICECLASS", "EFFECT"], rows))
    if facts.overlaps:
        rows = [
            [o.node, ", ".join(o.drivers), str(o.devices), "refused for our resources"]
            for o in facts.overlaps
        ]
        parts.append(tables.table(["NODE", "DRA DRIVER", "DEVICES", "EFFECT"], rows))
    return "\n".join(parts)


def to_json(facts: DraFacts) -> dict[str, Any]:
    encoded = drafacts.encode(facts)
    encoded.pop("checked_at")
    return encoded
