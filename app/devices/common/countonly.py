"""What HAMi's count-only vendors share (Vastai §2.12, Biren §2.13): devices from a JSON register annotation
with `Devcore` forced to 100, the generic handshake, the shared node lock, requests of whole devices by
count (`{n, <key>, 0, 100, 0}`: no memory or core accounting, sharing bounded by each device's `count`),
to-allocate and allocated keys built from the capitalised vendor key (`hami.io/Vastai-devices-allocated`,
quirks §3.12 #4, kept: the device plugins read them), and a webhook that only recognises the count in
`limits`.

A vendor subclasses `CountOnly` with its `KEYS` and a config carrying `resource_count_name`, and writes its
own `fit` (Biren: the slot loop; Vastai: dies and cards).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from app.core.model import DeviceRequest, PodSingleDevice
from app.core.vendor import AnnotationContext, Discovery, NodeView, ResourceNames
from app.devices.common import requests
from app.devices.common.base import device_lists
from app.devices.common.config import section_of, string
from app.devices.common.registered import Registered, register_devices
from app.devices.common.slots import SlotRules


class CountConfig(Protocol):
    @property
    def resource_count_name(self) -> str: ...


@dataclass(frozen=True, slots=True)
class CountOnlyKeys:
    vendor: str  # the vendor key, also the allocation's device type
    register: str
    handshake: str
    use_uuid: str
    nouse_uuid: str
    custom: bool = False  # keep each device's `custominfo` (Vastai's DeviceStrategy and AIC)

    @property
    def to_allocate(self) -> str:
        return f"hami.io/{self.vendor}-devices-to-allocate"

    @property
    def allocated(self) -> str:
        return f"hami.io/{self.vendor}-devices-allocated"

    @property
    def rules(self) -> SlotRules:
        return SlotRules(self.vendor, self.use_uuid, self.nouse_uuid)


def count_section(value: Any, path: str, default: str) -> str:
    """`resourceCountName` of a section that has nothing else (vastai, biren)."""
    return string(section_of(value, path), "resourceCountName", default, path)


class CountOnly(Registered):
    __slots__ = ()
    KEYS: ClassVar[CountOnlyKeys]

    @property
    def config(self) -> CountConfig:
        raise NotImplementedError

    @property
    def keys(self) -> CountOnlyKeys:
        return self.KEYS

    @property
    def resources(self) -> ResourceNames:
        return ResourceNames(self.config.resource_count_name)

    @property
    def memory_factor(self) -> int:
        return 0

    def discover(self, node: NodeView) -> Discovery:
        """HAMi `GetNodeDevices`: the JSON array, every device's `Devcore` set to 100 ("only for calscore
        use"); an empty array is `no gpu found on node`."""
        devices = register_devices(node, self.KEYS, custom=self.KEYS.custom)
        return Discovery(tuple(dataclasses.replace(d, devcore=100) for d in devices))

    def container_request(self, container: Mapping[str, Any]) -> DeviceRequest | None:
        """HAMi `GenerateResourceRequests`: the count (limits, else requests), nothing else."""
        nums = requests.count(container, self.config.resource_count_name)
        return None if nums is None else DeviceRequest(nums, self.KEYS.vendor, 0, 100, 0)

    def pod_annotations(
        self, devices: PodSingleDevice, ctx: AnnotationContext | None = None
    ) -> dict[str, str]:
        return device_lists(devices, self.KEYS.to_allocate, self.KEYS.allocated)

    def mutate_container(self, container: dict[str, Any], pod: dict[str, Any]) -> bool:
        """No mutation; the container is this vendor's when `limits` names the count resource."""
        return requests.lookup(container, self.config.resource_count_name, limits_only=True) is not None
