"""Gang-aware filtering: a gang member's /filter decides for the whole quorum (docs/gangs.md).

kube-scheduler filters the members of a PodGroup one after another in one pod group cycle and keeps the
result only if `minCount` of them fit; extenders are not told when it gives up. So when a member is
filtered, this decides for the quorum before anything is reserved for the member:

- the quorum: the PodGroup's `minCount`, less the members bound, less the other members that hold an
  in-flight reservation (placed earlier in this cycle, or in one kube-scheduler has not finished), less
  the members that ask for no device; what is left must be placed, the asker among them unless its own
  reservation places it;
- the plan (app/core/gangplan.py): every member to place, each with its own requests, policies and quota
  view, on the nodes kube-scheduler offered this member, on the usage as the asker sees it — every
  reservation but its own, and every hold that blocks it (docs/held-reservations.md);
- cannot: every node of this member is answered with the gang and the shortfall ("gang default/train-1:
  devices for 5 of 8 members"), nothing is reserved, and the member's own earlier reservation, if it is
  still in flight, is released;
- can: the plan is held as one held reservation (app/filter/gangholds.py: a slot per planned member, so
  that the members never race each other or a lower-priority pod for the last devices), the member is
  filtered as a single pod — its own slot does not count against it, the others' do — and its allocation
  write is held until the quorum holds reservations (`hold`);
- a gang whose placed quorum kube-scheduler did not bind within the gang TTL is refused for a while
  (app/core/gang.py `next_attempt`): kube-scheduler retries it from its backoff queue whatever changed.

Which PodGroups exist and who their members are comes from the ledger file (app/state/podgroups.py, kept by
the registration worker): no API call here. Without the Workload API (Kubernetes before 1.37, or the gate
off) no pod names a PodGroup and nothing here runs; a pod naming one the worker has not seen yet gets a
retryable Error (kube-scheduler itself waits for the PodGroup before scheduling its members).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from app.context import Context
from app.core import pods, quota
from app.core.decision import pod_context
from app.core.fit import PodContext
from app.core.gang import (
    KNOWN_TOPOLOGY,
    REGION_KEY,
    abandoned_reason,
    gang_priority,
    group_of,
    next_attempt,
    shortfall_reason,
    topology_reason,
)
from app.core.gangplan import Member, plan, shape_of
from app.core.holds import gang_key
from app.core.model import NodeUse
from app.core.podfacts import asker_of
from app.core.pods import PodError
from app.core.usage import sum_uses
from app.core.vendor import InvalidRequest
from app.filter import gangholds
from app.filter.outcome import FilterOutcome
from app.filter.write import Write, decoded, encoded
from app.k8s.events import WARNING, PodRef
from app.state.fastpath import without_own
from app.state.ledger import ASSUMED, CONFIRMED
from app.state.podgroups import MemberFacts, PodGroups, Quorum
from app.state.snapshot import Snapshot

FILTERING_FAILED = "FilteringFailed"
IN_FLIGHT = (ASSUMED, CONFIRMED)


def gate(
    context: Context,
    pod: Mapping[str, Any],
    probe: PodContext,
    candidates: Sequence[str],
    snapshot: Snapshot,
    outcome: FilterOutcome,
) -> FilterOutcome | None:
    """The answer for a gang member whose quorum cannot be placed (or whose PodGroup is not known yet);
    None when the pod is to be filtered as a single pod — it names no PodGroup, the PodGroup is no gang,
    its quorum is bound or covered, or the quorum's devices were found."""
    name = group_of(pod)
    if not name:
        return None
    store = PodGroups(context.ledger)
    gang = store.gang(probe.namespace, name)
    if gang is None:
        if store.served() is False:
            return None  # no Workload API: the field means nothing to kube-scheduler either
        who = f"{probe.namespace}/{name}"
        return FilterOutcome(
            error=f"hami-scheduler: gang {who}: PodGroup not seen yet; retry later", denial="gang-unknown"
        )
    group = gang.group
    if not group.is_gang:
        return None
    uid = pods.uid(pod)
    now, asker, owner = context.clock(), asker_of(pod), group.key
    key = gang_key(owner)
    bound = [m for m in gang.members if m.bound]
    reserved = [m for m in gang.members if m.uid != uid and not m.bound and _in_flight(context, m.uid)]
    waiting = [m for m in gang.members if m.uid != uid and not m.bound and m not in reserved]
    # A member holding a reservation is placed, the asker too: its row holds its place while it decides
    # again (a place planned for it next to its own row would count its devices twice).
    mine = "" if _in_flight(context, uid) else uid  # the asker as a member to place
    to_place, free = _contexts(context, snapshot, probe, mine, waiting)
    needed = group.min_count - len(bound) - len(reserved) - free - (0 if mine else 1)
    if needed <= 0:  # the quorum is bound or placed without a plan: an extra member, a single pod
        gangholds.release(context, key, f"the quorum of {owner} is placed", now)
        return None
    before = store.attempts(group)
    attempts, allowed = next_attempt(before, now, context.settings.gang_ttl)
    if not allowed:  # kube-scheduler abandoned its last attempts: hold nothing for a while
        if attempts != before:
            store.set_attempts(group, attempts)
        gangholds.release(context, key, f"{owner}'s attempt abandoned", now)
        return _refuse(context, pod, probe, candidates, abandoned_reason(group, attempts, now), outcome)
    others = (*(m.uid for m in reserved), *(m.uid for m in to_place if m.uid != uid))
    quorum = Quorum(probe.namespace, name, group.min_count, (uid, *others), free + len(bound))
    if gangholds.kept(gangholds.live_plan(context, key, now), mine, {m.uid for m in waiting}, needed):
        outcome.gang, outcome.quorum = "kept", quorum  # this attempt's plan: take its place
        return None
    domains = _domains(group.topology, candidates, snapshot, [m.node for m in bound])
    if domains is None:
        gangholds.release(context, key, f"{owner}'s topology is not seen", now)
        return _refuse(context, pod, probe, candidates, topology_reason(group), outcome)
    nodes = {n: record.devices for n, record in snapshot.nodes.items()}
    vendors, priority = context.settings.vendors, gang_priority(group, pod)
    for _attempt in range(gangholds.ATTEMPTS):
        usage = _usage(context, mine, gangholds.blocking_use(context, key, asker, now))
        spare = _own_node(context, mine)
        unfit = {
            shape_of(m.ctx): context.fastpath.unfit(
                m.ctx, candidates, snapshot, context.usage, vendors, spare
            )
            for m in to_place
        }
        result = plan(to_place, needed, domains, nodes, usage, vendors, asker=mine, unfit=unfit)
        if not result.found:
            gangholds.release(context, key, f"{owner}'s quorum not found", now)
            found = group.min_count - needed + result.best
            offered = set(candidates)
            sampled = any(n not in offered for n in snapshot.nodes)
            return _refuse(context, pod, probe, candidates, shortfall_reason(group, found, sampled), outcome)
        if gangholds.hold(context, key, owner, priority, result, asker, nodes, now) is not None:
            if attempts != before:  # the attempt opens with its first placed quorum
                store.set_attempts(group, attempts)
            outcome.gang, outcome.quorum = "planned", quorum
            return None
        snapshot = context.refresh() or snapshot  # the capacity changed since the plan: plan again
    return FilterOutcome(
        error=f"hami-scheduler: gang {owner}: capacity changed concurrently; retry later", denial="conflict"
    )


def hold(context: Context, quorum: Quorum, write: Write) -> None:
    """Hold a planned member's allocation write until its quorum holds reservations, then send every held
    write of the gang (this one included) from here.

    Why: an attempt kube-scheduler abandons after our /filter accepted some members (one member does not
    fit its CPU, say) would otherwise write HAMi's annotations on those members — pod updates for nothing,
    annotations to clean up after the gang TTL, and members carrying a claim on devices nobody holds.
    Held, nothing is written for an attempt that does not reach the quorum. The binds wait for the write as
    for any deferred write (HAMI_BIND_WRITE_WAIT): kube-scheduler binds a gang's members after its whole pod
    group cycle, when the quorum is reserved (docs/gangs.md)."""
    store = PodGroups(context.ledger)
    store.hold_write(write.ref.uid, quorum, write.allocation, encoded(write))
    writer = context.writer
    assert writer is not None
    for raw in store.release_if_reserved(quorum):
        writer.submit(decoded(raw))


def holds_write(context: Context, uid: str) -> bool:
    """Is the pod's allocation write held for its gang (not in flight)?"""
    return PodGroups(context.ledger).holds_write(uid)


def _in_flight(context: Context, uid: str) -> bool:
    """Does the member hold a reservation in flight? It is placed: its devices are in the usage every plan
    sees, until its own /filter replaces the row or the sweep releases it (after the gang TTL)."""
    entry = context.usage.entries.get(uid)
    return entry is not None and entry.state in IN_FLIGHT


def _own_node(context: Context, uid: str) -> str:
    entry = context.usage.entries.get(uid)
    return entry.node if entry is not None else ""


def _contexts(
    context: Context, snapshot: Snapshot, probe: PodContext, uid: str, others: Sequence[MemberFacts]
) -> tuple[list[Member], int]:
    """The members to place (the asker first, unless `uid` is "") with their decision contexts, and how many
    members need no device at all (placed by kube-scheduler alone). A member whose pod does not decode
    cannot be placed."""
    used = {probe.namespace: context.usage.quota_used(probe.namespace, exclude_uid=uid)}
    view = quota.build_view({probe.namespace: snapshot.quota_limits.get(probe.namespace, {})}, used)
    members = [Member(uid, dataclasses.replace(probe, quota=view))] if uid else []
    free = 0
    for member in others:
        try:
            ctx = pod_context(member.pod, context.settings.vendors, context.settings.policies, view)
        except (PodError, InvalidRequest, ValueError):
            continue
        if not ctx.requests.any:
            free += 1
        else:
            members.append(Member(member.uid, ctx))
    return members, free


def _usage(context: Context, uid: str, held: Mapping[str, NodeUse]) -> dict[str, NodeUse]:
    """The usage as the asker sees it: every reservation but its own (`uid`; "": every one), and the slots
    that block it (`held`)."""
    nodes = dict(context.usage.nodes)
    own = context.usage.entries.get(uid)
    if own is not None and own.node in nodes:
        nodes[own.node] = without_own(nodes[own.node], own.uses)
    for node, use in held.items():
        nodes[node] = sum_uses([nodes.get(node, {}), use])
    return nodes


def _domains(
    topology: str, candidates: Sequence[str], snapshot: Snapshot, bound_nodes: Sequence[str]
) -> list[list[str]] | None:
    """The candidate lists to plan in: all candidates; or, under a topology constraint on a label the
    inventory keeps, one list per domain (only the bound members' domain once one is bound); None for a
    constraint on a label it does not keep."""
    if not topology:
        return [list(candidates)]
    if topology not in KNOWN_TOPOLOGY:
        return None

    def domain(node: str) -> str:
        record = snapshot.nodes.get(node)
        if record is None:
            return ""
        return record.region if topology == REGION_KEY else record.zone

    fixed = {domain(n) for n in bound_nodes}
    by_domain: dict[str, list[str]] = {}
    for name in candidates:
        value = domain(name)
        if value and (not fixed or value in fixed):
            by_domain.setdefault(value, []).append(name)
    return list(by_domain.values())


def _refuse(
    context: Context,
    pod: Mapping[str, Any],
    probe: PodContext,
    candidates: Sequence[str],
    reason: str,
    outcome: FilterOutcome,
) -> FilterOutcome:
    """Every candidate refused with the gang's reason; the member's own in-flight reservation released."""
    uid = pods.uid(pod)
    context.ledger.forget_in_flight(uid, probe.namespace, probe.name)
    store = PodGroups(context.ledger)
    store.drop_write(uid)
    group = group_of(pod)
    if group:
        store.refused(probe.namespace, group, reason, context.clock())
    if context.settings.events_enabled:
        ref = PodRef(probe.namespace, probe.name, uid)
        context.events.record(ref, WARNING, FILTERING_FAILED, reason)
        context.events.record(
            ref, WARNING, FILTERING_FAILED, f"no available node, {len(candidates)} nodes do not meet"
        )
    outcome.failed = dict.fromkeys(candidates, reason)
    outcome.denial = "gang"
    outcome.gang = "refused"
    return outcome
