"""Defaults of the `Vendor` protocol that most of HAMi's vendors share, and the allocation annotations.

A vendor dataclass inherits `VendorDefaults` and overrides what it does differently. The defaults:
- a request sees exactly the devices its vendor registered (`sees`; HAMi matches device types by substring,
  which lets `Ascend910B4` requests take `Ascend910B4-1` chips: quirk vendors §3.0 #1, fixed);
- no MIG-like device reuse, HAMi's plain `AddResourceUsage` (one slot, the memory and cores);
- no usage tags, no node score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from app.core import codec
from app.core.model import ContainerDevice, DeviceRequest, DeviceUsage, PodSingleDevice
from app.core.vendor import Reads, ResourceNames, ScoreContext
from app.devices.common.config import SectionNames


class VendorDefaults:
    __slots__ = ()

    @property
    def key(self) -> str:
        raise NotImplementedError

    @property
    def scores_nodes(self) -> bool:
        return False

    @property
    def reads(self) -> Reads:
        return Reads()

    def sees(self, device_type: str, device_vendor: str) -> bool:
        return device_vendor == self.key

    def may_reuse_devices(
        self, devices: Sequence[DeviceUsage], request: DeviceRequest, annotations: Mapping[str, str]
    ) -> bool:
        return False

    def add_usage(self, device: DeviceUsage, chosen: ContainerDevice) -> ContainerDevice:
        """HAMi's common `AddResourceUsage`: one more task, its memory and cores."""
        device.used += 1
        device.usedcores += chosen.usedcores
        device.usedmem += chosen.usedmem
        return chosen

    def usage_tags(self, pod_annotations: Mapping[str, str]) -> tuple[str, ...]:
        return ()

    def score_node(self, ctx: ScoreContext) -> float:
        return 0.0


def device_lists(devices: PodSingleDevice, *keys: str) -> dict[str, str]:
    """`EncodePodSingleDevice(devices)` under each of `keys` (to-allocate and allocated), or nothing when
    the vendor allocated no device (HAMi writes its keys only for a non-empty list)."""
    if not any(devices):
        return {}
    encoded = codec.encode_pod_single_device(devices)
    return dict.fromkeys(keys, encoded)


class NamedResources(VendorDefaults):
    """A vendor whose `config` is a `SectionNames`: its resources are the section's three names."""

    __slots__ = ()

    @property
    def config(self) -> SectionNames:
        raise NotImplementedError

    @property
    def resources(self) -> ResourceNames:
        c = self.config
        return ResourceNames(c.resource_count_name, c.resource_memory_name, "", c.resource_core_name)
