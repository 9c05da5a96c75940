"""The bind-time re-check: does a pod's allocation still fit next to everything else reserved on its node?

Filter reserves capacity atomically in the ledger, so within one replica nothing is handed out twice. Across
replicas, leader election alone is no fence: a deposed leader's last decisions reach the API server while
the new leader already decides, and the new leader's ledger learns of them only when its informer does.
Bind is the last point before the device plugin hands the devices to the pod, so it re-checks the pod's
allocation (as its annotations say, the API being the truth) against the other reservations of the node in
the binding replica's ledger, in the same transaction that records it there. Two pods that were given the
same devices by two leaders can then not both be bound by the current one: the later bind fails and the
pod is filtered again.

The question is the vendor's: "would your Fit have put this use next to those?", per device the pod holds:
- a device not on the node (by UUID) does not fit;
- a vendor with placement rules beyond capacity answers with its own Fit predicates (`Placement` in
  `app.core.vendor`): AWS Neuron's core bitmasks must not overlap, Kunlunxin vXPU keeps one template size
  per device, Metax sGPU its app classes, QoS and exclusive tasks, the template vendors their exclusive
  (100-core) task and exhausted compute (docs/vendors.md lists them);
- every other vendor gets `capacity_misfit`: on a `mig`-mode device none of the pod's MIG slices may overlap
  a slice another pod holds (between revisits of one GPU only the placements limit its slices, quirk #12);
  on any other device slots, memory and cores summed with the others' stay within `count`, `devmem` and
  `devcore`, exactly what Fit guarantees when it places a pod.

The others are the sum of the node's other reservations with their usage tags (what later Fits read, e.g.
Metax QoS) and core masks kept (`DeviceUse`), so the vendor sees what its Fit would have seen. Only
placement is checked, never health, selectors or the pod's policy (`mutex`): those were the filter's to
decide, and a bind must not fail because, say, a device was cordoned since. HAMi has no such check (it binds
what its one scheduler decided): docs/compatibility.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from app.core.mig import MIG_MODE, overlaps
from app.core.model import DeviceInfo, DeviceUse, NodeDevices, NodeUse
from app.core.vendor import Placement, Vendor

_NO_USE = DeviceUse()


def capacity_misfit(device: DeviceInfo, others: DeviceUse, own: DeviceUse) -> str:
    """The core's re-check of one device: MIG slices that overlap on a `mig`-mode device, else slots, memory
    or cores beyond the device's; "" when `own` fits next to `others`."""
    uuid = device.id
    if device.mode == MIG_MODE:
        for mine in own.mig:
            for theirs in others.mig:
                if overlaps(mine.placement, theirs.placement):
                    return (
                        f"MIG slice {mine.profile}@{mine.placement.start} on {uuid} overlaps "
                        f"{theirs.profile}@{theirs.placement.start} held by another pod"
                    )
        return ""
    total = others.plus(own)
    for dimension, used, capacity in (
        ("slots", total.slots, device.count),
        ("memory", total.mem, device.devmem),
        ("cores", total.cores, device.devcore),
    ):
        if used > capacity:
            return f"{uuid} would hold {used} of {capacity} {dimension}"
    return ""


def misfit(
    node: NodeDevices, others: NodeUse, own: Mapping[str, DeviceUse], vendors: Sequence[Vendor] = ()
) -> str:
    """Why the pod's device uses `own` do not fit next to `others` on `node`; "" when they fit. Each device
    is judged by the vendor that registered it (`DeviceInfo.vendor`) when that vendor is a `Placement`."""
    devices = {device.id: device for device in node.devices}
    placements = {vendor.key: vendor for vendor in vendors if isinstance(vendor, Placement)}
    for uuid, use in sorted(own.items()):
        device = devices.get(uuid)
        if device is None:
            return f"device {uuid} is not registered on node {node.name}"
        taken = others.get(uuid, _NO_USE)
        vendor = placements.get(device.vendor)
        why = vendor.placement_misfit(device, taken, use) if vendor else capacity_misfit(device, taken, use)
        if why:
            return why
    return ""
