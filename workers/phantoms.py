"""Phantom reservations: what the ledger sweep does to the pod of a reservation kube-scheduler never bound.

Why it exists (issue 21, docs/gangs.md): /filter reserves devices (ledger row, then HAMi's annotations on
the pod) inside kube-scheduler's scheduling cycle, but kube-scheduler may still not bind the pod — its pod
group cycle rejects a gang that does not fit after our filter answered for some members, Permit rejects or
times out, a preemption or a failed bind returns the pod to the queue. Extenders hear of none of this. The
sweep (workers/reconcile.py, rule 3) removes such a row once it is in flight past HAMI_INFLIGHT_TTL and the
API still shows the pod unbound. Removing the row alone leaves two things behind, measured on the real
kube-scheduler 1.37 with a gang that cannot fit:

- the pod still carries the allocation annotations of a decision nobody holds (`hami.io/vgpu-node`, the
  device lists): the API, which is the truth (ARCHITECTURE.md), claims devices the ledger does not count;
- kube-scheduler is never told that capacity came back. A pod our filter refused while the phantom held
  the devices sits in its unschedulable queue until some cluster event moves it; the gang's own retry is
  such an event (our filter's annotation writes on its members), so the refused pod was retried exactly
  when the gang held the devices again and starved for as long as the gang kept retrying.

So the sweep also removes the scheduler-owned annotations (app.core.podkeys) from the pod of every row it
removed as expired, when the annotations are expired too: their `hami.io/vgpu-time`/`bind-time` is older
than the TTL (what a rebuild would not count; a fresher stamp is another replica's filter after a failover,
which this replica's expired row says nothing about). The patch is preconditioned on the resourceVersion
the sweep's GET saw and on the UID: a pod written since — a /filter deciding for it again — is left alone
(409). The update is the cluster
event that requeues the pods our filter refused (kube-scheduler requeues extender-rejected pods on any event,
kubernetes#122019). A /filter whose deferred write was preconditioned on an older copy of the pod fails
that write and the attempt (retried by kube-scheduler), never counting devices twice.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.core import podkeys, pods
from app.core.pods import PodError
from app.core.vendor import Vendor
from app.k8s import objects
from app.k8s.client import Kube
from app.k8s.errors import ApiError

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Phantom:
    """An unbound pod whose expired reservation the sweep removed: the keys to delete from it, and the
    pod's identity and resourceVersion as the sweep's GET saw them (the patch's preconditions)."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    keys: tuple[str, ...]


def phantom(pod: Mapping[str, Any] | None, uid: str, vendors: tuple[Vendor, ...]) -> Phantom | None:
    """The cleanup of `pod` (the sweep's answer for the row of `uid`, which it removed as expired): None
    when the pod is gone, another, bound, terminal, or carries none of our keys."""
    if pod is None:
        return None
    try:
        if pods.uid(pod) != uid or pods.is_terminated(pod):
            return None
        spec = pod.get("spec")
        if isinstance(spec, Mapping) and spec.get("nodeName"):
            return None
        metadata = pod.get("metadata")
        version = metadata.get("resourceVersion") if isinstance(metadata, Mapping) else None
        keys = podkeys.owned_of(pods.annotations_of(pod), podkeys.declared(vendors))
        if not keys or not isinstance(version, str) or not version:
            return None
        return Phantom(pods.namespace(pod), pods.name(pod), uid, version, tuple(sorted(keys)))
    except PodError:
        return None


def release(kube: Kube, found: Phantom) -> bool:
    """Remove `found.keys` from its pod if the pod is still the one the sweep read (same UID and
    resourceVersion); False when it was written since (409: filtered again) or is gone (404)."""
    try:
        objects.patch_pod_metadata(
            kube,
            found.namespace,
            found.name,
            dict.fromkeys(found.keys),
            resource_version=found.resource_version,
            uid=found.uid,
        )
    except ApiError as exc:
        if exc.conflict or exc.not_found:
            return False
        raise
    logger.info(
        "released an expired reservation of a pod kube-scheduler did not bind",
        extra={"pod": f"{found.namespace}/{found.name}", "keys": len(found.keys)},
    )
    return True
