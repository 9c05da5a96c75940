"""The AMD vendor (reference vendors §2.11, quirks §3.11): HAMi's `AMDDevices`.

Devices come from `hami.io/node-amd-register` (JSON: `devmem` MiB, `devcore` the card's compute units (CUs),
`type` the product name such as `AMD Instinct MI300X VF`); a node is healthy while its capacity of
`amd.com/gpu` is above 0; pods take the shared node lock. Requests (limits only): a count, memory in MiB
(0: the whole card) and cores as a percentage 1..100 (default 100). Fit turns the percentage into CUs of the
candidate card (`max(CUs x percent / 100, 1)`) and records memory and CUs; the allocation's device type is
the product name (§3.11 #2, kept: AMD's plugin and reports read it). Selectors: `amd.com/use-gputype` /
`nouse-gputype` (case-insensitive substring of the product name), `amd.com/use-gpu-uuid` / `nouse-gpu-uuid`.

Differences (docs/compatibility.md): out-of-range values are refused instead of dropping the request; a
container asking only `amd.com/gpumem` or `amd.com/gpucores` is refused by the webhook (HAMi sends it to
the scheduler with no request at all, so it lands anywhere, §3.11 #4); a product name containing an
annotation separator makes the node's registration invalid (it would corrupt the pod's allocation); an
unhealthy node keeps its register annotation (HAMi deletes it, §3.11 #3).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from app.core import codec, health, quantity
from app.core import reasons as r
from app.core.health import Health, Reported
from app.core.model import ContainerDevice, DeviceRequest, DeviceUsage, PodSingleDevice
from app.core.score import i32
from app.core.vendor import (
    AdmissionError,
    AnnotationContext,
    Discovery,
    FitContext,
    FitOutcome,
    NodeView,
    Reads,
)
from app.devices.common import requests, slots, template
from app.devices.common.base import NamedResources, device_lists
from app.devices.common.config import SectionNames, parse_names
from app.devices.common.nodes import capacity_count
from app.devices.common.registered import Keys, Registered, register_devices
from app.devices.common.selectors import type_allowed

VENDOR = "AMD"
REGISTER = "hami.io/node-amd-register"
TO_ALLOCATE = "hami.io/amd-devices-to-allocate"
ALLOCATED = "hami.io/amd-devices-allocated"
KEYS = Keys(VENDOR, REGISTER, "", TO_ALLOCATE, ALLOCATED)  # no handshake (§1.10: capacity health)
USE_TYPE, NOUSE_TYPE = "amd.com/use-gputype", "amd.com/nouse-gputype"
USE_UUID, NOUSE_UUID = "amd.com/use-gpu-uuid", "amd.com/nouse-gpu-uuid"
SEPARATORS = (",", ":", ";")
INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class AmdConfig(SectionNames):
    """The `amd:` section (chart defaults, vendors §1.3)."""

    resource_count_name: str = "amd.com/gpu"
    resource_memory_name: str = "amd.com/gpumem"
    resource_core_name: str = "amd.com/gpucores"


def parse_amd_config(value: Any) -> AmdConfig:
    return parse_names(value, "amd", AmdConfig())


def _type_check(annotations: Mapping[str, str], device: DeviceUsage) -> bool:
    return type_allowed(annotations, USE_TYPE, NOUSE_TYPE, device.type)


RULES = slots.SlotRules(VENDOR, USE_UUID, NOUSE_UUID, type_check=_type_check)


def compute_units(device: DeviceUsage, percent: int, memreq: int) -> int | None:
    """The CUs a request takes on `device` (HAMi's Fit): a percentage of the card's CUs, at least one;
    without one, the whole card when the whole memory is taken. None: the card has no CUs to give."""
    if percent > 0:
        if device.totalcore <= 0:
            return None
        return min(max(template.go_div(i32(device.totalcore * percent), 100), 1), device.totalcore)
    if 0 < device.totalmem <= memreq:
        return device.totalcore
    return 0


@dataclass(frozen=True, slots=True)
class Amd(NamedResources, Registered):
    PLUGIN: ClassVar[str] = "AMD's device plugin (HAMi protocol)"
    config: AmdConfig = field(default_factory=AmdConfig)

    @property
    def keys(self) -> Keys:
        return KEYS

    @property
    def memory_factor(self) -> int:
        return 0

    @property
    def reads(self) -> Reads:
        return Reads(capacity=(self.config.resource_count_name,))

    def discover(self, node: NodeView) -> Discovery:
        """HAMi `GetNodeDevices` (§2.11): the JSON array; empty is `no gpu found on node`."""
        devices = register_devices(node, KEYS)
        for device in devices:
            if any(sep in device.type for sep in SEPARATORS):
                raise codec.CodecError(
                    f"device {device.id}: type {device.type!r} contains an annotation separator (, : ;)"
                )
        return Discovery(devices)

    def health(self, node: NodeView, reported: Reported, now: datetime) -> Health:
        """§1.10: healthy while `capacity[amd.com/gpu] > 0` (always, when no count name is configured)."""
        count = self.config.resource_count_name
        if not count:
            return health.ALWAYS_HEALTHY
        return health.capacity_health(capacity_count(node, count), f"capacity {count}")

    def container_request(self, container: Mapping[str, Any]) -> DeviceRequest | None:
        """§2.11 GenerateResourceRequests, limits only: memory MiB (0: whole card), cores percent 1..100."""
        c = self.config
        nums = requests.count(container, c.resource_count_name, limits_only=True)
        if nums is None:
            return None
        memory = requests.integer(container, c.resource_memory_name, INT32_MAX, "MiB", limits_only=True)
        cores = requests.integer(container, c.resource_core_name, 100, "percent", limits_only=True, low=1)
        return DeviceRequest(nums, VENDOR, memory or 0, 0, 100 if cores is None else cores)

    def memory_text(self, amount: int) -> str:
        return f"{amount} MiB"

    def cores_text(self, amount: int) -> str:
        """`app.core.units.Units`: an allocation records compute units (a request asks percent)."""
        return f"{amount} CUs"

    def request_cores_text(self, amount: int) -> str:
        return f"{amount}%"

    def fit(self, devices: Sequence[DeviceUsage], request: DeviceRequest, ctx: FitContext) -> FitOutcome:
        """§2.11 Fit: the common checks, then memory (the whole card when none is asked), then CUs."""

        def check(device: DeviceUsage) -> str | ContainerDevice:
            memreq = request.memreq
            if memreq <= 0 < device.totalmem:
                memreq = device.totalmem
            if device.totalmem - device.usedmem < memreq:
                return r.CARD_INSUFFICIENT_MEMORY
            units = compute_units(device, request.coresreq, memreq)
            if units is None or device.totalcore - device.usedcores < units:
                return r.CARD_INSUFFICIENT_CORE
            kind = device.type or VENDOR  # an empty type would not decode (HAMi falls back likewise)
            return ContainerDevice(device.id, kind, memreq, units, idx=device.index)

        found = slots.run(devices, request, ctx, RULES, check)
        if found.done:
            return FitOutcome(True, tuple(found.chosen))
        return template.failure(found, len(devices))

    def pod_annotations(
        self, devices: PodSingleDevice, ctx: AnnotationContext | None = None
    ) -> dict[str, str]:
        return device_lists(devices, TO_ALLOCATE, ALLOCATED)

    def mutate_container(self, container: dict[str, Any], pod: dict[str, Any]) -> bool:
        """§2.11 MutateAdmission: no mutation; with the count, a core limit must be a percentage 1..100.
        Memory or cores without the count route the pod to us with no request, as in HAMi (§3.11 #4); the
        webhook says they are ignored (app.core.notes)."""
        c = self.config
        count = requests.lookup(container, c.resource_count_name, limits_only=True)
        if count is not None:
            cores = requests.lookup(container, c.resource_core_name, limits_only=True)
            if cores is not None and quantity_percent(cores) is None:
                raise AdmissionError(
                    f"{c.resource_core_name} must be an integer percentage between 1 and 100"
                )
            return True
        named = (c.resource_memory_name, c.resource_core_name)
        return any(requests.lookup(container, name, limits_only=True) is not None for name in named if name)


def quantity_percent(value: Any) -> int | None:
    """An integer quantity in 1..100, else None (HAMi `AsInt64` and the range check)."""
    number = quantity.as_int64(value)
    return number if number is not None and 1 <= number <= 100 else None
