"""What /bind knows without reading the pod, when this replica's ledger vouches for it (issue 20).

Why it exists: /bind used to GET the pod before anything else, to learn that it is the requested
incarnation of a pod of ours, unbound, filtered onto this node, and what it was allocated. When this
replica filtered the pod and its allocation write landed (the row `confirmed`: same UID, namespace, name
and node), the ledger holds exactly that, so the GET is spent on nothing — one API round trip per pod.

Invariants owned here:
- Only behind kube-scheduler's client certificate (the deferred write's condition): the ExtenderBindingArgs
  come from the caller that sent the filtered pod.
- The bind-phase stamp becomes a JSON Patch whose `test` operations are the preconditions the GET gave:
  the pod's UID, `hami.io/vgpu-node` and every vendor's allocated list as this replica wrote them. A pod
  deleted, recreated, or carrying another allocation (a deposed leader's write landing late) fails the
  patch (422/404, nothing applied) and the bind fails as it would have after the GET.
- The re-check after the lock still reads the node's pods from the API and decides on the ledger's row,
  which is the allocation the stamp then verifies on the pod.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.codec import CodecError, decode_pod_single_device
from app.core.decision import ASSIGNED_NODE
from app.core.nodelock import BIND_PHASE, BIND_TIME, PHASE_ALLOCATING
from app.core.vendor import Vendor
from app.k8s.events import PodRef
from app.state.ledger import CONFIRMED, Entry, Ledger


@dataclass(frozen=True, slots=True)
class Vouched:
    """The pod as this replica's ledger knows it: its row, each vendor's allocated list as written, and the
    vendors it holds devices of (whose locks the bind takes)."""

    row: Entry
    lists: Mapping[str, str]  # allocated annotation -> value
    vendors: frozenset[str]


def allocation_values(allocation: str, keys: Sequence[str]) -> dict[str, str]:
    """Split a row's `allocation` (`<vendor>=<allocated list>` per vendor, sorted, joined by `;`: see
    app.state.podentry.allocation_of) back into vendor key -> list. A list's pieces never start with a
    vendor key and `=` (devices are `<id>,<type>,<mem>,<cores>:`), so a piece that does starts the next."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for piece in allocation.split(";"):
        head, sep, rest = piece.partition("=")
        if sep and head in keys:
            current = found.setdefault(head, [])
            current.append(rest)
        elif current is not None:
            current.append(piece)
    return {key: ";".join(pieces) for key, pieces in found.items()}


def vouched(ledger: Ledger, ref: PodRef, node: str, vendors: Sequence[Vendor]) -> Vouched | None:
    """The ledger's word for this bind, or None when it cannot vouch (then /bind reads the pod)."""
    row = ledger.get(ref.uid)
    if row is None or row.state != CONFIRMED or row.node != node:
        return None
    if (row.namespace, row.name) != (ref.namespace, ref.name):
        return None
    by_key = {v.key: v for v in vendors}
    values = allocation_values(row.allocation, sorted(by_key))
    lists: dict[str, str] = {}
    holding: set[str] = set()
    for key, value in values.items():
        vendor = by_key[key]
        if not vendor.allocated_annotation:
            return None
        try:
            groups = decode_pod_single_device(value)
        except CodecError:
            return None
        lists[vendor.allocated_annotation] = value
        if any(groups):
            holding.add(key)
    return Vouched(row, lists, frozenset(holding)) if holding else None


def _pointer(*parts: str) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def stamp_operations(ref: PodRef, node: str, known: Vouched, now: int) -> list[dict[str, Any]]:
    """The bind-phase stamp as a JSON Patch, preconditioned on what the ledger vouches for."""
    tests = {ASSIGNED_NODE: node, **known.lists}
    operations: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": ref.uid}]
    operations += [
        {"op": "test", "path": _pointer("metadata", "annotations", key), "value": value}
        for key, value in sorted(tests.items())
    ]
    stamp = {BIND_PHASE: PHASE_ALLOCATING, BIND_TIME: str(now)}
    operations += [
        {"op": "add", "path": _pointer("metadata", "annotations", key), "value": value}
        for key, value in stamp.items()
    ]
    return operations
