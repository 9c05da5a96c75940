"""A reservation row of the ledger (app/state/ledger.py) as plain data: its states, its bind mark, its
columns and how a stored row decodes.

The bind mark says whether a bind may have acted on an in-flight row — what no filter may overlook
(docs/ledger-writers.md): `""` no bind has acted on it (filter-made, or confirmed by the filter's own
write); `bind-<token>` a bind re-checked it and has not finished (its failure path removes only a row
carrying its own token); `unknown` a bind ended without knowing whether the pod was bound (the binding's
answer lost, its re-reads unanswered); `rebuilt` rebuilt from a pod by a rebuild (a previous leader's bind
may be landing). A `bound` row never carries one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

from app.core.model import DeviceUse
from app.core.podfacts import PodFacts
from app.state.usecodec import decode_uses

ASSUMED, CONFIRMED, BOUND = "assumed", "confirmed", "bound"
IN_FLIGHT = (ASSUMED, CONFIRMED)
NO_BIND, BIND_UNKNOWN, BIND_REBUILT = "", "unknown", "rebuilt"
BIND_RUNNING = "bind-"  # the prefix of a running bind's token

COLUMNS = (
    "uid, namespace, name, node, state, uses, quota, allocation, updated_at, bind,"
    " priority, started, terminating, gang"
)


@dataclass(frozen=True, slots=True)
class Entry:
    uid: str
    namespace: str
    name: str
    node: str
    state: str
    uses: Mapping[str, DeviceUse]
    quota: Mapping[str, int] = field(default_factory=dict)
    allocation: str = ""
    updated_at: float = 0.0
    bind: str = NO_BIND  # the bind mark (module docstring)
    # The pod's facts (app/core/podfacts.py), what preemption and gangs read of a holder without the API:
    priority: int = 0  # spec.priority
    started: str = ""  # status.startTime, else metadata.creationTimestamp (RFC 3339)
    terminating: bool = False  # metadata.deletionTimestamp set
    gang: str = ""  # <namespace>/<spec.schedulingGroup.podGroupName>

    @property
    def facts(self) -> PodFacts:
        return PodFacts(self.priority, self.started, self.terminating, self.gang)


@dataclass(frozen=True, slots=True)
class Changes:
    """What changed since a reader's sequence number; `full` means: drop everything and take `entries`."""

    entries: tuple[Entry, ...]
    removed: tuple[str, ...]
    seq: int
    epoch: int
    full: bool
    seqs: tuple[int, ...] = ()  # each entry's sequence number, in order (none: not known)
    holds: int = 0  # the holds' version (meta `holds`): a reader reloads every hold when it moved


class RowState(NamedTuple):
    """A reservation row without its device uses (`Ledger.row_states`, `Ledger.row`): also the version of
    a row — a writer that read it acts on it only while (state, updated_at, bind) are still these."""

    uid: str
    state: str
    updated_at: float
    namespace: str = ""
    name: str = ""
    bind: str = NO_BIND
    node: str = ""


def entry_of(row: tuple[object, ...]) -> Entry:
    """A stored row (`COLUMNS`, in order) decoded."""
    uid, namespace, name, node, state, uses, quota, allocation, updated_at, bind, *facts = row
    priority, started, terminating, gang = facts
    return Entry(
        str(uid),
        str(namespace),
        str(name),
        str(node),
        str(state),
        decode_uses(uses),  # type: ignore[arg-type]
        orjson.loads(quota),  # type: ignore[arg-type]
        str(allocation),
        float(updated_at),  # type: ignore[arg-type]
        str(bind),
        int(priority),  # type: ignore[call-overload]
        str(started),
        bool(terminating),
        str(gang),
    )


def may_be_bound(row: RowState) -> bool:
    """A row a bind may have acted on: `bound`, or in flight with any bind mark."""
    return row.state == BOUND or row.bind != NO_BIND


def version(row: RowState) -> tuple[str, float, str]:
    """What identifies one version of a row: a decision rewrites it with a new date, a bind marks it."""
    return (row.state, row.updated_at, row.bind)


class Protected(Exception):
    """A filter's write met a row it may not replace or forget (`Ledger.assume`): bound, or marked by a
    bind, and not the very version the caller verified unbound on the API."""

    def __init__(self, row: RowState) -> None:
        super().__init__(f"the reservation of pod {row.namespace}/{row.name} may be bound ({row.state})")
        self.row = row


def row_state(row: Sequence[Any]) -> RowState:
    """A row as `SELECT uid, state, updated_at, namespace, name, bind, node` reads it."""
    uid, state, at, namespace, name, bind, node = row
    return RowState(str(uid), str(state), float(at), str(namespace), str(name), str(bind), str(node))


def replaceable(current: RowState | None, verified: RowState | None) -> bool:
    """May a filter replace or forget `current` (docs/ledger-writers.md)? Only when no bind may have acted
    on it, or when it is exactly the version the caller verified unbound with a read of the pod; never a
    `bound` row."""
    if current is None:
        return True
    if current.state == BOUND:
        return False
    return current.bind == NO_BIND or (verified is not None and version(current) == version(verified))
