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
- The FORGET of a filter — nothing fits, or its write failed — removes only the row it may: the pod's
  own row no bind may have acted on, or the assumed row its write was for; no filter ever replaces or
  forgets the row of a pod that is or may be bound (app/filter/rowguard.py, docs/ledger-writers.md).
- The pod is the asker of the held reservations (its UID, `spec.priority`, gang; app/core/podfacts.py):
  the live slots that block it count as usage in the decision and again in the assume's transaction,
  which also consumes its own slots and displaces the holds it leaves no room for
  (docs/held-reservations.md).
- A pod of an adopted scheduler name (app/core/adoption.py) is refused: it is counted, never changed.
- Readiness and what is read of the pod before deciding: app/filter/intake.py.
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
from app.core.codec import encode_pod_single_device
from app.core.decision import (
    ASSIGNED_NODE,
    allocation_annotations,
    failure_events,
    reason_keys,
    stale_annotations,
    success_event,
)
from app.core.fit import PodContext, evaluate_node
from app.core.holds import Asker
from app.core.model import DeviceUse, PodDevices
from app.core.podfacts import PodFacts, facts_of
from app.core.quota import pod_quota_use
from app.core.reservations import vendor_tags
from app.core.usage import allocation_uses, collapse_pod, same_use, sum_uses
from app.core.vendor import core_masks
from app.filter import gang, intake, nodespath, rowguard
from app.filter.outcome import FilterOutcome
from app.filter.write import Write
from app.k8s import objects
from app.k8s.errors import ApiError
from app.k8s.events import NORMAL, WARNING, PodRef
from app.state.fastpath import Choice
from app.state.holdstore import Asking
from app.state.ledger import ASSUMED, CONFIRMED, Entry, Protected, RowState
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


def _entry(
    uid: str, ctx: PodContext, node: str, devices: PodDevices, context: Context, facts: PodFacts
) -> Entry:
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
        priority=facts.priority,
        started=facts.started,
        terminating=facts.terminating,
        gang=facts.gang,
    )


def _quota_view(context: Context, snapshot: Snapshot, namespace: str, uid: str) -> Any:
    used = {namespace: context.usage.quota_used(namespace, exclude_uid=uid)}
    limits = {namespace: snapshot.quota_limits.get(namespace, {})}
    return quota.build_view(limits, used)


def _assume(
    context: Context,
    uid: str,
    ctx: PodContext,
    choice: Choice,
    snapshot: Snapshot,
    verified: RowState | None,
    facts: PodFacts,
    asking: Asking,
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
        return _entry(uid, ctx, node.name, verdict.devices, context, facts)

    namespace = ctx.namespace if limits else None
    entry = context.ledger.assume(uid, node.name, check, namespace, choice.seen, verified, asking)
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


def filter_pod(
    context: Context,
    pod: Mapping[str, Any] | None,
    node_names: list[str] | None,
    nodes: list[dict[str, Any]] | None,
) -> FilterOutcome:
    started = time.perf_counter()
    if pod is None:
        return FilterOutcome(error="extender args missing pod", denial="bad-request")
    probe = intake.probe(context, pod)
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
    not_ready = intake.wait_until_ready(context)
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
    row = context.ledger.row(uid)  # read before the pod: a verified version is never newer than the read
    guard = rowguard.judge(row, context.clock(), context.settings.inflight_ttl)
    if guard.error:
        return FilterOutcome(error=guard.error, denial="may-be-bound")
    # An allocation write of this pod still in flight here (its row `assumed`, its write not held for its
    # gang), or a row that may be bound: /filter reads the pod and writes synchronously (one pod never has
    # two writes in flight, app/filter/write.py; a bound pod is refused, app/filter/rowguard.py).
    pending = row is not None and row.state == ASSUMED and not gang.holds_write(context, uid)
    if context.writer is not None and version and not guard.read and not pending:
        why = pods.refusal(pod, context.settings.scheduler_name)
        if why:
            return FilterOutcome(error=f"hami-scheduler: {why}", denial="refused")
        outcome.phases["prepare"] = mark - started
        reserved = reserve(context, pod, probe, node_names, snapshot, outcome)
        if reserved is None:
            return outcome
        return _defer(context, pod, _ref(pod, probe), reserved, len(node_names), outcome)
    current = intake.read_pod(context, probe, uid)
    if isinstance(current, FilterOutcome):
        return current
    verified = None
    if guard.read and row is not None:
        why = rowguard.after_read(row, current, context.clock(), context.settings.inflight_ttl)
        if why:
            return FilterOutcome(error=why, denial="may-be-bound")
        verified = row
    probe = intake.probe(context, current)
    if isinstance(probe, FilterOutcome):
        return probe
    outcome.phases["pod_lookup"] = time.perf_counter() - mark
    outcome.phases["prepare"] = mark - started
    return _place(context, current, probe, node_names, snapshot, outcome, verified)


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
    verified: RowState | None,
) -> FilterOutcome:
    reserved = reserve(context, pod, probe, candidates, snapshot, outcome, verified)
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
    verified: RowState | None = None,
) -> Reserved | None:
    """Decide (the fast path: `decide`'s answer without evaluating every node) and assume the winner.

    None when the pod was not placed; `outcome` then says why (FailedNodes or an Error). The pod's own
    previous row is replaced, or forgotten when nothing fits, only if no bind may have acted on it or it
    is still the version `verified` (read before the pod, which showed it unbound: app/filter/rowguard.py);
    otherwise the answer is an Error and the row stays.
    """
    vendors = context.settings.vendors
    ref = _ref(pod, probe)
    uid = ref.uid
    facts = facts_of(pod)  # kept on the row (app/core/podfacts.py)
    asker = Asker(
        uid, facts.priority, facts.gang
    )  # the holds that block it count (docs/held-reservations.md)
    for _attempt in range(MAX_ATTEMPTS):
        mark = time.perf_counter()
        ctx = dataclasses.replace(probe, quota=_quota_view(context, snapshot, probe.namespace, uid))
        now = context.clock()
        choice = context.fastpath.choose(ctx, candidates, snapshot, context.usage, vendors, uid, asker, now)
        outcome.phases["fit"] = outcome.phases.get("fit", 0.0) + time.perf_counter() - mark
        winner = choice.winner
        if winner is None:
            if uid:  # a re-filtered pod releases its old reservation, never one that may be bound
                context.ledger.forget_unbound(uid, verified)
            _record_failure(context, ref, choice.failed, len(candidates))
            outcome.failed = choice.failed
            outcome.denial = _denial(choice.failed)
            return None
        mark = time.perf_counter()
        try:
            asking = Asking(asker, now, choice.holds, f"{ref.namespace}/{ref.name}", choice.no_holds)
            assumed = _assume(context, uid, ctx, choice, snapshot, verified, facts, asking)
        except Protected as exc:  # a bind marked or bound the row since it was read
            outcome.error, outcome.denial = f"hami-scheduler: {exc}; retry later", "may-be-bound"
            return None
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
        context.ledger.resolve_write(uid, reserved.allocation, written=False)  # only the row it assumed
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
