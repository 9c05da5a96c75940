"""A scheduled pod's annotations -> the capacity it holds (HAMi onAddPod/onUpdatePod, reference §9.2–9.3).

The API server is the truth: a pod with `hami.io/vgpu-node` and an allocation annotation holds devices
until it is deleted or reaches Succeeded/Failed (terminating pods keep theirs, #1368). This module turns
such a pod into a `Reservation` — used by the `explain` command, by the registration worker's ledger
reconciliation and by rebuilds — so all of them count usage identically. The MIG slices it holds come from
`hami.io/vgpu-mig-allocations` (`app.core.mig`), runtime identity included once the device plugin wrote it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core import mig, pods
from app.core.adoption import scheduler_of
from app.core.codec import CodecError, decode_pod_single_device
from app.core.decision import ASSIGNED_NODE
from app.core.model import DeviceUse, NodeUse, PodDevices
from app.core.quota import pod_quota_use
from app.core.usage import VendorTags, collapse_pod, device_uses, sum_uses
from app.core.vendor import Vendor, core_masks


@dataclass(frozen=True, slots=True)
class Reservation:
    uid: str
    namespace: str
    name: str
    node: str
    devices: PodDevices  # collapsed: one group per vendor
    uses: Mapping[str, DeviceUse]  # device UUID -> capacity, MIG slices included
    quota_use: Mapping[str, int]  # quota resource -> amount
    init_released: bool = False


def init_containers_done(pod: Mapping[str, Any]) -> bool:
    """All init containers terminated with exit code 0 (an empty status list counts as not done)."""
    status = pod.get("status")
    statuses = status.get("initContainerStatuses") if isinstance(status, Mapping) else None
    if not isinstance(statuses, list) or not statuses:
        return False
    for entry in statuses:
        state = entry.get("state") if isinstance(entry, Mapping) else None
        terminated = state.get("terminated") if isinstance(state, Mapping) else None
        if not isinstance(terminated, Mapping) or terminated.get("exitCode") != 0:
            return False
    return True


def holds_devices(pod: Mapping[str, Any]) -> bool:
    """Scheduled by us and not terminal: its annotations count as usage."""
    return bool(pods.annotations_of(pod).get(ASSIGNED_NODE)) and not pods.is_terminated(pod)


def aligned(raw: Mapping[str, Any], containers: int) -> bool:
    """Does every vendor's allocation have a group per container, so that a group's index is its container's?

    Ours always does (one `;`-terminated group per container, init containers first: containers + 1 groups
    once decoded). HAMi's scheduler pads containers without a request under the device model instead of the
    vendor key (reference §12 #1), so a pod HAMi placed with, say, an Istio init container and sidecar before
    its GPU container carries fewer groups: its GPU group sits at index 0, which would read as the init
    container's, and vanish from the usage once the init container finished — a GPU in use that looks free.
    Such allocations are counted conservatively: every group as a regular container (summed), never shrunk.
    """
    return all(len(groups) > containers for groups in raw.values())


def vendor_tags(annotations: Mapping[str, str], vendors: Sequence[Vendor]) -> VendorTags:
    """The tags the pod puts on the devices it holds, per vendor (`Vendor.usage_tags`)."""
    tags = {}
    for vendor in vendors:
        found = vendor.usage_tags(annotations)
        if found:
            tags[vendor.key] = found
    return tags


def reservation_from_pod(
    pod: Mapping[str, Any], vendors: Sequence[Vendor], schedulers: frozenset[str] | None = None
) -> Reservation | None:
    """The pod's reservation, or None when it holds nothing.

    Raises CodecError when an allocation annotation is corrupt (the caller logs the pod and skips it).
    With `schedulers` (ours and the adopted names, `app.core.adoption.Counted.names`), pods assigned to
    any other scheduler never count: a pod cannot grant itself capacity by writing our annotations (HAMi
    #3041).
    """
    if not holds_devices(pod):
        return None
    if schedulers is not None and scheduler_of(pod) not in schedulers:
        return None
    annotations = pods.annotations_of(pod)
    raw: dict[str, Any] = {}
    for vendor in vendors:
        encoded = annotations.get(vendor.allocated_annotation) if vendor.allocated_annotation else None
        if encoded is not None:
            containers = decode_pod_single_device(encoded)
            if containers:
                raw[vendor.key] = containers
    if not raw:
        return None
    init_count = len(pods.init_containers(pod))
    if not aligned(raw, init_count + len(pods.containers(pod))):
        init_count = 0  # indexes say nothing: count every group, for as long as the pod runs
    released = init_count > 0 and init_containers_done(pod)
    collapsed = collapse_pod(raw, init_count, include_init=not released)
    slices = mig.pod_allocations(annotations)  # every entry, init containers' too (as HAMi counts them)
    return Reservation(
        uid=pods.uid(pod),
        namespace=pods.namespace(pod),
        name=pods.name(pod),
        node=annotations[ASSIGNED_NODE],
        devices=collapsed,
        uses=device_uses(collapsed, slices, vendor_tags(annotations, vendors), core_masks(vendors)),
        quota_use=pod_quota_use(collapsed, vendors),
        init_released=released,
    )


def usage_by_node(reservations: Iterable[Reservation]) -> dict[str, NodeUse]:
    by_node: dict[str, list[Mapping[str, DeviceUse]]] = {}
    for reservation in reservations:
        by_node.setdefault(reservation.node, []).append(reservation.uses)
    return {node: sum_uses(uses) for node, uses in by_node.items()}


def quota_used(reservations: Iterable[Reservation]) -> dict[str, dict[str, int]]:
    """namespace -> quota resource -> amount used by all reservations."""
    used: dict[str, dict[str, int]] = {}
    for reservation in reservations:
        namespace = used.setdefault(reservation.namespace, {})
        for name, amount in reservation.quota_use.items():
            namespace[name] = namespace.get(name, 0) + amount
    return used


__all__ = ["CodecError", "Reservation", "quota_used", "reservation_from_pod", "usage_by_node"]
