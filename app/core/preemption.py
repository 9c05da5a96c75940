"""Device-aware victims for kube-scheduler's preemption (the extender's `preemptVerb`, docs/preemption.md).

kube-scheduler's own dry run only runs in-tree filters, which ignore the resources this extender manages
(`ignoredByScheduler`), so its victims say nothing about devices. For each candidate node this module keeps
the victims kube-scheduler chose (they are needed for what the in-tree filters check) and adds the fewest
lower-priority pods holding devices on that node whose freed devices make the preemptor fit there, using the
very fit `/filter` uses (`app.core.fit.evaluate_node` on the node's usage minus the victims' reservations).

Invariants owned here:
- a victim it adds has a priority strictly lower than the preemptor's; a pod of higher or equal priority is
  never added;
- with the returned victims removed the preemptor fits the node's devices under the node's policies; a node
  where no set of eligible pods makes it fit is dropped (None);
- among the sets that fit it returns one of the fewest pods, then the lowest priorities, then the newest
  pods — exactly, while the search stays within its budget of fits per node; beyond that the best set found
  so far, at worst the greedy one (kube-scheduler's remove-all-then-reprieve), which fits but may not be
  the smallest.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core import pods
from app.core.fit import PodContext, evaluate_node
from app.core.model import DeviceUse, NodeDevices
from app.core.usage import sum_uses
from app.core.vendor import Vendor

MAX_EVALUATIONS = 1024  # fits tried per node (beyond the greedy set's) before the search settles
REQUEST_EVALUATIONS = 4096  # shared by the candidate nodes of one request (at least MIN_EVALUATIONS each)
MIN_EVALUATIONS = 64


def node_budget(candidates: int) -> int:
    """Fits each of `candidates` nodes may try: kube-scheduler waits `httpTimeout` (30 s) for the whole
    answer and sends up to max(100, 10% of the nodes) candidates; a fit costs up to ~1 ms on a node
    with 80 holders."""
    return max(MIN_EVALUATIONS, min(MAX_EVALUATIONS, REQUEST_EVALUATIONS // max(1, candidates)))


def priority(pod: Mapping[str, Any]) -> int:
    """The pod's `spec.priority` (the admission plugin resolves its PriorityClass into it); 0 when unset,
    as kube-scheduler's `corev1helpers.PodPriority` reads it."""
    value = pods.spec(pod).get("priority")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def started(pod: Mapping[str, Any]) -> str:
    """When the pod started (`status.startTime`), else when it was created: kube-scheduler ranks pods of
    equal priority by start time, an earlier one being the more important."""
    status = pod.get("status")
    value = status.get("startTime") if isinstance(status, Mapping) else None
    if not isinstance(value, str) or not value:
        value = pods.metadata(pod).get("creationTimestamp")
    return value if isinstance(value, str) else ""


@dataclass(frozen=True, slots=True)
class Holder:
    """A pod bound to the node with a reservation there: what it holds and how it ranks as a victim.
    `started`: its start (or creation) time as RFC 3339 text; a later one is a newer pod."""

    uid: str
    priority: int
    started: str
    uses: Mapping[str, DeviceUse]


@dataclass(frozen=True, slots=True)
class NodeCase:
    """One candidate node: its devices, the reservations no victim can free (`fixed`: pods in flight, or
    not bound there), the bound holders, and the victims kube-scheduler already chose there (UIDs)."""

    node: NodeDevices
    fixed: Sequence[Mapping[str, DeviceUse]]
    holders: Sequence[Holder]
    chosen: frozenset[str] = frozenset()


def _fits(case: NodeCase, removed: frozenset[str], ctx: PodContext, vendors: Mapping[str, Vendor]) -> bool:
    kept = [h.uses for h in case.holders if h.uid not in removed]
    return evaluate_node(case.node, sum_uses([*case.fixed, *kept]), ctx, vendors).fits


def _rank(victims: Sequence[Holder], newness: Mapping[str, int]) -> tuple[object, ...]:
    """Smaller is better: fewer pods, then lower priorities (highest first), then newer pods."""
    priorities = tuple(sorted((v.priority for v in victims), reverse=True))
    ages = tuple(sorted(-newness[v.uid] for v in victims))
    return (len(victims), priorities, ages)


def _greedy(
    case: NodeCase, eligible: Sequence[Holder], ctx: PodContext, vendors: Mapping[str, Vendor]
) -> tuple[Holder, ...]:
    """kube-scheduler's way: all eligible pods out, then each put back, most important first, while the
    preemptor still fits. The caller has checked that it fits with all of them out."""
    removed = {h.uid for h in eligible} | case.chosen
    victims: list[Holder] = []
    for holder in sorted(eligible, key=lambda h: (-h.priority, h.started, h.uid)):
        removed.discard(holder.uid)
        if not _fits(case, frozenset(removed), ctx, vendors):
            removed.add(holder.uid)
            victims.append(holder)
    return tuple(victims)


def choose_victims(
    case: NodeCase,
    preemptor_priority: int,
    ctx: PodContext,
    vendors: Mapping[str, Vendor],
    *,
    max_evaluations: int = MAX_EVALUATIONS,
) -> tuple[str, ...] | None:
    """The victims' UIDs on this node (kube-scheduler's own first, then the added ones, lowest rank
    first), or None when no set of lower-priority device holders makes the preemptor fit.

    The greedy set comes first (one fit per eligible pod); then sets of fewer pods, or as many pods of a
    better rank, are tried smallest first, within `max_evaluations` fits and sixteen times as many sets
    looked at, so a node with many small holders costs a bounded time."""
    if _fits(case, case.chosen, ctx, vendors):
        return tuple(sorted(case.chosen))
    eligible = [h for h in case.holders if h.priority < preemptor_priority and h.uid not in case.chosen]
    if not eligible or not _fits(case, case.chosen | {h.uid for h in eligible}, ctx, vendors):
        return None
    by_age = sorted(eligible, key=lambda h: (h.started, h.uid))
    newness = {h.uid: position for position, h in enumerate(by_age)}
    best = _greedy(case, eligible, ctx, vendors)
    fits_left, looks_left = max_evaluations, 16 * max_evaluations
    for size in range(1, len(best) + 1):
        for combination in itertools.combinations(eligible, size):
            looks_left -= 1
            if looks_left < 0 or fits_left <= 0:
                return _answer(case, best, newness)
            if _rank(combination, newness) >= _rank(best, newness):
                continue
            fits_left -= 1
            if _fits(case, case.chosen | {h.uid for h in combination}, ctx, vendors):
                best = combination
        if len(best) <= size:
            break
    return _answer(case, best, newness)


def _answer(case: NodeCase, added: Sequence[Holder], newness: Mapping[str, int]) -> tuple[str, ...]:
    ordered = sorted(added, key=lambda h: _rank((h,), newness))
    return (*sorted(case.chosen), *(h.uid for h in ordered))
