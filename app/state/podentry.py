"""A ledger row built from a pod's own annotations (the API server is the truth).

The registration worker rebuilds and follows the ledger with it, and /bind adopts with it a pod that
another replica filtered (app.bind.usecase): both must produce the same row for the same pod, or a rebuild
would not equal the live ledger. /bind's re-check decodes every pod on the node each time (`PodUses` keeps
what it decoded, by UID and resourceVersion: the same pod version always decodes the same).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from cachetools import LRUCache

from app.core import pods
from app.core.model import DeviceUse
from app.core.podfacts import facts_of
from app.core.reservations import reservation_from_pod
from app.core.vendor import Vendor
from app.state.ledger import BOUND, Entry


def allocation_of(pod: Mapping[str, Any], vendors: Sequence[Vendor]) -> str:
    """`<vendor>=<allocation annotation>` per vendor, as /filter records it."""
    annotations = pods.annotations_of(pod)
    parts = [
        f"{v.key}={annotations[v.allocated_annotation]}"
        for v in sorted(vendors, key=lambda v: v.key)
        if v.allocated_annotation in annotations
    ]
    return ";".join(parts)


def entry_for(
    pod: Mapping[str, Any],
    vendors: Sequence[Vendor],
    schedulers: frozenset[str] | None,
    state: str,
    updated_at: float,
) -> Entry | None:
    """The pod's reservation row, None when it holds nothing; raises CodecError or PodError when corrupt."""
    reservation = reservation_from_pod(pod, vendors, schedulers)
    if reservation is None:
        return None
    facts = facts_of(pod)
    return Entry(
        uid=reservation.uid,
        namespace=reservation.namespace,
        name=reservation.name,
        node=reservation.node,
        state=state,
        uses=reservation.uses,
        quota=reservation.quota_use,
        allocation=allocation_of(pod, vendors),
        updated_at=updated_at,
        priority=facts.priority,
        started=facts.started,
        terminating=facts.terminating,
        gang=facts.gang,
    )


class PodUses:
    """The device uses `entry_for` finds in a pod (None when it holds nothing), kept per (UID,
    resourceVersion) for one process's vendors and scheduler names: /bind's re-check lists the node's pods
    and decoded every one of them on every bind (issue 20). A version the API server gave once never
    changes, so a kept answer is the answer; a pod without a resourceVersion is decoded every time, and a
    corrupt one raises every time (nothing is kept)."""

    def __init__(self, vendors: Sequence[Vendor], schedulers: frozenset[str], size: int = 4096) -> None:
        self._vendors, self._schedulers = vendors, schedulers
        self._kept: LRUCache[tuple[str, str], tuple[dict[str, DeviceUse] | None]] = LRUCache(maxsize=size)
        self._lock = threading.Lock()

    def of(self, pod: Mapping[str, Any], now: float) -> dict[str, DeviceUse] | None:
        """The pod's device uses, None when it holds nothing; raises CodecError or PodError (ValueError)
        when it is corrupt."""
        version = str(pods.metadata(pod).get("resourceVersion") or "")
        key = (pods.uid(pod), version)
        with self._lock:
            kept = self._kept.get(key) if version else None
        if kept is None:
            entry = entry_for(pod, self._vendors, self._schedulers, BOUND, now)
            kept = (dict(entry.uses) if entry is not None else None,)
            if version:
                with self._lock:
                    self._kept[key] = kept
        return dict(kept[0]) if kept[0] is not None else None
