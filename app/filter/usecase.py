"""The Filter use case: decide -> assume -> patch the pod -> answer one node (reference §4.1); where the
caller is authenticated kube-scheduler: decide -> assume -> answer, the patch following off the serial path
(app/filter/write.py, HAMI_FILTER_WRITE).

The decision is the worker's fast path (`app.state.fastpath`), which answers exactly what the reference
`decide` answers without evaluating every node (milliseconds instead of a second at 5,000 nodes); the Nodes
path (§4.9, a handful of nodes with zero usage) uses `decide` itself.

Invariants owned here:
- ASSUME is the only way capacity is handed out: the chosen node is re-checked against every committed
  reservation inside the ledger's write transaction; when another worker took the capacity meanwhile we
  decide again on fresher usage (bounded), so two pods never get the same capacity (ARCHITECTURE.md #1).
- Every assume is followed by CONFIRM (the pod's annotations were written) or FORGET (anything failed after
  the assume), so no reservation outlives a failed filter (#2); with the deferred write the writer records
  either on the row it wrote for, and /bind waits for it (app/filter/write.py).
- A pod of an adopted scheduler name (app/core/adoption.py) is refused: it is counted, never changed.
- A replica that is not the leader, or not synced, never decides: it answers a retryable Error at once
  (a follower) or after a bounded wait (a leader still syncing) — HAMi blocks until kube-scheduler's
  timeout (quirk #14).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.context import Context
from app.core import adoption, pods, quota
from app.core.codec import CodecError, encode_pod_single_device
from app.core.decision import (
    ASSIGNED_NODE,
    allocation_annotations,
    failure_events,
    pod_context,
    reason_keys,
    stale_annotations,
    success_event,
)
from app.core.fit import PodContext, evaluate_node
from app.core.model import DeviceUse, PodDevices
from app.core.pods import PodError
from app.core.quota import pod_quota_use
from app.core.reservations import vendor_tags
from app.core.usage import allocation_uses, collapse_pod, same_use, sum_uses
from app.core.vendor import InvalidRequest, core_masks
from app.filter import gang, nodespath
from app.filter.outcome import FilterOutcome
from app.filter.write import Write
from app.k8s import objects
from app.k8s.errors import ApiError
from app.k8s.events import NORMAL, WARNING, PodRef
from app.state.fastpath import Choice
from app.state.ledger import ASSUMED, CONFIRMED, Entry
from app.state.snapshot import Snapshot

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 8
FILTERING_SUCCEED, FILTERING_FAILED = "FilteringSucceed", "FilteringFailed"


@dataclass(frozen=True, slots=True)
class Reserved:
    """An assumed reservation: the pod's devices on `node`, the decision that chose it, and the ledger row's
    allocation text (what a deferred write's outcome is recorded against)."""

    node: str
    devices: PodDevices
    choice: Choice
    allocation: str = ""


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


def _entry(uid: str, ctx: PodContext, node: str, devices: PodDevices, context: Context) -> Entry:
    collapsed = collapse_pod(devices, ctx.requests.init_count)
    return Entry(
        uid=uid,
        namespace=ctx.namespace,
        name=ctx.name,
        node=node,
        state=ASSUMED,
        uses=allocation_uses(
            devices,
            ctx.requests.init_count,
            vendor_tags(ctx.annotations, context.settings.vendors),
            core_masks(context.settings.vendors),
        ),
        quota=pod_quota_use(collapsed, context.settings.vendors),
        allocation=";".join(f"{key}={encode_pod_single_device(c)}" for key, c in sorted(devices.items())),
        updated_at=context.clock(),
    )


def _quota_view(context: Context, snapshot: Snapshot, namespace: str, uid: str) -> Any:
    used = {namespace: context.usage.quota_used(namespace, exclude_uid=uid)}
    limits = {namespace: snapshot.quota_limits.get(namespace, {})}
    return quota.build_view(limits, used)


def _assume(
    context: Context, uid: str, ctx: PodContext, choice: Choice, snapshot: Snapshot
) -> tuple[Entry, PodDevices] | None:
    """Re-check the chosen node against committed reservations and reserve, atomically.

    Only the chosen node is evaluated again, and not even that when the committed usage is exactly the
    usage the decision saw and the namespace has no quota limits or its committed quota usage is the one
    the decision saw (the same `evaluate_node` inputs): the verdict would be the same. The namespace's quota
    usage is summed only when the namespace has limits, and the node's rows are read and summed only when
    they are not the very rows the decision summed (`Ledger.assume`'s `seen`: same count, none newer).
    """
    winner = choice.winner
    assert winner is not None and winner.devices is not None
    node = snapshot.nodes[winner.node].devices
    placed: list[PodDevices] = []
    limits = snapshot.quota_limits.get(ctx.namespace, {})

    def check(node_uses: list[Mapping[str, DeviceUse]] | None, quota_used: dict[str, int]) -> Entry | None:
        use = choice.use if node_uses is None else sum_uses(node_uses)  # None: the rows the decision saw
        verdict = winner
        view = quota.build_view({ctx.namespace: limits}, {ctx.namespace: quota_used})
        if (limits and view != ctx.quota) or (node_uses is not None and not same_use(use, choice.use)):
            fresh = dataclasses.replace(ctx, quota=view)
            verdict = evaluate_node(node, use, fresh, {v.key: v for v in context.settings.vendors})
        if not verdict.fits or verdict.devices is None:
            return None
        placed.append(verdict.devices)
        return _entry(uid, ctx, node.name, verdict.devices, context)

    entry = context.ledger.assume(uid, node.name, check, ctx.namespace if limits else None, choice.seen)
    return (entry, placed[-1]) if entry is not None else None


def _record_failure(context: Context, ref: PodRef, failed: Mapping[str, str], candidates: int) -> None:
    if context.settings.events_enabled:
        for message in failure_events(failed, candidates):
            context.events.record(ref, WARNING, FILTERING_FAILED, message)


def _denial(failed: Mapping[str, str]) -> str:
    """The most common reason key among the failed nodes: the label of the denials metric."""
    counts: Counter[str] = Counter()
    for reason, nodes in Counter(failed.values()).items():
        for key in reason_keys(reason) or [reason.split(":")[0]]:
            counts[key] += nodes
    return counts.most_common(1)[0][0] if counts else "no-candidates"


def _probe(context: Context, pod: Mapping[str, Any]) -> PodContext | FilterOutcome:
    """The pod's requests and hints, or the Error answer for a pod that does not decode."""
    try:
        return pod_context(pod, context.settings.vendors, context.settings.policies, {})
    except PodError as exc:
        return FilterOutcome(error=f"invalid pod: {exc}", denial="bad-request")
    except InvalidRequest as exc:
        return FilterOutcome(error=str(exc), denial="invalid-request")
    except CodecError as exc:
        return FilterOutcome(
            error=f"calcScore failed {exc} for pod {pods.name(pod)}", denial="invalid-request"
        )


def _current(context: Context, probe: PodContext, uid: str) -> dict[str, Any] | FilterOutcome:
    """The pod as the API has it now, or the Error answer: the decision and the annotations it writes are
    for that pod, never for the request body, which anyone reaching /filter could have forged (issue 11)."""
    try:
        current = objects.get_pod(context.kube, probe.namespace, probe.name)
    except ApiError as exc:
        return FilterOutcome(error=exc.message, denial="pod-lookup")
    if pods.uid(current) != uid:
        who = f"pod {probe.namespace}/{probe.name}"
        return FilterOutcome(error=f"{who} has UID {pods.uid(current)}, not {uid}", denial="refused")
    refused = adoption.refusal(context.settings.counted, current)
    if refused:
        return FilterOutcome(error=refused, denial="adopted")
    why = pods.refusal(current, context.settings.scheduler_name)
    return FilterOutcome(error=f"hami-scheduler: {why}", denial="refused") if why else current


def filter_pod(
    context: Context,
    pod: Mapping[str, Any] | None,
    node_names: list[str] | None,
    nodes: list[dict[str, Any]] | None,
) -> FilterOutcome:
    started = time.perf_counter()
    if pod is None:
        return FilterOutcome(error="extender args missing pod", denial="bad-request")
    probe = _probe(context, pod)
    if isinstance(probe, FilterOutcome):
        return probe
    disabled = pods.disabled_request(pod, context.settings.disabled_resources)
    if disabled is not None:
        return FilterOutcome(error=disabled, denial="disabled-vendor")
    if not probe.requests.any:
        return FilterOutcome(node_names=node_names, nodes=nodes, passthrough=True)  # §4.1 step 1
    if nodes is not None:  # decides on the given nodes alone and writes nothing
        return nodespath.simulate(context, pod, nodes)
    refused = adoption.refusal(context.settings.counted, pod)
    if refused:
        return FilterOutcome(error=refused, denial="adopted")
    uid = pods.uid(pod)
    if not uid:
        return FilterOutcome(
            error=f"hami-scheduler: pod {probe.namespace}/{probe.name} in the extender args carries no UID",
            denial="bad-request",
        )
    if node_names is None:
        return FilterOutcome(error="extender args have neither Nodes nor NodeNames", denial="bad-request")
    not_ready = _wait_until_ready(context)
    if not_ready:
        return FilterOutcome(error=not_ready, denial="not-leader")
    snapshot = context.refresh()
    if snapshot is None:
        return FilterOutcome(error="hami-scheduler: no node inventory yet; retry later", denial="not-ready")
    mark = time.perf_counter()
    outcome = FilterOutcome()
    answered = gang.gate(context, pod, probe, node_names, snapshot, outcome)  # a member decides for its gang
    if answered is not None:
        return answered
    version = objects.resource_version(pod)
    if context.writer is not None and version and not _write_pending(context, uid):
        why = pods.refusal(pod, context.settings.scheduler_name)
        if why:
            return FilterOutcome(error=f"hami-scheduler: {why}", denial="refused")
        outcome.phases["prepare"] = mark - started
        reserved = reserve(context, pod, probe, node_names, snapshot, outcome)
        if reserved is None:
            return outcome
        return _defer(context, pod, _ref(pod, probe), reserved, len(node_names), outcome)
    current = _current(context, probe, uid)
    if isinstance(current, FilterOutcome):
        return current
    probe = _probe(context, current)
    if isinstance(probe, FilterOutcome):
        return probe
    outcome.phases["pod_lookup"] = time.perf_counter() - mark
    outcome.phases["prepare"] = mark - started
    return _place(context, current, probe, node_names, snapshot, outcome)


def _write_pending(context: Context, uid: str) -> bool:
    """Is an allocation write of this pod still in flight here (its row `assumed`, its write not held for its
    gang)? Then /filter reads the pod and writes synchronously: one pod never has two writes in flight
    (app/filter/write.py)."""
    entry = context.ledger.get(uid)
    return entry is not None and entry.state == ASSUMED and not gang.holds_write(context, uid)


def _defer(
    context: Context,
    pod: Mapping[str, Any],
    ref: PodRef,
    reserved: Reserved,
    candidates: int,
    outcome: FilterOutcome,
) -> FilterOutcome:
    """Answer with the assumed node and hand the allocation PATCH to the writer (app/filter/write.py): the
    pod is kube-scheduler's own copy (the caller is authenticated), and the write is conditional on its UID.
    Every vendor key the decision does not write is deleted: the copy may not show an earlier decision's."""
    assert context.writer is not None
    node, vendors, now = reserved.node, context.settings.vendors, context.clock()
    written = allocation_annotations(node, reserved.devices, vendors, int(now), pod, int(now * 1e9))
    annotations: dict[str, str | None] = dict.fromkeys(k.name for v in vendors for k in v.pod_keys)
    annotations.update(written)
    choice = reserved.choice
    assert choice.winner is not None
    event = success_event(choice.winner, candidates, choice.ranked_ahead)
    version = objects.resource_version(pod)
    write = Write(ref, node, annotations, reserved.allocation, event, version)
    if outcome.quorum is not None:
        gang.hold(context, outcome.quorum, write)  # sent once the quorum is reserved
    else:
        context.writer.submit(write)
    outcome.node_names = [node]
    outcome.devices = reserved.devices
    outcome.score = choice.winner.score
    return outcome


def _place(
    context: Context,
    pod: Mapping[str, Any],
    probe: PodContext,
    candidates: list[str],
    snapshot: Snapshot,
    outcome: FilterOutcome,
) -> FilterOutcome:
    reserved = reserve(context, pod, probe, candidates, snapshot, outcome)
    if reserved is None:
        return outcome
    version = objects.resource_version(pod)
    return _commit(context, pod, _ref(pod, probe), reserved, len(candidates), outcome, version)


def reserve(
    context: Context,
    pod: Mapping[str, Any],
    probe: PodContext,
    candidates: list[str],
    snapshot: Snapshot,
    outcome: FilterOutcome,
) -> Reserved | None:
    """Decide (the fast path: `decide`'s answer without evaluating every node) and assume the winner.

    None when the pod was not placed; `outcome` then says why (FailedNodes or an Error).
    """
    vendors = context.settings.vendors
    ref = _ref(pod, probe)
    uid = ref.uid
    for _attempt in range(MAX_ATTEMPTS):
        mark = time.perf_counter()
        ctx = dataclasses.replace(probe, quota=_quota_view(context, snapshot, probe.namespace, uid))
        choice = context.fastpath.choose(ctx, candidates, snapshot, context.usage, vendors, uid)
        outcome.phases["fit"] = outcome.phases.get("fit", 0.0) + time.perf_counter() - mark
        winner = choice.winner
        if winner is None:
            if uid:
                context.ledger.forget(uid)  # a re-filtered pod first releases its old reservation
            _record_failure(context, ref, choice.failed, len(candidates))
            outcome.failed = choice.failed
            outcome.denial = _denial(choice.failed)
            return None
        mark = time.perf_counter()
        assumed = _assume(context, uid, ctx, choice, snapshot)
        outcome.phases["assume"] = outcome.phases.get("assume", 0.0) + time.perf_counter() - mark
        if assumed is not None:
            return Reserved(winner.node, assumed[1], choice, assumed[0].allocation)
        snapshot = context.refresh() or snapshot
    outcome.error = f"hami-scheduler: capacity changed concurrently {MAX_ATTEMPTS} times; retry later"
    outcome.denial = "conflict"
    return None


def _commit(
    context: Context,
    pod: Mapping[str, Any],
    ref: PodRef,
    reserved: Reserved,
    candidates: int,
    outcome: FilterOutcome,
    version: str,
) -> FilterOutcome:
    """Write the decision onto the pod, deleting vendor annotations of an earlier decision it does not
    replace (a re-filtered pod's MIG allocations, say); FORGET the reservation if that fails. The patch is
    conditional on the pod's UID and on `version`, the resourceVersion the refusal checks saw: a pod
    bound, deleted or changed since gets nothing written."""
    mark = time.perf_counter()
    node, uid = reserved.node, ref.uid
    vendors, now = context.settings.vendors, context.clock()
    written = allocation_annotations(node, reserved.devices, vendors, int(now), pod, int(now * 1e9))
    annotations: dict[str, str | None] = dict.fromkeys(
        stale_annotations(pods.annotations_of(pod), written, vendors)
    )
    annotations.update(written)
    try:
        objects.patch_pod_metadata(
            context.kube,
            ref.namespace,
            ref.name,
            annotations,
            {ASSIGNED_NODE: node},
            uid=uid,
            resource_version=version or None,
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
        choice = reserved.choice
        assert choice.winner is not None
        message = success_event(choice.winner, candidates, choice.ranked_ahead)
        context.events.record(ref, NORMAL, FILTERING_SUCCEED, message)
    outcome.node_names = [node]
    outcome.devices = reserved.devices
    outcome.score = reserved.choice.winner.score if reserved.choice.winner else None
    return outcome
