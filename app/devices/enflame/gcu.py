"""Enflame whole GCUs (reference vendors §2.9 `GCU`, quirks §3.9 #7): HAMi's GCU backend.

Devices are derived from node capacity `enflame.com/gcu`: cards `<node>-GCU-<i>`, one task each, memory
and cores as 100 tokens. A request takes whole idle cards (`{n, GCU, 100, 100%, 100}`); Fit checks health,
type and `Used > 0` (`ExclusiveDeviceAllocateConflict`) only. No selectors, no lock, no handshake, no score;
the filter writes the to-allocate and allocated lists.

Difference (docs/compatibility.md): a negative count is refused.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.core import codec, health
from app.core import reasons as r
from app.core.health import Health, Reported
from app.core.model import ContainerDevice, DeviceInfo, DeviceRequest, DeviceUsage, PodSingleDevice
from app.core.vendor import (
    AnnotationContext,
    Discovery,
    FitContext,
    FitOutcome,
    NodeView,
    Reads,
    ResourceNames,
)
from app.devices.common import requests, template
from app.devices.common.base import VendorDefaults, device_lists
from app.devices.common.nodes import capacity_count, capacity_int64
from app.devices.enflame.config import EnflameConfig

VENDOR = "GCU"
TO_ALLOCATE = "hami.io/enflame-gcu-devices-to-allocate"
ALLOCATED = "hami.io/enflame-gcu-devices-allocated"
TOKEN = 100  # memory and cores of a card, as tokens


@dataclass(frozen=True, slots=True)
class EnflameGcu(VendorDefaults):
    config: EnflameConfig = field(default_factory=EnflameConfig)

    @property
    def key(self) -> str:
        return VENDOR

    @property
    def resources(self) -> ResourceNames:
        return ResourceNames(self.config.resource_name_gcu)  # not tracked by quota (§1.6)

    @property
    def memory_factor(self) -> int:
        return 0

    @property
    def allocated_annotation(self) -> str:
        return ALLOCATED

    @property
    def to_allocate_annotation(self) -> str:
        return TO_ALLOCATE

    @property
    def handshake_annotation(self) -> str:
        return ""

    @property
    def source(self) -> str:
        return f"capacity {self.config.resource_name_gcu}"

    @property
    def reads(self) -> Reads:
        return Reads(capacity=(self.config.resource_name_gcu,))

    @property
    def lock(self) -> None:
        return None

    @property
    def pod_annotation_keys(self) -> tuple[str, ...]:
        return (TO_ALLOCATE, ALLOCATED)

    def registered(self, node: NodeView) -> bool:
        value = node.capacity.get(self.config.resource_name_gcu)
        return value is not None and value not in ("0", 0)

    def discover(self, node: NodeView) -> Discovery:
        name = self.config.resource_name_gcu
        count = capacity_int64(node, name) or 0
        if count <= 0:
            raise codec.CodecError(f"device not found {name}")
        return Discovery(
            tuple(
                DeviceInfo(f"{node.name}-GCU-{i}", i, 1, TOKEN, TOKEN, VENDOR, 0, "", True, VENDOR)
                for i in range(count)
            )
        )

    def health(self, node: NodeView, reported: Reported, now: datetime) -> Health:
        name = self.config.resource_name_gcu
        return health.capacity_health(capacity_count(node, name), name)

    def container_request(self, container: Mapping[str, Any]) -> DeviceRequest | None:
        nums = requests.count(container, self.config.resource_name_gcu)
        if nums is None:
            return None
        return DeviceRequest(nums, VENDOR, TOKEN, 100, TOKEN)

    def fit(self, devices: Sequence[DeviceUsage], request: DeviceRequest, ctx: FitContext) -> FitOutcome:
        """§2.9 GCU Fit: from the end, health, type, then idle cards only."""
        counts: Counter[str] = Counter()
        chosen: list[ContainerDevice] = []
        for i in range(len(devices) - 1, -1, -1):
            d = devices[i]
            if not d.health:
                counts[r.CARD_NOT_HEALTH] += 1
            elif d.type != VENDOR or request.type != VENDOR:
                counts[r.CARD_TYPE_MISMATCH] += 1
            elif d.used > 0:
                counts[r.EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT] += 1
            else:
                chosen.append(ContainerDevice(d.id, VENDOR, TOKEN, TOKEN, idx=d.index))
                if len(chosen) == request.nums:
                    return FitOutcome(True, tuple(chosen))
        return template.failure(template.Run(chosen, counts, False), len(devices))

    def pod_annotations(
        self, devices: PodSingleDevice, ctx: AnnotationContext | None = None
    ) -> dict[str, str]:
        return device_lists(devices, TO_ALLOCATE, ALLOCATED)

    def mutate_container(self, container: dict[str, Any], pod: dict[str, Any]) -> bool:
        return requests.lookup(container, self.config.resource_name_gcu, limits_only=True) is not None
