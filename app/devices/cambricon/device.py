"""The Cambricon MLU vendor (reference vendors §2.3, quirks §3.3): HAMi's `CambriconDevices`.

Devices are derived from node capacity, not registered: the dsmlu device plugin advertises the total of
virtual cores (`cambricon.com/mlu.smlu.vcore`, 100 per card) and of virtual memory (256 MiB units), and
HAMi makes `vcore / 100` identical cards `<node>-cambricon-mlu-<i>` sharing the memory equally. Health is
always good. Fit is the template with the namespace quota per candidate (memory in 256 MiB units), and the
filter writes `CAMBRICON_DSMLU_ASSIGNED` / `CAMBRICON_DSMLU_PROFILE` (index, cores, memory units of the
first device) for the dsmlu plugin. Bind takes Cambricon's own node lock `cambricon.com/dsmlu.lock`: a bare
RFC3339 time, two minutes, not re-entrant (§2.3 Lock).

Differences (docs/compatibility.md): a node whose vcore capacity is 0 simply has no MLU (HAMi: an error for
the vendor); a negative core or out-of-range memory is refused instead of accepted or dropped (#4); our
release of the lock deletes only the value this bind wrote, never another pod's lock (#2).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from app.core.model import DeviceRequest, DeviceUsage, PodSingleDevice
from app.core.vendor import (
    ALLOCATION,
    FLAG,
    AnnotationContext,
    Discovery,
    FitContext,
    FitOutcome,
    LockSpec,
    NodeView,
    PodKey,
)
from app.devices.common import requests, template
from app.devices.common.base import device_lists
from app.devices.common.capacity import CapacityDevices
from app.devices.common.config import SectionNames, parse_names
from app.devices.common.placement import TemplatePlacement
from app.devices.common.podkeys import hami_lists

VENDOR = "MLU"
MEMORY_FACTOR = 256  # one vmemory unit is 256 MiB
TO_ALLOCATE = "hami.io/cambricon-mlu-devices-to-allocate"
ALLOCATED = "hami.io/cambricon-mlu-devices-allocated"
USE_UUID, NOUSE_UUID = "cambricon.com/use-gpuuuid", "cambricon.com/nouse-gpuuuid"
ASSIGNED = "CAMBRICON_DSMLU_ASSIGNED"
PROFILE = "CAMBRICON_DSMLU_PROFILE"
LOCK = LockSpec("cambricon.com/dsmlu.lock", owned=False, expire=timedelta(minutes=2))
INT32_MAX = 2**31 - 1
RULES = template.Rules(VENDOR, USE_UUID, NOUSE_UUID, quota=True)


@dataclass(frozen=True, slots=True)
class CambriconConfig(SectionNames):
    """The `cambricon:` section (chart defaults, vendors §1.3)."""

    resource_count_name: str = "cambricon.com/vmlu"
    resource_memory_name: str = "cambricon.com/mlu.smlu.vmemory"
    resource_core_name: str = "cambricon.com/mlu.smlu.vcore"


def parse_cambricon_config(value: Any) -> CambriconConfig:
    return parse_names(value, "cambricon", CambriconConfig())


@dataclass(frozen=True, slots=True)
class Cambricon(TemplatePlacement, CapacityDevices):
    config: CambriconConfig = field(default_factory=CambriconConfig)

    @property
    def key(self) -> str:
        return VENDOR

    @property
    def memory_factor(self) -> int:
        return MEMORY_FACTOR

    @property
    def allocated_annotation(self) -> str:
        return ALLOCATED

    @property
    def to_allocate_annotation(self) -> str:
        return TO_ALLOCATE

    @property
    def lock(self) -> LockSpec:
        return LOCK

    @property
    def pod_keys(self) -> tuple[PodKey, ...]:
        plugin = "Cambricon's dsmlu device plugin"
        return (
            *hami_lists(TO_ALLOCATE, ALLOCATED, plugin),
            PodKey(PROFILE, ALLOCATION),  # <card>_<cores>_<memory units>: what the plugin carves
            PodKey(ASSIGNED, FLAG, plugin=plugin),
        )

    def discover(self, node: NodeView) -> Discovery:
        """HAMi `GetNodeDevices` (§2.3): `vcore / 100` cards, `vmemory x 256 x 100 / vcore` MiB each."""
        return self.derive(
            node, cores_per_device=100, unit_mib=MEMORY_FACTOR, word="cambricon-mlu", count=100, devcore=100
        )

    def container_request(self, container: Mapping[str, Any]) -> DeviceRequest | None:
        """HAMi `GenerateResourceRequests` (§2.3): memory in 256 MiB units, cores default 100."""
        c = self.config
        nums = requests.count(container, c.resource_count_name)
        if nums is None:
            return None
        units = requests.integer(
            container, c.resource_memory_name, INT32_MAX // MEMORY_FACTOR, "vmemory units"
        )
        cores = requests.integer(container, c.resource_core_name, INT32_MAX, "vcores")
        memory = (units or 0) * MEMORY_FACTOR
        return DeviceRequest(nums, VENDOR, memory, 100 if memory == 0 else 0, 100 if cores is None else cores)

    def fit(self, devices: Sequence[DeviceUsage], request: DeviceRequest, ctx: FitContext) -> FitOutcome:
        return template.fit(devices, request, ctx, RULES)

    def pod_annotations(
        self, devices: PodSingleDevice, ctx: AnnotationContext | None = None
    ) -> dict[str, str]:
        """§2.3 PatchAnnotations: the profile describes the first device of the first non-empty container
        (the dsmlu plugin reads one device, quirk #3, kept)."""
        result = device_lists(devices, TO_ALLOCATE, ALLOCATED)
        if not result:
            return result
        first = next(group[0] for group in devices if group)
        return {
            ASSIGNED: "false",
            PROFILE: f"{first.idx}_{first.usedcores}_{first.usedmem // MEMORY_FACTOR}",
            **result,
        }

    def mutate_container(self, container: dict[str, Any], pod: dict[str, Any]) -> bool:
        """No mutation; the container is Cambricon's when `limits` names the count resource."""
        return requests.lookup(container, self.config.resource_count_name, limits_only=True) is not None
