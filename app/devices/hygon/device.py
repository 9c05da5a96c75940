"""The Hygon DCU vendor (vendors §2.2, quirks §3.2): HAMi's `DCUDevices`, byte for byte.

Devices come from `hami.io/node-dcu-register` in the legacy colon format; health is the generic handshake
on `hami.io/node-handshake-dcu`; Fit is the template with `hygon.com/use-dcutype`/`nouse-dcutype` on the
device type and `hygon.com/use-gpuuuid`/`nouse-gpuuuid`; pods take the shared node lock. Differences: a DCU
request sees every device the DCU annotation registers, whatever its type string (HAMi needs the type to
contain `DCU`, quirk #2), and a non-integer memory is refused instead of meaning the whole card (#1).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from app.core.model import DeviceRequest, DeviceUsage, PodSingleDevice
from app.core.vendor import (
    AnnotationContext,
    Discovery,
    FitContext,
    FitOutcome,
    NodeView,
)
from app.devices.common import requests, template
from app.devices.common.base import NamedResources, device_lists
from app.devices.common.config import SectionNames, integer, parse_names, section_of
from app.devices.common.placement import TemplatePlacement
from app.devices.common.registered import Keys, Registered, register_devices
from app.devices.common.selectors import type_allowed

VENDOR = "DCU"
REGISTER = "hami.io/node-dcu-register"
HANDSHAKE = "hami.io/node-handshake-dcu"
TO_ALLOCATE = "hami.io/dcu-devices-to-allocate"
ALLOCATED = "hami.io/dcu-devices-allocated"
KEYS = Keys(VENDOR, REGISTER, HANDSHAKE, TO_ALLOCATE, ALLOCATED)
USE_TYPE, NOUSE_TYPE = "hygon.com/use-dcutype", "hygon.com/nouse-dcutype"
USE_UUID, NOUSE_UUID = "hygon.com/use-gpuuuid", "hygon.com/nouse-gpuuuid"
INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class HygonConfig(SectionNames):
    """The `hygon:` section (chart defaults, vendors §1.3)."""

    resource_count_name: str = "hygon.com/dcunum"
    resource_memory_name: str = "hygon.com/dcumem"
    resource_core_name: str = "hygon.com/dcucores"
    memory_factor: int = 1


def parse_hygon_config(value: Any) -> HygonConfig:
    names = parse_names(value, "hygon", HygonConfig())
    factor = integer(section_of(value, "hygon"), "memoryFactor", names.memory_factor, "hygon")
    return dataclasses.replace(names, memory_factor=factor)


def _type_check(annotations: Mapping[str, str], device: DeviceUsage) -> bool:
    return type_allowed(annotations, USE_TYPE, NOUSE_TYPE, device.type)


RULES = template.Rules(VENDOR, USE_UUID, NOUSE_UUID, type_check=_type_check)


@dataclass(frozen=True, slots=True)
class Hygon(TemplatePlacement, NamedResources, Registered):
    PLUGIN: ClassVar[str] = "HAMi's DCU device plugin"
    config: HygonConfig = field(default_factory=HygonConfig)

    @property
    def keys(self) -> Keys:
        return KEYS

    @property
    def memory_factor(self) -> int:
        return self.config.memory_factor

    def discover(self, node: NodeView) -> Discovery:
        """HAMi `GetNodeDevices`: the colon format; `:` alone decodes to nothing (`no gpu found on node`)."""
        return Discovery(register_devices(node, KEYS, legacy=True))

    def container_request(self, container: Mapping[str, Any]) -> DeviceRequest | None:
        """HAMi `GenerateResourceRequests` (§2.2): cores default to 100, memory 0 means the whole card."""
        c = self.config
        nums = requests.count(container, c.resource_count_name)
        if nums is None:
            return None
        factor = max(c.memory_factor, 1)
        memory = requests.integer(container, c.resource_memory_name, INT32_MAX // factor, "MiB") or 0
        cores = requests.integer(container, c.resource_core_name, INT32_MAX, "percent of a DCU")
        memory *= factor
        return DeviceRequest(nums, VENDOR, memory, 100 if memory == 0 else 0, 100 if cores is None else cores)

    def fit(self, devices: Sequence[DeviceUsage], request: DeviceRequest, ctx: FitContext) -> FitOutcome:
        return template.fit(devices, request, ctx, RULES)

    def pod_annotations(
        self, devices: PodSingleDevice, ctx: AnnotationContext | None = None
    ) -> dict[str, str]:
        return device_lists(devices, TO_ALLOCATE, ALLOCATED)

    def mutate_container(self, container: dict[str, Any], pod: dict[str, Any]) -> bool:
        """No mutation; the container is Hygon's when `limits` names the count resource."""
        return requests.lookup(container, self.config.resource_count_name, limits_only=True) is not None
