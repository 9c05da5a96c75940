"""How much of each device a pod really holds, and the per-decision working copy of a node.

A pod's allocation annotation lists devices per container, but init containers run one after another and
before the app containers, so the capacity a pod holds on a device is the larger of its init peak and the
sum over its app containers (HAMi `CollapseInitContainerUsage`, reference §9.3). Once the init containers
have finished, only the app sum remains (`AppContainersOnlyDeviceUsage`). The ledger stores the collapsed
form; node usage is the sum of collapsed reservations, matched to devices by UUID (§4.2), except that the
core bitmasks of a vendor recording them (AWS Neuron) are ORed, never added (`DeviceUse.masks`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from app.core import mig
from app.core.model import (
    ContainerDevice,
    ContainerDevices,
    DeviceUsage,
    DeviceUse,
    NodeDevices,
    NodeUse,
    PodDevices,
    PodSingleDevice,
)

_NO_USE = DeviceUse()


def _slots(device: ContainerDevice) -> int:
    return max(device.slots, 1)


def collapse(containers: PodSingleDevice, init_count: int, *, include_init: bool = True) -> ContainerDevices:
    """One vendor's per-container devices -> one entry per device UUID (sorted by UUID).

    Init containers contribute their per-dimension peak with one slot; app containers (index >= init_count,
    including the decoder's trailing empty group) contribute their sum with one slot per occurrence.
    """
    init_peak: dict[str, ContainerDevice] = {}
    app_sum: dict[str, ContainerDevice] = {}
    for position, devices in enumerate(containers):
        is_init = position < init_count
        if is_init and not include_init:
            continue
        for d in devices:
            if is_init:
                seen = init_peak.get(d.uuid)
                init_peak[d.uuid] = ContainerDevice(
                    d.uuid,
                    seen.type if seen else d.type,
                    max(d.usedmem, seen.usedmem) if seen else d.usedmem,
                    max(d.usedcores, seen.usedcores) if seen else d.usedcores,
                    slots=1,
                )
            else:
                seen = app_sum.get(d.uuid)
                app_sum[d.uuid] = ContainerDevice(
                    d.uuid,
                    seen.type if seen else d.type,
                    d.usedmem + (seen.usedmem if seen else 0),
                    d.usedcores + (seen.usedcores if seen else 0),
                    slots=_slots(d) + (seen.slots if seen else 0),
                )
    result = []
    for uuid in sorted(init_peak.keys() | app_sum.keys()):
        peak, total = init_peak.get(uuid), app_sum.get(uuid)
        first = peak or total
        assert first is not None
        result.append(
            ContainerDevice(
                uuid,
                first.type,
                max(peak.usedmem if peak else 0, total.usedmem if total else 0),
                max(peak.usedcores if peak else 0, total.usedcores if total else 0),
                slots=max(peak.slots if peak else 0, total.slots if total else 0, 1),
            )
        )
    return tuple(result)


def collapse_pod(devices: PodDevices, init_count: int, *, include_init: bool = True) -> PodDevices:
    """Collapse every vendor; each vendor ends with exactly one container group (§9.3)."""
    return {
        vendor: (collapse(containers, init_count, include_init=include_init),)
        for vendor, containers in devices.items()
    }


# vendor key -> the tags (`Vendor.usage_tags`) a pod puts on every device it holds of that vendor
VendorTags = Mapping[str, tuple[str, ...]]
# vendor key -> the core bits an allocated device takes, for vendors recording core bitmasks
# (`app.core.vendor.core_masks`)
CoreMaskOf = Mapping[str, Callable[[ContainerDevice], int]]


def device_uses(
    collapsed: PodDevices,
    slices: Sequence[mig.MigAllocation] = (),
    tags: VendorTags | None = None,
    masks: CoreMaskOf | None = None,
) -> dict[str, DeviceUse]:
    """UUID -> capacity taken by one (collapsed) pod allocation, with the pod's MIG slices (`mig.attach`),
    its vendor tags (one set per device it holds) and, for a vendor in `masks`, its core bitmask (one pod's
    masks on a device are disjoint, so their collapsed sum is their OR)."""
    uses: dict[str, DeviceUse] = {}
    for vendor, containers in collapsed.items():
        labels = tuple(sorted(tags.get(vendor, ()))) if tags else ()
        mask_of = masks.get(vendor) if masks else None
        for devices in containers:
            for d in devices:
                if mask_of is None:
                    use = DeviceUse(_slots(d), d.usedmem, d.usedcores, tags=labels)
                else:
                    bits = mask_of(d)
                    use = DeviceUse(_slots(d), d.usedmem, bits, tags=labels, masks=(bits,) if bits else ())
                uses[d.uuid] = uses[d.uuid].plus(use) if d.uuid in uses else use
    return mig.attach(uses, slices) if slices else uses


def allocation_uses(
    devices: PodDevices, init_count: int, tags: VendorTags | None = None, masks: CoreMaskOf | None = None
) -> dict[str, DeviceUse]:
    """What a new allocation holds: exactly what `reservations.reservation_from_pod` reads back from the
    annotations written for it (the device lists, the MIG allocations, the pod's vendor tags and the core
    masks of the vendors recording them)."""
    slices = [entry for containers in devices.values() for entry in mig.allocations(containers)]
    return device_uses(collapse_pod(devices, init_count), slices, tags, masks)


def sum_uses(reservations: Iterable[Mapping[str, DeviceUse]]) -> dict[str, DeviceUse]:
    """Add up per-device uses of many reservations on one node."""
    total: dict[str, DeviceUse] = {}
    for uses in reservations:
        for uuid, use in uses.items():
            total[uuid] = total[uuid].plus(use) if uuid in total else use
    return total


def same_use(a: NodeUse, b: NodeUse) -> bool:
    """Equal as `working_devices` sees them: a device absent from one and zero in the other is the same."""
    zero = DeviceUse()
    return {k: v for k, v in a.items() if v != zero} == {k: v for k, v in b.items() if v != zero}


def working_devices(node: NodeDevices, use: NodeUse) -> list[DeviceUsage]:
    """The node's devices in registration order with existing usage applied (HAMi getNodesUsage), MIG
    slices in use and the MIG health rules included (`app.core.mig`)."""
    devices = []
    stray = mig.stray_slices(node, use)
    for d in node.devices:
        taken = use.get(d.id, _NO_USE)
        devices.append(
            DeviceUsage(
                id=d.id,
                index=d.index,
                used=taken.slots,
                count=d.count,
                usedmem=taken.mem,
                totalmem=d.devmem,
                totalcore=d.devcore,
                usedcores=taken.cores,
                mode=d.mode,
                numa=d.numa,
                type=d.type,
                health=mig.healthy(d, taken, stray),
                mig_profiles=d.mig_profiles,
                mig_in_use=[s.placement for s in taken.mig],
                vendor=d.vendor,
                custom=d.custom,
                tags=taken.tags,
            )
        )
    return devices
