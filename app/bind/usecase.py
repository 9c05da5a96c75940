"""The Bind use case: node lock -> re-check -> bind-phase `allocating` -> pods/binding (reference §5.1).

Invariants owned here:
- A bind never overtakes the filter's allocation write: while this replica's write of the pod is pending
  (the deferred write, app/filter/write.py) it waits, bounded by HAMI_BIND_WRITE_WAIT, and a write still
  pending then fails the bind and forgets the reservation.
- Only our own pods, as the API shows them, and only pods this bind may still land (issue 11): the request
  must carry the pod's UID (kube-scheduler always sends it; HAMi never checks it) and the pod must have
  that UID, name our scheduler, and be neither terminating nor bound. A pod already bound to the requested
  node is answered as bound without writing anything — no lock re-taken, no bind-phase reset (a re-bind
  used to re-lock the node and block every other bind on it); bound elsewhere is an Error. Non-GPU pods
  are bound only under the same conditions (any pending pod of any scheduler could be bound anywhere).
  "As the API shows them" is a GET of the pod, except for the first bind after this replica's own
  deferred write of it was confirmed: the write's answer, kept by the ledger, is that GET as of the write,
  and every change since is caught by the bind-phase stamp's resourceVersion and UID preconditions before
  the Binding (`_written`, `_stamp`): a pod recreated under the name, deleted or bound meanwhile is never
  bound with this allocation. Another bind of the pod that finds it bound to the node answers success and
  undoes nothing but a lock value it wrote itself (a free lock taken from the stale copy); a lock it
  re-entered stays (the device plugin may be serving the pod through it).
- Every failure after the lock is taken — or may have been taken: a lock patch whose answer was lost —
  releases OUR lock (never another pod's) and forgets the reservation of the pod being bound, and only
  that: only while it is in flight (`assumed`/`confirmed`), only under the pod's own UID and name; a
  refused request (not our pod, bound, terminating, another UID, another node than filtered) forgets
  nothing. A failed bind never leaves a node locked by us (HAMi #2214, #2305). This holds for exceptions of
  any type, not only the expected ones (issue 19): an unexpected one (SQLite's `database is locked` past
  its busy timeout, a malformed answer, a bug) is undone the same way and answered as an `Error` naming
  it — unless the binding call was already made, when, as for a lost binding answer whose outcome no
  re-read could tell, the lock and the reservation are kept.
- The node in the bind request must be the node Filter chose (HAMi never checks, quirk #17).
- A pod of an adopted scheduler name (app/core/adoption.py) is refused before anything is written, and
  its counted reservation is kept: such pods are counted, never changed.
- The re-check runs once the node lock is ours, against the node's pods as the API shows them at that
  moment (a LIST of spec.nodeName) merged with this replica's ledger, and records the pod's row in the
  same ledger transaction (app.core.recheck): leader election is no fence, and the lock serialises HAMi
  binds on a node, so two leaders' overlapping decisions cannot both be bound. Before the lock, a deposed
  leader's in-flight bind and the new leader's could both pass. A pod of vendors that take no node lock (AWS
  Neuron, Moore Threads, Kunlunxin XPU, Enflame DRS: HAMi binds them without one) takes our own
  `hami.io/bind.lock` for them (app.core.vendor.BIND_LOCK), held until the kubelet admitted the pod: the lock
  is what makes the re-check and the binding one step, for every vendor.
- The bind-phase stamp carries the pod's UID and resourceVersion as preconditions; when the pod changed
  meanwhile it is re-read and stamped only if its allocation is still the one re-checked.
- The locks are taken whenever any container — init containers included — asks for devices (HAMi skips
  init-only pods, quirk #28 / #2640), because the device plugin identifies the pod through the lock: every
  distinct lock of the pod's vendors (`app.core.vendor.locks_for`: HAMi's shared `hami.io/mutex.lock`,
  Cambricon's `cambricon.com/dsmlu.lock`; none for vendors without one), all or none — a failure releases
  every one we took together (HAMi leaks the ones taken before a failing vendor, #2626).
- A binding whose answer was lost but which happened (the pod is bound to our node) counts as a success,
  so we never release the lock of a pod the device plugin is about to serve. When the re-reads that would
  tell fail too, the bind answers an Error but keeps the lock and the reservation: if the pod is bound,
  the device plugin needs the one and the capacity the other; if not, the lock is taken over once the
  attempt is stale, and the reservation, marked `unknown`, is replaced by the next filter only once a read
  of the pod shows it unbound (app/filter/rowguard.py), or swept after HAMI_INFLIGHT_TTL.
- The lock value names the pod by namespace/name only, so a pod recreated under the same name re-enters
  it; the old incarnation's failure path never releases a lock once the name belongs to another UID.
"""

from __future__ import annotations

import logging
import random
import secrets
import time
from collections.abc import Mapping
from typing import Any

from app.bind import undo
from app.bind.outcome import (
    BINDING_FAILED_REASON,
    BINDING_UNKNOWN,
    INTERNAL,
    INVALID_REQUEST,
    LOCK_CONTENDED,
    LOCK_ERROR,
    NO_UID,
    NODE_LOOKUP,
    NOT_FILTERED,
    NOT_LEADER,
    NOT_OURS,
    NOT_SCHEDULABLE,
    PATCH_FAILED,
    POD_LOOKUP,
    POD_RECREATED,
    RECHECK,
    AlreadyBound,
    BindOutcome,
    Failed,
)
from app.bind.wait import await_write, give_back_written, take_locks
from app.context import Context
from app.core import adoption, podkeys, pods
from app.core.codec import CodecError
from app.core.decision import ASSIGNED_NODE, binding_success_event
from app.core.model import DeviceUse
from app.core.nodelock import BIND_PHASE, BIND_TIME, PHASE_ALLOCATING
from app.core.recheck import misfit
from app.core.usage import sum_uses
from app.core.vendor import InvalidRequest, locks_for
from app.k8s import objects
from app.k8s.errors import ApiError
from app.k8s.events import NORMAL, WARNING, PodRef
from app.k8s.nodelock import Held, LockContention
from app.state.ledger import BOUND, CONFIRMED, Entry
from app.state.podentry import entry_for
from app.state.rows import BIND_RUNNING

logger = logging.getLogger(__name__)

BINDING_SUCCEED, BINDING_FAILED = "BindingSucceed", "BindingFailed"


def _neighbours(context: Context, ref: PodRef, node: str) -> dict[str, dict[str, DeviceUse]]:
    """The device uses of the other pods bound to `node`, as the API shows them now (by UID), with the
    ledger's rules: terminal pods, other schedulers' pods and corrupt allocations hold nothing."""
    try:
        found = objects.pods_on_node(context.kube, node)
    except ApiError as exc:
        raise Failed(f"could not list the pods on node {node}: {exc.message}", RECHECK) from None
    now = context.clock()
    uses: dict[str, dict[str, DeviceUse]] = {}
    for other in found:
        try:
            if pods.uid(other) == ref.uid or pods.is_terminated(other):
                continue
            held = context.pod_uses.of(other, now)  # entry_for's uses, kept per pod version
        except ValueError:  # CodecError, PodError: a corrupt allocation holds nothing (ledger rule)
            continue
        if held is not None:
            uses[pods.uid(other)] = held
    return uses


def _recheck(context: Context, pod: Mapping[str, Any], ref: PodRef, node: str, token: str) -> None:
    """With the node lock held: re-check the pod's allocation against the other pods on `node` — as the API
    shows them now, and as this replica's ledger holds them — and record it (`confirmed`, a pod another
    replica filtered adopted so; a `bound` row stays bound), marked with this bind's `token`: from here on
    the binding may be sent, and no filter replaces the row (docs/ledger-writers.md). The row is dated
    now: the bind restarts the in-flight TTL, as its `hami.io/bind-time` does for a rebuild
    (workers/reconcile.py rule 1), so the leader's sweep never judges the row it just re-checked stale and
    unchanged (issue 19)."""
    who = f"pod {ref.namespace}/{ref.name}"
    settings = context.settings
    try:
        ours = frozenset({settings.scheduler_name})  # never a pod of an adopted name: those are not written
        adopted = entry_for(pod, settings.vendors, ours, CONFIRMED, context.clock())
    except (CodecError, pods.PodError) as exc:
        raise Failed(f"{who} carries a corrupt device allocation: {exc}", RECHECK) from None
    if adopted is None:
        message = f"{who} carries no device allocation for node {node}; it will be filtered again"
        raise Failed(message, RECHECK)
    snapshot = context.inventory.current()  # the ledger itself is read in the check below
    record = snapshot.nodes.get(node) if snapshot is not None else None
    if record is None:
        raise Failed(f"node {node} is not in the GPU inventory; {who} will be filtered again", RECHECK)
    on_api = _neighbours(context, ref, node)
    why = ""

    def check(in_ledger: dict[str, dict[str, DeviceUse]]) -> Entry | None:
        nonlocal why
        others = sum_uses({**in_ledger, **on_api}.values())  # with their usage tags and core masks
        why = misfit(record.devices, others, adopted.uses, settings.vendors)
        return None if why else adopted

    if context.ledger.record_checked(ref.uid, node, check, token) is None:
        raise Failed(f"{who} no longer fits on node {node} ({why}); it will be filtered again", RECHECK)


def _allocation(pod: Mapping[str, Any], context: Context) -> dict[str, str]:
    """The annotations that make up the pod's allocation: every declared allocation key (its node, each
    vendor's lists and the keys its device plugin allocates from, MIG slices; app.core.podkeys)."""
    keys = podkeys.allocation_keys(context.settings.vendors)
    return {k: v for k, v in pods.annotations_of(pod).items() if k in keys}


STAMP_ATTEMPTS = 3


def _stamp(context: Context, pod: Mapping[str, Any], ref: PodRef, node: str) -> None:
    """bind-phase `allocating`, on the pod as it was re-checked: preconditions on its UID and
    resourceVersion; a pod changed meanwhile is re-read and stamped only if still unbound, ours and
    holding the same allocation."""
    stamp = {BIND_PHASE: PHASE_ALLOCATING, BIND_TIME: str(int(context.clock()))}
    checked, current = _allocation(pod, context), pod
    for attempt in range(STAMP_ATTEMPTS):
        try:
            objects.patch_pod_metadata(
                context.kube,
                ref.namespace,
                ref.name,
                stamp,
                uid=ref.uid,
                resource_version=objects.resource_version(current) or None,
            )
            return
        except ApiError as exc:
            if not exc.conflict or attempt == STAMP_ATTEMPTS - 1:
                raise Failed(exc.message, PATCH_FAILED) from None
        try:
            current = objects.get_pod(context.kube, ref.namespace, ref.name)
        except ApiError as exc:
            raise Failed(exc.message, PATCH_FAILED) from None
        if pods.uid(current) == ref.uid and _bound_here(current, context, node):
            raise AlreadyBound()  # another bind of this pod (a second worker, a retry) bound it meanwhile
        why = pods.refusal(current, context.settings.scheduler_name)
        if pods.uid(current) != ref.uid or why or _allocation(current, context) != checked:
            raise Failed(
                why or f"pod {ref.namespace}/{ref.name} changed while it was being bound", PATCH_FAILED
            )


REREAD_DELAYS = (0.1, 0.2, 0.4)  # seconds between the re-reads after a failed binding call


def _bound_anyway(context: Context, ref: PodRef, node: str) -> bool | None:
    """After a failed binding call: did the binding happen (a lost answer)? None when no re-read answered."""
    for delay in (*REREAD_DELAYS, None):
        try:
            pod = objects.get_pod(context.kube, ref.namespace, ref.name)
        except ApiError as exc:
            if exc.not_found:
                return False
            if delay is None:
                return None
            time.sleep(delay * (0.5 + random.random()))
            continue
        spec = pod.get("spec") or {}
        return pods.uid(pod) == ref.uid and isinstance(spec, dict) and spec.get("nodeName") == node
    return None


def _bound_here(pod: Mapping[str, Any], context: Context, node: str) -> bool:
    """Bound to `node` by a bind of ours, and not being deleted: a retried or duplicate bind has nothing
    left to do (and must not re-lock the node, reset its bind-phase or release the device plugin's lock)."""
    spec = pods.spec(pod)
    ours = spec.get("schedulerName") == context.settings.scheduler_name
    return ours and spec.get("nodeName") == node and not pods.metadata(pod).get("deletionTimestamp")


def _written(context: Context, ref: PodRef, node: str) -> dict[str, Any] | None:
    """The pod as this replica's confirmed allocation write left it, when that is what a GET would show
    as far as this bind can tell, else None (the caller reads the pod).

    The ledger hands it out once per confirmed write (`take_written`): a second bind of the pod (another
    worker, kube-scheduler's retry after a lost answer) reads the pod, as does a bind after a rebuild, of a
    pod another replica wrote, or in the outside-extender mode (its writes keep no copy). The copy is the
    PATCH's answer: same UID, the annotations we wrote, its resourceVersion. What may change after it — the
    pod bound by another bind, deleted or recreated under the name — is caught before anything irreversible:
    the bind-phase stamp is conditional on that resourceVersion and UID (`_stamp`: a 409 re-reads the pod
    and decides on it) and the Binding on the UID. Only the node lock is taken before; it is released as on
    any failure, except once the name belongs to another UID (module docstring)."""
    pod = context.ledger.take_written(ref.uid)
    if pod is None or pods.uid(pod) != ref.uid:
        return None
    if pods.namespace(pod) != ref.namespace or pods.name(pod) != ref.name:
        return None
    if pods.annotations_of(pod).get(ASSIGNED_NODE) != node:
        return None  # asked for another node than filtered: the API's view answers that (NOT_FILTERED)
    return pod


def _lookup(context: Context, ref: PodRef, node: str, outcome: BindOutcome) -> dict[str, Any]:
    """The pod as the API has it (or as our own write left it, `_written`); refused (forgetting nothing)
    unless it is the requested incarnation of a pod of ours that may still be bound. Raises AlreadyBound
    for a pod bound to the requested node."""
    mark = time.perf_counter()
    pod = _written(context, ref, node)
    if pod is None:
        try:
            pod = objects.get_pod(context.kube, ref.namespace, ref.name)
        except ApiError as exc:
            raise Failed(exc.message, POD_LOOKUP, event="") from None
    outcome.phases["pod_lookup"] = time.perf_counter() - mark
    who = f"pod {ref.namespace}/{ref.name}"
    if pods.uid(pod) != ref.uid:  # the request's UID may be another pod's: forget nothing of it
        message = f"{who} has UID {pods.uid(pod)}, not {ref.uid}"
        raise Failed(message, POD_RECREATED, event="", compensate=False)
    refused = adoption.refusal(context.settings.counted, pod)
    if refused:
        raise Failed(refused, NOT_OURS, event="", compensate=False)  # keep its counted row; write nothing
    why = pods.refusal(pod, context.settings.scheduler_name)
    if why:
        if _bound_here(pod, context, node):
            raise AlreadyBound()
        raise Failed(why, NOT_SCHEDULABLE, event="", compensate=False)
    return pod


def bind_pod(context: Context, namespace: str, name: str, uid: str, node: str) -> BindOutcome:
    outcome = BindOutcome()
    if not uid:
        outcome.error = f"hami-scheduler: the binding of pod {namespace}/{name} carries no PodUID"
        outcome.reason = NO_UID
        return outcome
    status, now = context.status(), context.clock()
    if not status.may_decide(now):
        outcome.error = f"hami-scheduler: {status.why_not(now)}; retry later"
        outcome.reason = NOT_LEADER
        return outcome
    ref = PodRef(namespace, name, uid)
    token = BIND_RUNNING + secrets.token_hex(6)  # this attempt's mark on the row it re-checks
    held: list[Held] = []
    binding_sent = False  # from here on the pod may be bound: an unexpected failure undoes nothing
    try:
        await_write(context, ref, outcome)
        pod = _lookup(context, ref, node, outcome)
        try:
            requests = pods.pod_requests(pod, context.settings.vendors)
        except (InvalidRequest, pods.PodError) as exc:
            raise Failed(str(exc), INVALID_REQUEST) from None
        assigned = pods.annotations_of(pod).get(ASSIGNED_NODE)
        if requests.any and assigned != node:
            message = f"pod {namespace}/{name} was filtered onto node {assigned or '<none>'}, not {node}"
            raise Failed(message, NOT_FILTERED, compensate=False)
        specs = locks_for(requests, context.settings.vendors)
        if not specs:  # taking a lock reads the node; pods of vendors without one read it here
            mark = time.perf_counter()
            try:
                objects.get_node(context.kube, node)
            except ApiError:
                raise Failed(f"failed to get node {node}", NODE_LOOKUP) from None
            outcome.phases["node_lookup"] = time.perf_counter() - mark
        if specs:
            mark = time.perf_counter()
            # From here on every failure releases every lock `held` that is ours (owner- or value-checked):
            # a CAS whose answer was lost may have taken one even when take_locks ends in an error.
            take_locks(context, node, ref, specs, held, outcome)
            outcome.phases["lock"] = time.perf_counter() - mark
        if requests.any:
            mark = time.perf_counter()
            _recheck(context, pod, ref, node, token)
            outcome.phases["recheck"] = time.perf_counter() - mark
        mark = time.perf_counter()
        _stamp(context, pod, ref, node)
        outcome.phases["patch"] = time.perf_counter() - mark
        mark = time.perf_counter()
        binding_sent = True
        try:
            objects.bind_pod(context.kube, namespace, name, ref.uid, node)
        except ApiError as exc:
            happened = _bound_anyway(context, ref, node)
            if happened is None:
                message = f"{exc.message}; could not tell whether pod {namespace}/{name} was bound to {node}"
                raise Failed(message, BINDING_UNKNOWN, compensate=False) from None
            if not happened:
                raise Failed(exc.message, BINDING_FAILED_REASON) from None
        outcome.phases["binding"] = time.perf_counter() - mark
    except AlreadyBound:  # bound to this node already (a retried or duplicate bind): undo only our own lock
        give_back_written(context, node, ref, held)  # taken free from a stale copy (`_written`); see bindwait
        try:  # a duplicate's re-check may have rewritten the row as it read it, before the other's bound
            context.ledger.set_state(ref.uid, BOUND, only_from=(CONFIRMED,))
        except Exception:  # e.g. SQLite busy: the ledger watch sees the pod bound
            logger.exception("could not mark the bound pod", extra={"pod": f"{namespace}/{name}"})
        return outcome
    except (Failed, LockContention, ApiError) as failure:
        message = failure.message if isinstance(failure, Failed | ApiError) else str(failure)
        event = failure.event if isinstance(failure, Failed) else message
        if isinstance(failure, Failed):
            outcome.reason = failure.reason
        else:
            outcome.reason = LOCK_CONTENDED if isinstance(failure, LockContention) else LOCK_ERROR
        if not isinstance(failure, Failed) or failure.compensate:
            undo.compensate(context, ref, node, held, token)
        elif failure.reason == BINDING_UNKNOWN:
            undo.unknown(context, ref, token)
        if event and context.settings.events_enabled:
            context.events.record(ref, WARNING, BINDING_FAILED, event)
        outcome.error = message
        return outcome
    except Exception as exc:  # of no expected type: still released and forgotten, answered as an Error
        logger.exception("bind failed unexpectedly", extra={"pod": f"{namespace}/{name}", "node": node})
        outcome.reason = INTERNAL
        if not binding_sent:
            undo.compensate(context, ref, node, held, token)
        else:
            undo.unknown(context, ref, token)
        outcome.error = f"internal error: {type(exc).__name__}: {exc}"
        if context.settings.events_enabled:
            context.events.record(ref, WARNING, BINDING_FAILED, outcome.error)
        return outcome
    context.ledger.set_state(ref.uid, BOUND)
    if context.settings.events_enabled:
        context.events.record(ref, NORMAL, BINDING_SUCCEED, binding_success_event(node, namespace, name))
    return outcome
