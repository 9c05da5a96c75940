"""Kunlunxin vXPU shares (reference vendors §2.8 `XPU`, quirks §3.8): HAMi's `KunlunVDevices`.

Devices come from `hami.io/node-register-xpu` (JSON DeviceInfo); health is the generic handshake on
`hami.io/node-handshake-xpu`; pods take the shared node lock. Memory is rounded up to a template (24576,
49152 or 98304 MiB) by the webhook and by the request, with cores in proportion; a device is shared only by
vXPUs of one size (`Usedmem / Used == Memreq`, §3.8 #8, kept; re-checked at bind: `placement_misfit`).
Placement uses the interconnect groups of whole XPUs (`topology`); the selectors are
`hami.io/use-xpu-uuid`/`no-use-xpu-uuid` and `baidu.com/use-gpuuuid`/`nouse-gpuuuid`. The filter writes the
to-allocate and allocated lists.

Differences (docs/compatibility.md): placement by index, not position; a device takes no more vXPUs than
its registered `count` (HAMi does not check it); a negative count or memory, or a non-integer memory, is
refused (HAMi: a zero request, or the smallest template for a negative memory).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from app.core import quantity
from app.core.model import ContainerDevice, DeviceInfo, DeviceRequest, DeviceUsage, DeviceUse, PodSingleDevice
from app.core.policy import MUTEX, policy_contains
from app.core.recheck import capacity_misfit
from app.core.vendor import (
    AnnotationContext,
    Discovery,
    FitContext,
    FitOutcome,
    NodeView,
    ResourceNames,
)
from app.devices.common import placement, requests
from app.devices.common.base import device_lists
from app.devices.common.registered import Keys, Registered, register_devices
from app.devices.kunlun import topology
from app.devices.kunlun.config import KunlunConfig
from app.devices.kunlun.xpu import topology_failure, uuid_fits

VENDOR = "XPU"
REGISTER = "hami.io/node-register-xpu"
HANDSHAKE = "hami.io/node-handshake-xpu"
TO_ALLOCATE = "hami.io/xpu-devices-to-allocate"
ALLOCATED = "hami.io/xpu-devices-allocated"
KEYS = Keys(VENDOR, REGISTER, HANDSHAKE, TO_ALLOCATE, ALLOCATED)
TEMPLATES = (24576, 49152)
MAX_MEMORY = 98304
INT32_MAX = 2**31 - 1


def trim_memory(memory: int) -> int:
    """The smallest template holding `memory` MiB (`trimMemory`)."""
    return next((size for size in TEMPLATES if memory <= size), MAX_MEMORY)


def fits_vxpu(device: DeviceUsage, request: DeviceRequest) -> bool:
    """HAMi `FitVXPU` (with health): room for the template, and only vXPUs of this size on the device; and
    a free slot (HAMi does not check `Count`, so a device could get more vXPUs than its plugin offers)."""
    if not device.health or device.used >= device.count or request.memreq + device.usedmem > device.totalmem:
        return False
    return device.used == 0 or device.usedmem // device.used == request.memreq


@dataclass(frozen=True, slots=True)
class KunlunVxpu(Registered):
    PLUGIN: ClassVar[str] = "HAMi's Kunlunxin vXPU device plugin"
    config: KunlunConfig = field(default_factory=KunlunConfig)

    @property
    def keys(self) -> Keys:
        return KEYS

    @property
    def resources(self) -> ResourceNames:
        c = self.config
        return ResourceNames(c.resource_vcount_name, c.resource_vmemory_name)

    @property
    def memory_factor(self) -> int:
        return 0

    def discover(self, node: NodeView) -> Discovery:
        return Discovery(register_devices(node, KEYS, empty="no device found on node"))

    def container_request(self, container: Mapping[str, Any]) -> DeviceRequest | None:
        """§2.8: the memory template (limits, else requests) and cores in proportion; no memory: the whole
        device (98304 MiB, 100 cores, 100%)."""
        c = self.config
        nums = requests.count(container, c.resource_vcount_name)
        if nums is None:
            return None
        memory = requests.integer(container, c.resource_vmemory_name, INT32_MAX, "MiB")
        if memory is None:
            return DeviceRequest(nums, VENDOR, MAX_MEMORY, 100, 100)
        size = trim_memory(memory)
        return DeviceRequest(nums, VENDOR, size, 0, size * 100 // MAX_MEMORY)

    def fit(self, devices: Sequence[DeviceUsage], request: DeviceRequest, ctx: FitContext) -> FitOutcome:
        """§2.8 vXPU Fit: devices that pass both selector pairs and `FitVXPU` (and are idle under the
        `mutex` policy), placed by `topology.select`."""
        notes = ctx.pod_annotations
        mutex = policy_contains(ctx.policy, MUTEX)

        def fits(d: DeviceUsage) -> bool:
            return uuid_fits(notes, d) and fits_vxpu(d, request) and not (mutex and d.used > 0)

        chosen = topology.select(devices, request.nums, fits)
        if chosen:
            return FitOutcome(
                True,
                tuple(
                    ContainerDevice(d.id, VENDOR, request.memreq, request.coresreq, idx=d.index)
                    for d in chosen
                ),
            )
        conflicts = 0
        if mutex:
            conflicts = sum(
                1 for d in devices if d.used > 0 and uuid_fits(notes, d) and fits_vxpu(d, request)
            )
        return topology_failure(devices, notes, conflicts)

    def placement_misfit(self, device: DeviceInfo, others: DeviceUse, own: DeviceUse) -> str:
        """`Placement`: capacity, then `FitVXPU` for each of the pod's vXPUs on the device in turn (one
        template size per device)."""
        why = capacity_misfit(device, others, own)
        if why or own.slots <= 0:
            return why
        size = own.mem // own.slots
        working = placement.working(device, others)
        request = DeviceRequest(1, VENDOR, size)
        for _ in range(own.slots):
            if not fits_vxpu(working, request):
                held = others.mem // max(others.slots, 1)
                return f"{device.id} holds vXPUs of {held} MiB, where this pod's take {size} MiB"
            working.used += 1
            working.usedmem += size
        return ""

    def pod_annotations(
        self, devices: PodSingleDevice, ctx: AnnotationContext | None = None
    ) -> dict[str, str]:
        return device_lists(devices, TO_ALLOCATE, ALLOCATED)

    def mutate_container(self, container: dict[str, Any], pod: dict[str, Any]) -> bool:
        """§2.8 MutateAdmission: a vXPU memory limit is replaced, in limits and requests, by its template."""
        c = self.config
        if requests.lookup(container, c.resource_vcount_name, limits_only=True) is None:
            return False
        memory = requests.lookup(container, c.resource_vmemory_name, limits_only=True)
        if memory is not None:
            size = str(trim_memory(quantity.ceil_value(memory) or 0))
            resources = container["resources"]
            resources["limits"][c.resource_vmemory_name] = size
            if not isinstance(resources.get("requests"), dict):
                resources["requests"] = {}
            resources["requests"][c.resource_vmemory_name] = size
        return True
