"""`inspect`'s HOLDS section: the held reservations of a replica (`--url`: its /debug/state `holds`,
app/state/holdjson.py) — nominations held for preemptors and gang plans, each slot with its kind, owner,
priority, node, devices, victims, reason and the time left until it expires (docs/held-reservations.md).

Holds live in a replica's ledger: a live cluster or a dump shows none (nominations a preemptor carries on
its pod are the preemptor's to show), so the section is there only with `--url`.
"""

from __future__ import annotations

from typing import Any

from app.cli import tables
from app.state import holdjson
from app.state.holdjson import HeldView


def from_state(state: Any) -> list[HeldView] | None:
    raw = state.get("holds") if isinstance(state, dict) else None
    return holdjson.decode(raw) if raw is not None else None


def _devices(held: HeldView) -> str:
    return " ".join(
        f"{tables.shorten(uuid, 16)}({tables.mib(memory)}{f',{cores}%' if cores else ''})"
        for uuid, (_, memory, cores) in sorted(held.devices.items())
    )


def _expires(seconds: float) -> str:
    return "expired" if seconds <= 0 else tables.age(seconds)


def render(holds: list[HeldView]) -> str:
    if not holds:
        return "HOLDS\nno held reservations"
    rows = [
        [
            h.kind,
            h.pod,
            str(h.priority),
            h.node,
            _devices(h),
            ",".join(h.victims) or "-",
            h.reason or "-",
            _expires(h.expires_in),
        ]
        for h in sorted(holds, key=lambda h: (-h.priority, h.pod, h.node))
    ]
    headers = ["KIND", "OWNER", "PRIORITY", "NODE", "DEVICES", "VICTIMS", "REASON", "EXPIRES IN"]
    return "HOLDS\n" + tables.table(headers, rows)


def to_json(holds: list[HeldView]) -> list[dict[str, Any]]:
    return [
        {
            "kind": h.kind,
            "owner": h.owner,
            "pod": h.pod,
            "priority": h.priority,
            "node": h.node,
            "slot": h.slot,
            "devices": {u: {"slots": s, "memory_mib": m, "cores": c} for u, (s, m, c) in h.devices.items()},
            "victims": list(h.victims),
            "reason": h.reason,
            "expires_in_seconds": h.expires_in,
        }
        for h in holds
    ]
