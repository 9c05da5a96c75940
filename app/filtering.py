"""The Filter use case: decide -> assume -> patch the pod -> answer one node (reference §4.1).

Invariants owned here:
- ASSUME is the only way capacity is handed out: the chosen node is re-checked against every committed
  reservation inside the ledger's write transaction; when another worker took the capacity meanwhile we
  decide again on fresher usage (bounded), so two pods never get the same capacity (ARCHITECTURE.md #1).
- Every assume is followed by CONFIRM (the pod's annotations were written) or FORGET (anything failed after
  the assume), so no reservation outlives a failed filter (#2).
- A replica that is not the leader, or not synced, never decides: it answers a retryable Error at once
  (a follower) or after a bounded wait (a leader still syncing) — HAMi blocks until kube-scheduler's
  timeout (quirk #14).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.context import Context
from app.core import pods, quota
from app.core.codec import CodecError, encode_pod_single_device
from app.core.decision import (
    ASSIGNED_NODE,
    Decision,
    allocation_annotations,
    decide,
    failure_events,
    pod_context,
    reason_keys,
    success_event,
)
from app.core.fit import PodContext, evaluate_node
from app.core.inventory import NodeUnregistered, decode_node, node_name
from app.core.model import NodeDevices, PodDevices
from app.core.pods import PodError
from app.core.quota import pod_quota_use
from app.core.usage import collapse_pod, device_uses, sum_uses
from app.core.vendor import InvalidRequest
from app.k8s import objects
from app.k8s.errors import ApiError
from app.k8s.events import NORMAL, WARNING, PodRef
from app.state.ledger import ASSUMED, CONFIRMED, Entry
from app.state.snapshot import Snapshot

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 8
SUCCESS_EVENT_NODES = 20  # the success event lists this many best nodes (HAMi lists all of them)
FILTERING_SUCCEED, FILTERING_FAILED = "FilteringSucceed", "FilteringFailed"


@dataclass
class FilterOutcome:
    node_names: list[str] | None = None
    nodes: list[dict[str, Any]] | None = None
    failed: Mapping[str, str] | None = None
    error: str = ""
    denial: str = ""  # a short reason label for metrics when the pod was not placed
    phases: dict[str, float] = field(default_factory=dict)


class _Devices(Mapping[str, NodeDevices]):
    """The snapshot's node records seen as name -> NodeDevices, without copying 5,000 entries per call."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._nodes = snapshot.nodes

    def __getitem__(self, name: str) -> NodeDevices:
        return self._nodes[name].devices

    def __iter__(self) -> Iterator[str]:
        return iter(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)


def _ref(pod: Mapping[str, Any], ctx: PodContext) -> PodRef:
    return PodRef(ctx.namespace, ctx.name, pods.uid(pod))


def _wait_until_ready(context: Context) -> str:
    """Empty when this replica may decide; else the Error text. Followers fail fast, a syncing leader
    waits up to HAMI_FILTER_SYNC_WAIT."""
    deadline = time.monotonic() + context.settings.http.sync_wait_seconds
    while True:
        status = context.status()
        now = context.clock()
        if status.may_decide(now):
            return ""
        leader_syncing = status.is_leader(now) and status.heartbeat_fresh(now) and not status.synced
        if not leader_syncing or time.monotonic() >= deadline:
            return f"hami-scheduler: {status.why_not(now)}; retry later"
        time.sleep(0.1)


def simulate(context: Context, pod: Mapping[str, Any], nodes: list[dict[str, Any]]) -> FilterOutcome:
    """The Nodes path (§4.9): devices decoded from the given nodes, zero usage, nothing recorded."""
    vendors = context.settings.vendors
    registered: dict[str, NodeDevices] = {}
    broken: dict[str, str] = {}
    for node in nodes:
        try:
            registered[node_name(node)] = decode_node(node, vendors)
        except NodeUnregistered as exc:
            if str(exc) != "no device registration":
                broken[node_name(node)] = str(exc)
    ctx = pod_context(pod, vendors, context.settings.policies, {})
    decision = decide(ctx, [node_name(n) for n in nodes], registered, {}, vendors, broken)
    winner = decision.winner
    if winner is None:
        return FilterOutcome(failed=decision.failed, denial="no-fit")
    chosen = [n for n in nodes if node_name(n) == winner.node][:1]
    return FilterOutcome(nodes=chosen, failed=decision.failed or None)


def _entry(uid: str, ctx: PodContext, node: str, devices: PodDevices, context: Context) -> Entry:
    collapsed = collapse_pod(devices, ctx.requests.init_count)
    return Entry(
        uid=uid,
        namespace=ctx.namespace,
        name=ctx.name,
        node=node,
        state=ASSUMED,
        uses=device_uses(collapsed),
        quota=pod_quota_use(collapsed, context.settings.vendors),
        allocation=";".join(f"{key}={encode_pod_single_device(c)}" for key, c in sorted(devices.items())),
        updated_at=context.clock(),
    )


def _quota_view(context: Context, snapshot: Snapshot, namespace: str, uid: str) -> Any:
    used = {namespace: context.usage.quota_used(namespace, exclude_uid=uid)}
    limits = {namespace: snapshot.quota_limits.get(namespace, {})}
    return quota.build_view(limits, used)


def _usage_without(context: Context, uid: str) -> Mapping[str, Any]:
    """Usage per node as the view has it, minus this pod's own previous reservation (HAMi drops it first)."""
    nodes = context.usage.nodes
    own = context.usage.entries.get(uid)
    if own is None:
        return nodes
    node_use = dict(nodes.get(own.node, {}))
    for device, use in own.uses.items():
        current = node_use.get(device)
        if current is not None:
            node_use[device] = type(use)(
                current.slots - use.slots, current.mem - use.mem, current.cores - use.cores
            )
    return {**nodes, own.node: node_use}


def _assume(
    context: Context, uid: str, ctx: PodContext, node: NodeDevices, snapshot: Snapshot
) -> tuple[Entry, PodDevices] | None:
    """Re-check `node` against committed reservations and reserve, atomically."""
    placed: list[PodDevices] = []

    def check(node_entries: list[Entry], namespace_entries: list[Entry]) -> Entry | None:
        use = sum_uses(e.uses for e in node_entries)
        used: dict[str, int] = {}
        for e in namespace_entries:
            for name, amount in e.quota.items():
                used[name] = used.get(name, 0) + amount
        limits = {ctx.namespace: snapshot.quota_limits.get(ctx.namespace, {})}
        fresh = dataclasses.replace(ctx, quota=quota.build_view(limits, {ctx.namespace: used}))
        verdict = evaluate_node(node, use, fresh, {v.key: v for v in context.settings.vendors})
        if not verdict.fits or verdict.devices is None:
            return None
        placed.append(verdict.devices)
        return _entry(uid, ctx, node.name, verdict.devices, context)

    entry = context.ledger.assume(uid, node.name, ctx.namespace, check)
    return (entry, placed[-1]) if entry is not None else None


def _record_failure(context: Context, ref: PodRef, decision: Decision, candidates: int) -> None:
    if context.settings.events_enabled:
        for message in failure_events(decision.failed, candidates):
            context.events.record(ref, WARNING, FILTERING_FAILED, message)


def _denial(decision: Decision) -> str:
    """The most common reason key among the failed nodes: the label of the denials metric."""
    counts: Counter[str] = Counter()
    for reason in decision.failed.values():
        keys = reason_keys(reason)
        counts.update(keys or [reason.split(":")[0]])
    return counts.most_common(1)[0][0] if counts else "no-candidates"


def filter_pod(
    context: Context,
    pod: Mapping[str, Any] | None,
    node_names: list[str] | None,
    nodes: list[dict[str, Any]] | None,
) -> FilterOutcome:
    started = time.perf_counter()
    if pod is None:
        return FilterOutcome(error="extender args missing pod", denial="bad-request")
    vendors = context.settings.vendors
    try:
        probe = pod_context(pod, vendors, context.settings.policies, {})
    except PodError as exc:
        return FilterOutcome(error=f"invalid pod: {exc}", denial="bad-request")
    except InvalidRequest as exc:
        return FilterOutcome(error=str(exc), denial="invalid-request")
    except CodecError as exc:
        return FilterOutcome(
            error=f"calcScore failed {exc} for pod {pods.name(pod)}", denial="invalid-request"
        )
    if not probe.requests.any:
        return FilterOutcome(node_names=node_names, nodes=nodes)  # not ours to decide (§4.1 step 1)
    if nodes is not None:
        return simulate(context, pod, nodes)
    if node_names is None:
        return FilterOutcome(error="extender args have neither Nodes nor NodeNames", denial="bad-request")
    not_ready = _wait_until_ready(context)
    if not_ready:
        return FilterOutcome(error=not_ready, denial="not-leader")
    snapshot = context.refresh()
    if snapshot is None:
        return FilterOutcome(error="hami-scheduler: no node inventory yet; retry later", denial="not-ready")
    outcome = FilterOutcome()
    outcome.phases["prepare"] = time.perf_counter() - started
    return _place(context, pod, probe, node_names, snapshot, outcome)


def _place(
    context: Context,
    pod: Mapping[str, Any],
    probe: PodContext,
    candidates: list[str],
    snapshot: Snapshot,
    outcome: FilterOutcome,
) -> FilterOutcome:
    vendors = context.settings.vendors
    ref = _ref(pod, probe)
    uid = ref.uid
    devices = _Devices(snapshot)
    for _attempt in range(MAX_ATTEMPTS):
        mark = time.perf_counter()
        ctx = dataclasses.replace(probe, quota=_quota_view(context, snapshot, probe.namespace, uid))
        decision = decide(ctx, candidates, devices, _usage_without(context, uid), vendors, snapshot.broken)
        outcome.phases["fit"] = outcome.phases.get("fit", 0.0) + time.perf_counter() - mark
        winner = decision.winner
        if winner is None:
            if uid:
                context.ledger.forget(uid)  # a re-filtered pod first releases its old reservation
            _record_failure(context, ref, decision, len(candidates))
            outcome.failed = decision.failed
            outcome.denial = _denial(decision)
            return outcome
        mark = time.perf_counter()
        assumed = _assume(context, uid, ctx, devices[winner.node], snapshot)
        outcome.phases["assume"] = outcome.phases.get("assume", 0.0) + time.perf_counter() - mark
        if assumed is not None:
            return _commit(context, ref, uid, winner.node, assumed[1], decision, len(candidates), outcome)
        context.refresh()
    outcome.error = f"hami-scheduler: capacity changed concurrently {MAX_ATTEMPTS} times; retry later"
    outcome.denial = "conflict"
    return outcome


def _commit(
    context: Context,
    ref: PodRef,
    uid: str,
    node: str,
    devices: PodDevices,
    decision: Decision,
    candidates: int,
    outcome: FilterOutcome,
) -> FilterOutcome:
    """Write the decision onto the pod; FORGET the reservation if that fails."""
    mark = time.perf_counter()
    annotations = allocation_annotations(node, devices, context.settings.vendors, int(context.clock()))
    try:
        objects.patch_pod_metadata(
            context.kube, ref.namespace, ref.name, annotations, {ASSIGNED_NODE: node}, uid=uid or None
        )
    except ApiError as exc:
        context.ledger.forget(uid)
        if context.settings.events_enabled:
            context.events.record(ref, WARNING, FILTERING_FAILED, exc.message)
        outcome.error = exc.message
        outcome.denial = "patch-failed"
        return outcome
    finally:
        outcome.phases["patch"] = time.perf_counter() - mark
    context.ledger.set_state(uid, CONFIRMED, only_from=(ASSUMED,))
    if context.settings.events_enabled:
        message = success_event(decision, candidates, SUCCESS_EVENT_NODES)
        context.events.record(ref, NORMAL, FILTERING_SUCCEED, message)
    outcome.node_names = [node]
    return outcome
