"""The vendors' answers to the bind-time re-check (`app.core.vendor.Placement`, `app.core.recheck`) that
several vendors share: the device as their Fit would see it with only the other pods on it, and the
template Fit's rules beyond capacity.

A pod's `DeviceUse` of a device is its containers' sum (`app.core.usage.collapse`), so a rule about one task
is read off the sum only where the sum tells it exactly: a pod holds a whole (100-core) task on a 100-core
device only as its single task there (Fit refuses any second task next to it, the pod's own included), and
holds only 0-core tasks exactly when its cores are 0.
"""

from __future__ import annotations

from app.core.mig import MIG_MODE
from app.core.model import DeviceInfo, DeviceUsage, DeviceUse
from app.core.recheck import capacity_misfit

WHOLE = 100  # cores of a task that takes a 100-core device alone (the template's exclusive task)


def working(device: DeviceInfo, others: DeviceUse) -> DeviceUsage:
    """`device` as a Fit sees it with the uses `others` on it (healthy: health is not re-checked)."""
    return DeviceUsage(
        id=device.id,
        index=device.index,
        used=others.slots,
        count=device.count,
        usedmem=others.mem,
        totalmem=device.devmem,
        totalcore=device.devcore,
        usedcores=others.cores,
        mode=device.mode,
        numa=device.numa,
        type=device.type,
        health=True,
        mig_profiles=device.mig_profiles,
        mig_in_use=[s.placement for s in others.mig],
        vendor=device.vendor,
        custom=device.custom,
        tags=others.tags,
    )


def exclusive_misfit(device: DeviceUsage, own: DeviceUse) -> str:
    """The template Fit's rules after capacity (vendors §1.8 steps 12-13) for `own` on the working copy
    `device`: a whole task on a 100-core device only where nothing else is, and no 0-core task where every
    core is taken; "" when neither is broken."""
    if device.totalcore == WHOLE and own.cores == WHOLE and own.slots == 1 and device.used > 0:
        return f"{device.id} is shared by another pod, where this pod's task takes it whole"
    if device.totalcore != 0 and device.usedcores == device.totalcore and own.cores == 0:
        return f"{device.id} has every core taken by other pods, where this pod's task takes none"
    return ""


def template_misfit(device: DeviceInfo, others: DeviceUse, own: DeviceUse) -> str:
    """Capacity (and MIG slices) as the core checks them, then the template's exclusive and exhausted-compute
    rules (NVIDIA, Hygon, Cambricon, Iluvatar, Metax GPU, Moore Threads)."""
    return capacity_misfit(device, others, own) or (
        "" if device.mode == MIG_MODE else exclusive_misfit(working(device, others), own)
    )


class TemplatePlacement:
    """Mixin: the `Placement` of a vendor whose Fit is HAMi's template (or NVIDIA's, its model)."""

    __slots__ = ()

    def placement_misfit(self, device: DeviceInfo, others: DeviceUse, own: DeviceUse) -> str:
        return template_misfit(device, others, own)
