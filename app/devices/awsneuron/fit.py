"""AWS Neuron `Fit` (reference vendors §2.10; quirks §3.10): one device by free cores, or a contiguous run of
idle devices.

Invariant: a device's `usedcores` is the OR of the core masks its holders took (usage keeps each holder's
mask and ORs them, `DeviceUse.masks`; within one decision each allocation takes free bits only, so adding
them is ORing them), and `count` is its number of cores (HAMi's `Count`), so no core is ever given twice
and a device never has more holders than cores. The bind-time re-check (`overlap`) refuses a mask that
shares a bit with the other holders', which two leaders deciding without each other could give.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from app.core import reasons as r
from app.core.model import ContainerDevice, DeviceRequest, DeviceUsage, DeviceUse
from app.core.vendor import FitContext, FitOutcome
from app.devices.common import slots
from app.devices.common.selectors import uuid_allowed

VENDOR = "AWSNeuron"
NODE_TYPE = "AWSNodeType"
USE_UUID, NOUSE_UUID = "aws.amazon.com/use-neuron-uuid", "aws.amazon.com/nouse-neuron-uuid"
WHOLE = 100  # `mem_percentage` of a device-count request: every core of the device (HAMi: learned count)
TRAINIUM_RUNS = (1, 4, 8, 16)  # device runs a non-Inferentia node can give (aligned to their size)
CORES = "cores"  # ContainerDevice.custom: the device's cores, for the core ids of the annotations


def popcount(mask: int) -> int:
    """HAMi `countMaskAvailable`: the set bits of a positive mask (0 for a negative one)."""
    return bin(mask).count("1") if mask > 0 else 0


def claim(used: int, need: int, width: int) -> int:
    """The `need` lowest free bits among `width` (HAMi `addCoreUsage`; for 2-core devices exactly its
    `3 - prior`), as a mask of the new bits only."""
    mask = 0
    for bit in range(width):
        if need == 0:
            break
        if not used & (1 << bit):
            mask |= 1 << bit
            need -= 1
    return mask


def overlap(uuid: str, others: DeviceUse, own: DeviceUse) -> str:
    """Why `own`'s cores cannot be next to `others`' on device `uuid` (a shared core bit), or ""."""
    shared = own.cores & others.cores
    if shared:
        bits = ",".join(str(bit) for bit in range(shared.bit_length()) if shared >> bit & 1)
        return f"core {bits} of {uuid} is held by another pod"
    return ""


def cores_of(device: ContainerDevice) -> int:
    """The cores of the allocated device (recorded at Fit; 2 when unknown, every Neuron v2 device)."""
    value = dict(device.custom).get(CORES, "2")
    return int(value) if value.isdigit() else 2


def _taken(device: DeviceUsage, mask: int) -> ContainerDevice:
    return ContainerDevice(device.id, VENDOR, 0, mask, idx=device.index, custom=((CORES, str(device.count)),))


def _neuron_type(annotations: Mapping[str, str], device: DeviceUsage) -> bool:
    return VENDOR in device.type  # HAMi: `strings.Contains(dev.Type, k.Type)`


RULES = slots.SlotRules(VENDOR, USE_UUID, NOUSE_UUID, type_check=_neuron_type)


def one_device(devices: Sequence[DeviceUsage], request: DeviceRequest, ctx: FitContext) -> FitOutcome:
    """One device: from the end, the first that passes health, type, UUID, slots, mutex and free cores
    (no AllocatedCardsInsufficientRequest on failure, as HAMi)."""

    def cores(device: DeviceUsage) -> str | ContainerDevice:
        width = popcount(device.totalcore)
        need = width if request.mem_percentage == WHOLE else request.coresreq
        if width - popcount(device.usedcores) < need:
            return r.CARD_INSUFFICIENT_CORE
        return _taken(device, claim(device.usedcores, need, width))

    found = slots.run(devices, request, ctx, RULES, cores)
    if found.done:
        return FitOutcome(True, tuple(found.chosen))
    return FitOutcome(False, (), r.gen_reason(found.counts, len(devices)))


def _free(device: DeviceUsage | None, ctx: FitContext) -> bool:
    """A device a run may take: present, healthy, allowed, with a slot, and idle."""
    return (
        device is not None
        and device.health
        and uuid_allowed(ctx.pod_annotations, USE_UUID, NOUSE_UUID, device.id)
        and device.count > device.used
        and device.used == 0
    )


def contiguous(devices: Sequence[DeviceUsage], request: DeviceRequest, ctx: FitContext) -> FitOutcome:
    """Several devices (HAMi `graphSelect`): the first run of `nums` consecutive device indexes that are all
    free; on Inferentia (instance type containing `inf`/`Inf`) a run may start anywhere, elsewhere only
    runs of 1, 4, 8 or 16 aligned to their size. Each device is taken whole (all its cores)."""
    nums = request.nums
    failed = FitOutcome(False, (), r.gen_reason({r.NUMA_NOT_FIT: 1}, len(devices)))
    if not devices:
        return failed
    node_type = devices[0].custom.get(NODE_TYPE)
    node_type = node_type if isinstance(node_type, str) else ""
    inferentia = "inf" in node_type or "Inf" in node_type
    if not inferentia and nums not in TRAINIUM_RUNS:
        return failed
    by_index = {d.index: d for d in devices}
    step = 1 if inferentia else nums
    last = max(by_index)
    for start in range(0, last - nums + 2, step):
        run = [by_index.get(index) for index in range(start, start + nums)]
        if all(_free(d, ctx) for d in run):
            return FitOutcome(True, tuple(_taken(d, d.totalcore) for d in run if d is not None))
    return failed
