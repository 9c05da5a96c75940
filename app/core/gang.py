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


# After kube-scheduler abandoned a gang whose devices our filter found (a member does not fit its CPU,
# say), no devices are held for the gang for this long, doubling with each abandoned attempt in a row.
RETRY_FIRST, RETRY_MAX = 30.0, 300.0


@dataclass(frozen=True, slots=True)
class Attempts:
    """A gang's recent attempts as /filter saw them (docs/gangs.md, "Abandoned attempts")."""

    started: float = 0.0  # when /filter placed the quorum of the attempt still open (0: none open)
    abandoned: int = 0  # attempts in a row that kube-scheduler did not bind
    resume: float = 0.0  # no devices are held for the gang before this (unix seconds)


def next_attempt(attempts: Attempts, now: float, ttl: float) -> tuple[Attempts, bool]:
    """Whether /filter may place the quorum of a gang (not bound) now, and the attempts after it asked.

    An attempt stays open for `ttl` (the gang TTL: kube-scheduler binds a quorum it keeps within seconds,
    and its retries of one failure within that window belong to the same attempt). Asked after that
    without the quorum bound, the open attempt was abandoned: the gang waits RETRY_FIRST, doubled with
    each abandonment in a row up to RETRY_MAX, before devices are held for it again."""
    if now < attempts.resume:
        return attempts, False
    if attempts.started and now - attempts.started > ttl:
        abandoned = attempts.abandoned + 1
        wait = min(RETRY_MAX, RETRY_FIRST * 2 ** (abandoned - 1))
        return Attempts(0.0, abandoned, now + wait), False
    return Attempts(attempts.started or now, attempts.abandoned, attempts.resume), True


def abandoned_reason(group: PodGroupFacts, attempts: Attempts, now: float) -> str:
    """Why no devices are held for the gang now."""
    times = "once" if attempts.abandoned == 1 else f"{attempts.abandoned} times in a row"
    return (
        f"gang {group.key}: kube-scheduler did not bind the quorum placed for it ({times}: its own filters "
        f"refuse a member); no devices are held for it for {max(0.0, attempts.resume - now):.0f}s more"
    )
