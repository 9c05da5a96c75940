"""DRA side by side: which of our resource names and which of our nodes kube-scheduler also serves by DRA.

Since Kubernetes 1.34 kube-scheduler allocates devices from ResourceSlices (resource.k8s.io/v1) itself, and
a DeviceClass with `spec.extendedResourceName` (KEP-5004, DRAExtendedResource: alpha 1.34, beta 1.36, GA
1.37) makes its DynamicResources plugin serve a plain extended-resource request such as `nvidia.com/gpu: 1`
from those slices, on every node whose allocatable lacks the resource. Our extender manages the same names
through HAMi's device plugin and its annotations, so the same GPU would be handed out twice. This module
works out, as plain data, the two ways that can happen (docs/compatibility.md "DRA side by side"):

- a *collision*: a resource name we manage (any vendor's count, memory, cores or priority name) that a
  DeviceClass also serves — explicitly by `extendedResourceName`, or implicitly by the
  `deviceclass.resource.kubernetes.io/<class>` name every class has;
- an *overlap*: a node we register (it carries a vendor's device registration) on which a GPU DRA driver
  (`app.devices.dra.DRIVERS`: driver name -> vendor key) publishes devices in a node-local ResourceSlice.

The decision rules built on these facts live here too: `pod_refusal` (a pod asking for a collided name is
refused by /filter; the webhook warns) and `node_refusal` (an overlapped node is refused for our resources).
Pure: objects in, frozen data out; no I/O, no clock (the caller stamps `checked_at`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.vendor import Vendor

IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"  # KEP-5004: every class's implicit name


@dataclass(frozen=True, slots=True)
class Collision:
    """`resource`, managed by our vendor `vendor`, is also served by the DeviceClasses `classes`."""

    resource: str
    vendor: str
    classes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Overlap:
    """Node `node`, which we register, has `devices` devices published by the DRA drivers `drivers`."""

    node: str
    drivers: tuple[str, ...]
    devices: int


@dataclass(frozen=True, slots=True)
class DraFacts:
    """What the registration worker found; `available` is False where the cluster serves no
    resource.k8s.io/v1 (then there is nothing to collide with)."""

    available: bool = False
    collisions: tuple[Collision, ...] = ()
    overlaps: tuple[Overlap, ...] = ()
    checked_at: float = 0.0

    def served(self) -> dict[str, Collision]:
        return {c.resource: c for c in self.collisions}

    def overlapped(self) -> dict[str, Overlap]:
        return {o.node: o for o in self.overlaps}

    @property
    def any(self) -> bool:
        return bool(self.collisions or self.overlaps)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _name(obj: Mapping[str, Any]) -> str:
    value = _mapping(obj.get("metadata")).get("name")
    return value if isinstance(value, str) else ""


def managed_names(vendors: Sequence[Vendor]) -> dict[str, str]:
    """Every resource name a vendor of ours manages -> that vendor's key."""
    managed: dict[str, str] = {}
    for vendor in vendors:
        r = vendor.resources
        for name in (r.count, r.memory, r.memory_percentage, r.cores, r.priority):
            if name:
                managed.setdefault(name, vendor.key)
    return managed


def class_resource_names(device_classes: Iterable[Mapping[str, Any]]) -> dict[str, tuple[str, ...]]:
    """Extended resource name -> the DeviceClasses serving it (explicit and implicit names), sorted."""
    served: dict[str, set[str]] = {}
    for device_class in device_classes:
        name = _name(device_class)
        if not name:
            continue
        served.setdefault(IMPLICIT_PREFIX + name, set()).add(name)
        explicit = _mapping(device_class.get("spec")).get("extendedResourceName")
        if isinstance(explicit, str) and explicit:
            served.setdefault(explicit, set()).add(name)
    return {resource: tuple(sorted(names)) for resource, names in served.items()}


def collisions(
    device_classes: Iterable[Mapping[str, Any]], vendors: Sequence[Vendor]
) -> tuple[Collision, ...]:
    managed = managed_names(vendors)
    served = class_resource_names(device_classes)
    return tuple(
        Collision(resource, managed[resource], served[resource])
        for resource in sorted(served.keys() & managed)
    )


def published(slices: Iterable[Mapping[str, Any]], drivers: Mapping[str, str]) -> dict[str, dict[str, int]]:
    """Node -> driver -> devices, from node-local ResourceSlices (`spec.nodeName`) of the known GPU drivers.

    Slices for many nodes (`nodeSelector`, `allNodes`) describe network-attached devices, not the GPUs in a
    node our device plugin registers; they are left out, as are slices without devices."""
    nodes: dict[str, dict[str, int]] = {}
    for item in slices:
        spec = _mapping(item.get("spec"))
        driver, node, devices = spec.get("driver"), spec.get("nodeName"), spec.get("devices")
        if not (isinstance(driver, str) and driver in drivers and isinstance(node, str) and node):
            continue
        count = len(devices) if isinstance(devices, list) else 0
        if count:
            per_driver = nodes.setdefault(node, {})
            per_driver[driver] = per_driver.get(driver, 0) + count
    return nodes


def overlaps(
    slices: Iterable[Mapping[str, Any]], drivers: Mapping[str, str], registered: Collection[str]
) -> tuple[Overlap, ...]:
    found = published(slices, drivers)
    return tuple(
        Overlap(node, tuple(sorted(found[node])), sum(found[node].values()))
        for node in sorted(found.keys() & set(registered))
    )


def facts(
    device_classes: Iterable[Mapping[str, Any]] | None,
    slices: Iterable[Mapping[str, Any]] | None,
    vendors: Sequence[Vendor],
    drivers: Mapping[str, str],
    registered: Collection[str],
    checked_at: float,
) -> DraFacts:
    """The facts; `device_classes`/`slices` None: the cluster has no resource.k8s.io/v1."""
    if device_classes is None or slices is None:
        return DraFacts(False, (), (), checked_at)
    return DraFacts(
        True, collisions(device_classes, vendors), overlaps(slices, drivers, registered), checked_at
    )


def requested_names(pod: Mapping[str, Any]) -> list[str]:
    """Every resource name the pod's containers (init containers too) limit or request, in order."""
    names: dict[str, None] = {}
    spec = _mapping(pod.get("spec"))
    for key in ("initContainers", "containers"):
        containers = spec.get(key)
        for container in containers if isinstance(containers, list) else ():
            resources = _mapping(_mapping(container).get("resources"))
            for section in ("limits", "requests"):
                names.update(dict.fromkeys(k for k in _mapping(resources.get(section)) if isinstance(k, str)))
    return list(names)


def asks_managed(pod: Mapping[str, Any], vendors: Sequence[Vendor]) -> bool:
    """Does the pod ask for any resource name a vendor of ours manages?"""
    managed = managed_names(vendors)
    return any(name in managed for name in requested_names(pod))


def pod_collisions(facts: DraFacts, pod: Mapping[str, Any]) -> list[Collision]:
    """The collisions among the names the pod asks for."""
    served = facts.served()
    return [served[name] for name in requested_names(pod) if name in served]


def pod_refusal(facts: DraFacts, pod: Mapping[str, Any]) -> str:
    """Why /filter refuses the pod ('' when it does not): it asks for a name a DeviceClass serves by DRA."""
    found = pod_collisions(facts, pod)
    if not found:
        return ""
    named = "; ".join(f"{c.resource} is served by DRA DeviceClass {', '.join(c.classes)}" for c in found)
    return (
        f"hami-scheduler: {named}: kube-scheduler would also allocate it from ResourceSlices, so the same "
        "GPU could be given twice; remove extendedResourceName from the DeviceClass or request the device "
        "through a ResourceClaim (docs/compatibility.md, DRA side by side)"
    )


def pod_warning(facts: DraFacts, pod: Mapping[str, Any]) -> str:
    """The webhook's warning for an admitted pod asking for a DRA-served name ('' when none)."""
    found = pod_collisions(facts, pod)
    if not found:
        return ""
    named = ", ".join(f"{c.resource} (DeviceClass {', '.join(c.classes)})" for c in found)
    return (
        f"hami-scheduler: {named} is also served by DRA; hami-scheduler will not place this pod while "
        "the DeviceClass maps it (docs/compatibility.md, DRA side by side)"
    )


def node_refusal(overlap: Overlap) -> str:
    """The per-node reason /filter gives for a node whose GPUs are also published as DRA devices."""
    return (
        f"hami-scheduler: node {overlap.node} also publishes {overlap.devices} devices through DRA driver "
        f"{', '.join(overlap.drivers)}; refused for device-plugin GPUs so no GPU is counted twice"
    )
