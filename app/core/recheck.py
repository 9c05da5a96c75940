"""The bind-time re-check: does a pod's allocation still fit next to everything else reserved on its node?

Filter reserves capacity atomically in the ledger, so within one replica nothing is handed out twice. Across
replicas, leader election alone is no fence: a deposed leader's last decisions reach the API server while
the new leader already decides, and the new leader's ledger learns of them only when its informer does.
Bind is the last point before the device plugin hands the devices to the pod, so it re-checks the pod's
allocation (as its annotations say, the API being the truth) against the other reservations of the node in
the binding replica's ledger, in the same transaction that records it there. Two pods that were given the
same capacity by two leaders can then not both be bound by the current one: the later bind fails and the
pod is filtered again.

Only capacity is checked, never health or policy: those were the filter's to decide, and a bind must not
fail because, say, a device was cordoned since. Per device the pod holds:
- a device not on the node (by UUID) does not fit;
- a `mig`-mode device: none of the pod's MIG slices may overlap a slice another pod holds (between revisits
  of one GPU only the placements limit its slices, quirk #12);
- any other device: slots, memory and cores summed with the others' stay within `count`, `devmem` and
  `devcore`, exactly what Fit guarantees when it places a pod.
"""

from __future__ import annotations

from collections.abc import Mapping

from app.core.mig import MIG_MODE, overlaps
from app.core.model import DeviceUse, NodeDevices, NodeUse

_NO_USE = DeviceUse()


def misfit(node: NodeDevices, others: NodeUse, own: Mapping[str, DeviceUse]) -> str:
    """Why the pod's device uses `own` do not fit next to `others` on `node`; "" when they fit."""
    devices = {device.id: device for device in node.devices}
    for uuid, use in sorted(own.items()):
        device = devices.get(uuid)
        if device is None:
            return f"device {uuid} is not registered on node {node.name}"
        taken = others.get(uuid, _NO_USE)
        if device.mode == MIG_MODE:
            for mine in use.mig:
                for theirs in taken.mig:
                    if overlaps(mine.placement, theirs.placement):
                        return (
                            f"MIG slice {mine.profile}@{mine.placement.start} on {uuid} overlaps "
                            f"{theirs.profile}@{theirs.placement.start} held by another pod"
                        )
            continue
        total = taken.plus(use)
        for dimension, used, capacity in (
            ("slots", total.slots, device.count),
            ("memory", total.mem, device.devmem),
            ("cores", total.cores, device.devcore),
        ):
            if used > capacity:
                return f"{uuid} would hold {used} of {capacity} {dimension}"
    return ""
