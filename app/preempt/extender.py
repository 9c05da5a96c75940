"""The Preempt use case: kube-scheduler's `preemptVerb` (ProcessPreemption, docs/preemption.md).

kube-scheduler sends the preemptor and, per candidate node, the victims its in-tree dry run chose; we answer,
per node, those victims plus the fewest lower-priority pods holding devices there whose freed devices make
the preemptor fit (`app.core.preemption`), and drop the nodes where nothing makes it fit.

Invariants owned here:
- it decides and writes nothing: no reservation, no annotation, no deletion (kube-scheduler deletes the
  victims; the ledger releases their reservations when the pods go, as for any deleted pod);
- a victim is a pod the API shows bound to that node with a reservation in our ledger (kube-scheduler looks
  every returned UID up among the pods of that node and fails the whole preemption on one it does not
  know); reservations of pods in flight count as usage that no victim frees;
- every node answered has at least one victim (kube-scheduler refuses an empty set from an extender that
  is not ignorable, failing the whole preemption);
- a replica that may not decide, or a request we cannot serve, answers no node at all (an `Error` beside):
  kube-scheduler then preempts nothing for this pod in this cycle and tries again later.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.context import Context
from app.core import pods, quota
from app.core.codec import CodecError
from app.core.decision import pod_context
from app.core.fit import PodContext
from app.core.model import DeviceUse
from app.core.pods import PodError
from app.core.preemption import Holder, NodeCase, choose_victims, node_budget, priority, started
from app.core.vendor import InvalidRequest
from app.k8s import objects
from app.k8s.errors import ApiError
from app.state.snapshot import Snapshot

logger = logging.getLogger(__name__)

Victims = dict[str, tuple[list[str], int]]  # node -> (victim UIDs, PodDisruptionBudget violations)


@dataclass
class PreemptOutcome:
    victims: Victims = field(default_factory=dict)
    error: str = ""
    dropped: dict[str, str] = field(default_factory=dict)  # node -> why it is not a candidate (logs)


def _context(context: Context, pod: Mapping[str, Any], snapshot: Snapshot) -> PodContext | str:
    namespace, uid = pods.namespace(pod), pods.uid(pod)
    used = {namespace: context.usage.quota_used(namespace, exclude_uid=uid)}
    view = quota.build_view({namespace: snapshot.quota_limits.get(namespace, {})}, used)
    try:
        return pod_context(pod, context.settings.vendors, context.settings.policies, view)
    except (PodError, InvalidRequest, CodecError) as exc:
        return f"invalid pod: {exc}"


def _case(context: Context, node: str, snapshot: Snapshot, preemptor: str, chosen: list[str]) -> NodeCase:
    """The node's devices, its reservations and which of them belong to pods bound there (the API's view)."""
    bound = {
        pods.uid(p): p
        for p in objects.pods_on_node(context.kube, node)
        if not pods.is_terminated(p) and pods.uid(p) != preemptor
    }
    fixed: list[Mapping[str, DeviceUse]] = []
    holders: list[Holder] = []
    for uid, entry in context.usage.entries.items():
        if entry.node != node or uid == preemptor:
            continue
        pod = bound.get(uid)
        if pod is None:
            fixed.append(entry.uses)
        else:
            holders.append(Holder(uid, priority(pod), started(pod), entry.uses))
    return NodeCase(snapshot.nodes[node].devices, fixed, holders, frozenset(chosen))


def preempt_pod(context: Context, pod: Mapping[str, Any] | None, candidates: Victims) -> PreemptOutcome:
    if pod is None:
        return PreemptOutcome(error="extender preemption args missing pod")
    snapshot = context.refresh() if context.status().may_decide(context.clock()) else None
    if snapshot is None:
        why = context.status().why_not(context.clock()) or "no node inventory yet"
        return PreemptOutcome(error=f"hami-scheduler: {why}; retry later")
    ctx = _context(context, pod, snapshot)
    if isinstance(ctx, str):
        return PreemptOutcome(error=ctx)
    if not ctx.requests.any:  # no device of ours: kube-scheduler's victims stand as they are
        return PreemptOutcome(victims={n: v for n, v in candidates.items() if v[0]})
    vendors = {v.key: v for v in context.settings.vendors}
    rank, uid, budget = priority(pod), pods.uid(pod), node_budget(len(candidates))
    outcome = PreemptOutcome()
    for node, (chosen, violations) in candidates.items():
        if node not in snapshot.nodes:
            outcome.dropped[node] = "no devices of ours"
            continue
        try:
            case = _case(context, node, snapshot, uid, chosen)
        except ApiError as exc:
            outcome.dropped[node] = f"listing its pods failed: {exc.message}"
            continue
        victims = choose_victims(case, rank, ctx, vendors, max_evaluations=budget)
        if not victims:
            outcome.dropped[node] = "no lower-priority device holders make the pod fit"
            continue
        outcome.victims[node] = (list(victims), violations)
    return outcome
