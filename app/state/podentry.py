"""A ledger row built from a pod's own annotations (the API server is the truth).

The registration worker rebuilds and follows the ledger with it, and /bind adopts with it a pod that
another replica filtered (app.binding): both must produce the same row for the same pod, or a rebuild would
not equal the live ledger.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.core import pods
from app.core.reservations import reservation_from_pod
from app.core.vendor import Vendor
from app.state.ledger import Entry


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
    )
