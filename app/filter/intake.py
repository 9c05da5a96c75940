"""What /filter reads before it decides (app/filter/usecase.py): whether this replica may decide, the pod's
requests and hints, and — where the request's copy is not enough — the pod as the API has it now.

Invariants owned here:
- A replica that is not the leader, or not synced, never decides: it answers a retryable Error at once
  (a follower) or after a bounded wait (a leader still syncing) — HAMi blocks until kube-scheduler's
  timeout (quirk #14).
- A decision read from the API is for the pod with the request's UID, of our scheduler, unbound and not
  being deleted, never a pod of an adopted scheduler name (issue 11): anyone reaching /filter could have
  forged the request body.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from app.context import Context
from app.core import adoption, pods
from app.core.codec import CodecError
from app.core.decision import pod_context
from app.core.fit import PodContext
from app.core.pods import PodError
from app.core.vendor import InvalidRequest
from app.filter.outcome import FilterOutcome
from app.k8s import objects
from app.k8s.errors import ApiError


def wait_until_ready(context: Context) -> str:
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


def probe(context: Context, pod: Mapping[str, Any]) -> PodContext | FilterOutcome:
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


def read_pod(context: Context, probe: PodContext, uid: str) -> dict[str, Any] | FilterOutcome:
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
