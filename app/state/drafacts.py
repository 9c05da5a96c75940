"""The DRA facts (`app.core.dra.DraFacts`) shared from the registration worker with the Gunicorn workers.

Like the replica's status (app/state/status.py), the facts travel as one row of the ledger's status table,
`dra`, written by the worker after each check (every registration pass) and read by the HTTP side at most
once a second (`DraReader`), so /filter and the webhook see a DeviceClass or ResourceSlice change within a
registration interval. A missing or unreadable row reads as "no DRA facts": nothing is refused.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from app.core.dra import Collision, DraFacts, Overlap
from app.state.ledger import Ledger

ROW = "dra"
MAX_AGE = 1.0  # seconds a reader keeps its decoded copy


def encode(facts: DraFacts) -> dict[str, Any]:
    return {
        "available": facts.available,
        "checked_at": facts.checked_at,
        "collisions": [
            {"resource": c.resource, "vendor": c.vendor, "classes": list(c.classes)} for c in facts.collisions
        ],
        "overlaps": [
            {"node": o.node, "drivers": list(o.drivers), "devices": o.devices} for o in facts.overlaps
        ],
    }


def decode(raw: object) -> DraFacts:
    """The facts of a row; anything malformed reads as no facts (never an exception on the hot path)."""
    if not isinstance(raw, Mapping):
        return DraFacts()
    try:
        return DraFacts(
            raw.get("available") is True,
            tuple(
                Collision(str(c["resource"]), str(c["vendor"]), tuple(str(n) for n in c["classes"]))
                for c in raw.get("collisions") or ()
            ),
            tuple(
                Overlap(str(o["node"]), tuple(str(d) for d in o["drivers"]), int(o["devices"]))
                for o in raw.get("overlaps") or ()
            ),
            float(raw.get("checked_at") or 0.0),
        )
    except (KeyError, TypeError, ValueError):
        return DraFacts()


def publish(ledger: Ledger, facts: DraFacts) -> None:
    ledger.set_status({ROW: encode(facts)})


class DraReader:
    """A Gunicorn worker's copy of the facts, re-read from the ledger at most every MAX_AGE seconds."""

    def __init__(self, ledger: Ledger, clock: Callable[[], float] = time.monotonic) -> None:
        self._ledger = ledger
        self._clock = clock
        self._cached: tuple[float, DraFacts] | None = None
        self._lock = threading.Lock()

    def current(self) -> DraFacts:
        cached, now = self._cached, self._clock()
        if cached is not None and now - cached[0] <= MAX_AGE:
            return cached[1]
        with self._lock:
            facts = decode(self._ledger.status().get(ROW))
            self._cached = (now, facts)
            return facts
