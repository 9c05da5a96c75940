"""`inspect`'s gang section: each PodGroup's quorum, how many of its members are placed, how many places a
plan holds for it, and why the quorum was not placed (docs/gangs.md).

Live and from a dump: PodGroups (where the API serves them, or the dump has them) and the pods naming one —
bound members, unbound members carrying our allocation (reserved), and the message kube-scheduler wrote on
an unscheduled member (`PodScheduled` False, which carries our refusal). `--url`: what that replica's
worker and ledger hold (app/routes/debug.py `gangs`): the members' reservations and the last refusal.
Without the Workload API no pod names a PodGroup: no section.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from app.cli import tables
from app.core import pods
from app.core.decision import ASSIGNED_NODE
from app.core.gang import PodGroupFacts, group_of, podgroup_facts
from app.core.pods import PodError


@dataclass(frozen=True, slots=True)
class GangView:
    namespace: str
    name: str
    min_count: int | None  # None: no such PodGroup (its members wait for it)
    members: int
    bound: int
    reserved: int  # unbound members holding a reservation
    held: int  # places a plan holds for members without one
    why: str  # why the quorum was last not placed ("" when it was, or nothing says)


def _why_not(pod: Mapping[str, Any]) -> str:
    status = pod.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for condition in conditions if isinstance(conditions, list) else ():
        scheduled = isinstance(condition, Mapping) and condition.get("type") == "PodScheduled"
        if scheduled and condition.get("status") == "False":
            return str(condition.get("message") or condition.get("reason") or "")
    return ""


def from_objects(
    groups: Sequence[Mapping[str, Any]] | None, pod_list: Sequence[Mapping[str, Any]]
) -> list[GangView]:
    """Gangs from PodGroup objects (None: not read, a dump) and pods as the API shows them."""
    facts: dict[tuple[str, str], PodGroupFacts] = {}
    for group in groups or ():
        found = podgroup_facts(group)
        if found is not None and found.is_gang:
            facts[(found.namespace, found.name)] = found
    members: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for pod in pod_list:
        name = group_of(pod)
        if not name:
            continue
        try:
            if pods.is_terminated(pod):
                continue
            members.setdefault((pods.namespace(pod), name), []).append(pod)
        except PodError:
            continue
    views = []
    for key in sorted(facts.keys() | members.keys()):
        group_members = members.get(key, [])
        bound = [p for p in group_members if pods.spec(p).get("nodeName")]
        unbound = [p for p in group_members if not pods.spec(p).get("nodeName")]
        reserved = [p for p in unbound if pods.annotations_of(p).get(ASSIGNED_NODE)]
        why = next((w for w in map(_why_not, unbound) if w), "")
        known = facts.get(key)
        if known is None and groups is not None and not why:
            why = "no PodGroup"
        count = known.min_count if known else None
        views.append(GangView(*key, count, len(group_members), len(bound), len(reserved), 0, why))
    return views


def from_state(state: Any) -> list[GangView] | None:
    """A replica's /debug/state `gangs` (None: the replica does not report them)."""
    raw = state.get("gangs") if isinstance(state, Mapping) else None
    if not isinstance(raw, list):
        return None
    return [
        GangView(
            str(g["namespace"]), str(g["name"]), g.get("min_count"), int(g["members"]), int(g["bound"]),
            int(g["reserved"]), int(g.get("held", 0)), str(g.get("why") or ""),
        )
        for g in raw
        if isinstance(g, Mapping)
    ]  # fmt: skip


def render(views: Sequence[GangView]) -> str:
    rows = [
        [
            f"{v.namespace}/{v.name}",
            "?" if v.min_count is None else str(v.min_count),
            str(v.members),
            str(v.bound),
            str(v.reserved),
            str(v.held),
            v.why or "-",
        ]
        for v in views
    ]
    return "GANGS\n" + tables.table(
        ["PODGROUP", "QUORUM", "MEMBERS", "BOUND", "RESERVED", "HELD", "WHY NOT"], rows
    )


def to_json(views: Sequence[GangView]) -> list[dict[str, Any]]:
    return [asdict(v) for v in views]
