"""HAMi's scheduler-role labels (reference §7, `updateSchedulerLabel`), written by the leader only.

The leader lists the pods in POD_NAMESPACE labelled `app.kubernetes.io/component=hami-scheduler` and labels
the one named POD_NAME `hami.io/scheduler-role=leader`, the others `follower`, with a merge patch only when
the label differs; errors are logged. The HAMi chart's Service selects the leader label, so charts written
for HAMi keep routing. Enabled by HAMI_SCHEDULER_ROLE_LABEL (default on when POD_NAME and POD_NAMESPACE
are set).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from app.core import pods
from app.k8s import objects
from app.k8s.client import Kube
from app.k8s.errors import ApiError
from app.k8s.watching import Target, list_objects

logger = logging.getLogger(__name__)

ROLE_LABEL = "hami.io/scheduler-role"
COMPONENT_SELECTOR = "app.kubernetes.io/component=hami-scheduler"
LEADER, FOLLOWER = "leader", "follower"


def role_changes(scheduler_pods: Iterable[Mapping[str, Any]], leader_pod: str) -> list[tuple[str, str]]:
    """(pod name, role) for every pod whose label is not what it should be."""
    changes = []
    for pod in scheduler_pods:
        name = pods.name(pod)
        role = LEADER if name == leader_pod else FOLLOWER
        if pods.labels_of(pod).get(ROLE_LABEL) != role:
            changes.append((name, role))
    return changes


def label_roles(kube: Kube, namespace: str, leader_pod: str, still_leading: Callable[[], bool]) -> None:
    try:
        found, _ = list_objects(kube, Target("pods", namespace, COMPONENT_SELECTOR), dict)
    except ApiError as exc:
        logger.warning("listing scheduler pods for role labels failed", extra={"error": exc.message})
        return
    for name, role in role_changes(found, leader_pod):
        if not still_leading():
            return
        try:
            objects.patch_pod_metadata(kube, namespace, name, {}, {ROLE_LABEL: role})
        except ApiError as exc:
            logger.warning(
                "labelling scheduler pod failed", extra={"pod": name, "role": role, "error": exc.message}
            )
