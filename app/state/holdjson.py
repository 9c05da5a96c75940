"""Held reservations as a replica shows them (/debug/state, app/routes/debug.py) and `inspect --url` reads
them (app/cli/holdsection.py): one JSON object per slot, with the time left until it expires measured by
the replica's own clock (the reader's may differ).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from app.core.holds import Hold


@dataclass(frozen=True, slots=True)
class HeldView:
    """One slot as inspect shows it."""

    kind: str
    owner: str
    pod: str  # <namespace>/<name>: the preemptor, or the PodGroup
    priority: int
    node: str
    slot: str
    devices: dict[str, tuple[int, int, int]]  # uuid -> (slots, memory MiB, cores)
    victims: tuple[str, ...]
    reason: str
    expires_in: float  # seconds, by the replica's clock (negative: expired, not yet swept)


def encode(holds: Iterable[Hold], now: float) -> list[dict[str, Any]]:
    return [
        {
            "key": h.key,
            "kind": h.kind,
            "owner": h.owner,
            "pod": f"{h.namespace}/{h.name}",
            "priority": h.priority,
            "node": h.node,
            "slot": h.slot,
            "devices": {
                uuid: {"slots": u.slots, "memory": u.mem, "cores": u.cores} for uuid, u in h.uses.items()
            },
            "victims": list(h.victims),
            "reason": h.reason,
            "expires_in_seconds": round(h.expires_at - now, 1),
        }
        for h in holds
    ]


def decode(raw: Any) -> list[HeldView]:
    """The replica's holds; raises KeyError, TypeError or ValueError on anything else."""
    return [
        HeldView(
            str(h["kind"]),
            str(h["owner"]),
            str(h["pod"]),
            int(h["priority"]),
            str(h["node"]),
            str(h.get("slot", "")),
            {str(k): (int(v["slots"]), int(v["memory"]), int(v["cores"])) for k, v in h["devices"].items()},
            tuple(str(v) for v in h.get("victims") or ()),
            str(h.get("reason", "")),
            float(h["expires_in_seconds"]),
        )
        for h in raw
    ]
