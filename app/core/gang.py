"""Gangs as the decision sees them: a pod's PodGroup, the PodGroup's quorum and settings, and the words
of a gang refusal (docs/gangs.md).

Kubernetes' Workload API (`scheduling.k8s.io/v1beta1`, gate `GenericWorkload`, beta and off by default in
1.37 and 1.38) puts a pod in a gang with `spec.schedulingGroup.podGroupName`; the PodGroup in the pod's
namespace says how many members must be scheduled together (`spec.schedulingPolicy.gang.minCount`,
mutable), with what priority (`spec.priority`, resolved by admission from `priorityClassName`), how its
members may be disrupted (`spec.disruptionMode`: `single` or `all`) and, behind the gate
`TopologyAwareWorkloadScheduling`, which node label all members must share
(`spec.schedulingConstraints.topology[0].key`). A PodGroup with `schedulingPolicy.basic` is no gang.

Everything here is a pure function of plain JSON: malformed values read as absent, never raise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.core import pods

GANG, BASIC = "gang", "basic"
SINGLE, ALL = "single", "all"
ZONE_KEY, REGION_KEY = "topology.kubernetes.io/zone", "topology.kubernetes.io/region"
KNOWN_TOPOLOGY = (ZONE_KEY, REGION_KEY)  # the node labels the inventory keeps (app/state/snapshot.py)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def group_of(pod: Mapping[str, Any]) -> str:
    """The PodGroup the pod belongs to (`spec.schedulingGroup.podGroupName`), "" when none."""
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return ""
    group = spec.get("schedulingGroup")
    if not group:
        return ""
    name = _mapping(group).get("podGroupName")
    return name if isinstance(name, str) else ""


def priority_of(pod: Mapping[str, Any]) -> int:
    """The pod's `spec.priority` (0 when unset or not an integer)."""
    value = _mapping(pod.get("spec")).get("priority")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass(frozen=True, slots=True)
class PodGroupFacts:
    """What the decision needs of one PodGroup."""

    namespace: str
    name: str
    uid: str = ""
    policy: str = GANG  # gang or basic
    min_count: int = 1
    priority: int | None = None  # spec.priority; None: unset (the members' own priority applies)
    disruption: str = SINGLE
    topology: str = ""  # the node label key all members must share; "" for none

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def is_gang(self) -> bool:
        return self.policy == GANG


def podgroup_facts(group: Mapping[str, Any]) -> PodGroupFacts | None:
    """A PodGroup object's facts; None when it has no name."""
    metadata = _mapping(group.get("metadata"))
    name, namespace = metadata.get("name"), metadata.get("namespace") or "default"
    if not isinstance(name, str) or not name or not isinstance(namespace, str):
        return None
    spec = _mapping(group.get("spec"))
    policy = _mapping(spec.get("schedulingPolicy"))
    gang = policy.get("gang")
    count = _mapping(gang).get("minCount")
    priority = spec.get("priority")
    disruption = _mapping(spec.get("disruptionMode"))
    topology = _mapping(spec.get("schedulingConstraints")).get("topology")
    key = ""
    if isinstance(topology, list) and topology:
        found = _mapping(topology[0]).get("key")
        key = found if isinstance(found, str) else ""
    uid = metadata.get("uid")
    return PodGroupFacts(
        namespace=namespace,
        name=name,
        uid=uid if isinstance(uid, str) else "",
        policy=GANG if isinstance(gang, Mapping) else BASIC,
        min_count=count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1,
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else None,
        disruption=ALL if "all" in disruption else SINGLE,
        topology=key,
    )


def gang_priority(group: PodGroupFacts, pod: Mapping[str, Any]) -> int:
    """The priority a gang's plan holds with: the PodGroup's own, else the member's (`spec.priority`)."""
    return group.priority if group.priority is not None else priority_of(pod)


def shortfall_reason(group: PodGroupFacts, found: int, sampled: bool) -> str:
    """The FailedNodes reason of every node when the quorum's devices cannot be found: the gang, how many
    members have devices, the quorum, and whether kube-scheduler offered only some of the nodes."""
    where = " among the nodes offered" if sampled else ""
    return f"gang {group.key}: devices for {found} of {group.min_count} members{where}"


def topology_reason(group: PodGroupFacts) -> str:
    """Why a gang whose topology constraint names a label the inventory does not keep is not planned."""
    known = " or ".join(KNOWN_TOPOLOGY)
    return (
        f"gang {group.key}: topology key {group.topology} is not one hami-scheduler can see ({known}); "
        "no devices are held for it"
    )


def member_name(pod: Mapping[str, Any]) -> str:
    return f"{pods.namespace(pod)}/{pods.name(pod)}"
