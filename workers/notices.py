"""Pod events for what the webhook told only the client that created a pod: HAMi's clamps and ignores.

Why it exists: the webhook returns `app.core.notes` (e.g. `nvidia.com/gpucores 150 ... treated as 100`) as
AdmissionReview warnings, and warnings reach only the client that sent the CREATE. For a pod a controller
made (a Deployment's ReplicaSet, a Job: the pod has an owner reference) that client is the controller,
which shows them to nobody. So the leader's registration worker posts the same notes as one `Warning` event
`AdmissionWarning` on the pod when its pod watch first reports it — where `kubectl describe pod` and
`kubectl get events` show them.

Why here and not elsewhere: the webhook cannot post it (the pod has no UID before the API server stores it,
the request may be a dry run, and the webhook is registered with `sideEffects: None`); `/filter` sees
every GPU pod too, but on kube-scheduler's serial path and once per scheduling attempt, in several
processes, so "only once" would need shared bookkeeping there. The worker already watches every pod of our
scheduler name, exactly one replica leads, and a watch reports a new pod once.

Which pods: only while leading, only pods reported as new after every pod watch finished its first list (a
replica's first list, or a new leader's, holds pods that were told before), unbound, of our scheduler name,
with an owner reference. The notes are recomputed from the stored pod (`app.core.notes.pod_notes`: the same
function the webhook used, on the same values, which the mutation does not change). A pod created while
leadership moves may be told twice or not at all; the event is informational.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from app.core import notes, pods
from app.core.vendor import Vendor
from app.k8s.events import WARNING, EventRecorder, PodRef
from workers.informers import ADDED, Change

logger = logging.getLogger(__name__)

REASON = "AdmissionWarning"


class AdmissionNotices:
    def __init__(
        self,
        recorder: EventRecorder,
        vendors: Sequence[Vendor],
        scheduler_name: str,
        *,
        leading: Callable[[], bool],
        listed: Callable[[], bool],
    ) -> None:
        self._recorder = recorder
        self._vendors = tuple(vendors)
        self._scheduler_name = scheduler_name
        self._leading = leading
        self._listed = listed

    def handle(self, changes: Sequence[Change]) -> None:
        """The pod watch's changes (after the reconciler's); never raises, so the watch never re-lists for
        an event it could not post."""
        if not self._listed() or not self._leading():
            return
        for change in changes:
            if change.type != ADDED or change.old is not None:
                continue
            try:
                self._tell(change.obj)
            except Exception:
                logger.exception("admission notes for a new pod failed")

    def _tell(self, pod: dict[str, object]) -> None:
        spec = pods.spec(pod)
        if spec.get("nodeName") or spec.get("schedulerName") != self._scheduler_name:
            return
        if not notes.controller_made(pod):
            return
        told = notes.pod_notes(pod, self._vendors)
        if not told:
            return
        ref = PodRef(pods.namespace(pod), pods.name(pod), pods.uid(pod))
        self._recorder.record(ref, WARNING, REASON, f"admitted with warnings: {'; '.join(told)}")

    def close(self) -> None:
        self._recorder.close()
