"""Hand leadership over when this replica's node is cordoned, so `kubectl drain` completes on its own.

Why: only the leader is Ready, and the chart's PodDisruptionBudget (minAvailable 1) refuses to evict the
only Ready pod; a drain of the leader's node used to wait until someone deleted the leader by hand.
`kubectl drain` cordons the node first, so the cordon is the signal:

- acquire mode: the leader releases its Lease (`AcquireLease.step_down`) and stays out of the election for
  one lease duration; a standby on another node takes the Lease at its next retry, syncs and becomes Ready,
  this replica turns unready, and the budget lets the drain evict it (standbys are evictable through
  `unhealthyPodEvictionPolicy: AlwaysAllow`). If nobody took the Lease by then, this replica stands again;
  it hands over once per cordon;
- follow mode: kube-scheduler holds the Lease, so leadership cannot move before that container stops. The
  leader reports not ready (`draining` in its status; it keeps deciding for its own kube-scheduler over
  loopback), the budget lets the drain evict it, and on SIGTERM kube-scheduler releases its Lease
  (kube-scheduler's leader election runs with ReleaseOnCancel); a standby's kube-scheduler acquires it at
  its next retry and that replica's worker follows within one retry period.

Only when another replica can take over: a scheduler pod (same component label, same namespace) that runs
with a started registration worker, is not terminating and is on another node. Without one, a cordon
changes nothing (the Deployment has no budget with one replica, so its drain evicts the pod anyway). If the
standby did not take over (acquire mode: we stood again after the hold-off), the hand-over is tried again
every RETRY seconds while the node stays cordoned. Uncordoning ends the hand-over.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from app.core import pods
from app.k8s.client import Kube
from app.k8s.errors import ApiError
from app.k8s.watching import Target, list_objects
from workers.election import Elector
from workers.roles import COMPONENT_SELECTOR

logger = logging.getLogger(__name__)

RETRY = 60.0  # seconds between hand-over attempts while the node stays cordoned and we still lead


def cordoned(node: Mapping[str, Any] | None) -> bool:
    spec = node.get("spec") if node is not None else None
    return isinstance(spec, Mapping) and spec.get("unschedulable") is True


def node_shape(node: Mapping[str, Any]) -> dict[str, Any]:
    """What the hand-over needs of its own Node: the name and whether it is cordoned."""
    metadata = node.get("metadata") or {}
    return {
        "metadata": {"name": metadata.get("name"), "resourceVersion": metadata.get("resourceVersion")},
        "spec": {"unschedulable": cordoned(node)},
    }


def _worker_ready(pod: Mapping[str, Any]) -> bool:
    """The pod's registration worker container runs and passed its startup probe (no status: assume so)."""
    status = pod.get("status")
    statuses = status.get("containerStatuses") if isinstance(status, Mapping) else None
    if not isinstance(statuses, list):
        return True
    return any(
        isinstance(c, Mapping) and c.get("name") == "worker" and c.get("ready") is True for c in statuses
    )


def peers(scheduler_pods: Sequence[Mapping[str, Any]], own_pod: str, own_node: str) -> list[str]:
    """Scheduler pods that could lead instead of us: running with a started registration worker, not
    terminating, on another node."""
    found = []
    for pod in scheduler_pods:
        spec = pod.get("spec")
        node = spec.get("nodeName") if isinstance(spec, Mapping) else None
        if (
            pods.name(pod) != own_pod
            and pods.phase(pod) == "Running"
            and not pods.metadata(pod).get("deletionTimestamp")
            and node
            and node != own_node
            and _worker_ready(pod)
        ):
            found.append(pods.name(pod))
    return found


class Handover:
    def __init__(
        self,
        kube: Kube,
        elector: Elector,
        *,
        namespace: str,
        pod_name: str,
        node_name: str,
        hold_off: float,
        set_draining: Callable[[str], None],
        on_handover: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kube = kube
        self._elector = elector
        self._namespace = namespace
        self._pod = pod_name
        self._node = node_name
        self._hold_off = hold_off
        self._set_draining = set_draining
        self._on_handover = on_handover
        self._clock = clock
        self._handed_over = False
        self._attempted = -RETRY

    def _peers(self) -> list[str]:
        try:
            found, _ = list_objects(self._kube, Target("pods", self._namespace, COMPONENT_SELECTOR), dict)
        except ApiError as exc:
            logger.warning("listing scheduler pods for a hand-over failed", extra={"error": exc.message})
            return []
        return peers(found, self._pod, self._node)

    def step(self, node: Mapping[str, Any] | None, leading: bool) -> None:
        """Called by the work loop with this replica's Node as last seen and whether it leads."""
        if not cordoned(node):
            if self._handed_over:
                logger.info("node uncordoned: hand-over over", extra={"node": self._node})
            self._handed_over = False
            self._set_draining("")
            return
        if not leading or (self._handed_over and self._clock() - self._attempted < RETRY):
            return
        candidates = self._peers()
        if not candidates:
            return  # nobody could lead instead; try again on the next step
        self._handed_over = True
        self._attempted = self._clock()
        self._on_handover()
        if self._elector.step_down(self._hold_off):
            logger.info("node cordoned: released the Lease", extra={"node": self._node, "peers": candidates})
        else:
            why = f"node {self._node} is cordoned: this replica hands over when it stops"
            self._set_draining(why)
            logger.info("node cordoned: reporting not ready", extra={"node": self._node, "peers": candidates})
