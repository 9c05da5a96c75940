"""Enflame whole GCUs (reference vendors §2.9 `GCU`, quirks §3.9 #7): HAMi's GCU backend.

Devices are derived from node capacity `enflame.com/gcu`: cards `<node>-GCU-<i>`, one task each, memory
and cores as 100 tokens. A request takes whole idle cards (`{n, GCU, 100, 100%, 100}`); Fit checks health,
type and `Used > 0` (`ExclusiveDeviceAllocateConflict`) only. No selectors, no handshake, no score;
the filter writes the to-allocate and allocated lists. Bind takes the shared node lock, unlike HAMi (`lock`).

Difference (docs/compatibility.md): a negative count is refused.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.core import health
from app.core import reasons as r
from app.core.health import Health, Reported
from app.core.model import ContainerDevice, DeviceRequest, DeviceUsage, PodSingleDevice
from app.core.vendor import (
    SHARED_LOCK,
    AnnotationContext,
    Discovery,
    FitContext,
    FitOutcome,
    LockSpec,
    NodeView,
    PodKey,
)
from app.devices.common import template
from app.devices.common.base import device_lists
from app.devices.common.capacity import WholeCards
from app.devices.common.nodes import capacity_count
from app.devices.common.podkeys import hami_lists
from app.devices.enflame.config import EnflameConfig

VENDOR = "GCU"
TO_ALLOCATE = "hami.io/enflame-gcu-devices-to-allocate"
ALLOCATED = "hami.io/enflame-gcu-devices-allocated"
TOKEN = 100  # memory and cores of a card, as tokens


@dataclass(frozen=True, slots=True)
class EnflameGcu(WholeCards):
    config: EnflameConfig = field(default_factory=EnflameConfig)

    @property
    def key(self) -> str:
        return VENDOR

    @property
    def count_resource(self) -> str:
        return self.config.resource_name_gcu

    @property
    def allocated_annotation(self) -> str:
        return ALLOCATED

    @property
    def to_allocate_annotation(self) -> str:
        return TO_ALLOCATE

    @property
    def lock(self) -> LockSpec:
        """HAMi's shared node lock, which HAMi never takes for these pods (docs/compatibility.md): Enflame's
        GCU plugin follows HAMi's to-allocate protocol and finds the pod it serves through that lock, else the
        first pod on the node waiting in bind-phase `allocating` — which, without the lock, may be another
        vendor's pod allocating at the same time (the CI storm served a GCU Allocate from an NVIDIA pod's
        annotations and failed both pods)."""
        return SHARED_LOCK

    @property
    def pod_keys(self) -> tuple[PodKey, ...]:
        return hami_lists(TO_ALLOCATE, ALLOCATED, "Enflame's GCU device plugin")

    def discover(self, node: NodeView) -> Discovery:
        return self.cards(node, word="GCU", count=1, devmem=TOKEN, devcore=TOKEN)

    def health(self, node: NodeView, reported: Reported, now: datetime) -> Health:
        name = self.count_resource
        return health.capacity_health(capacity_count(node, name), name)

    def container_request(self, container: Mapping[str, Any]) -> DeviceRequest | None:
        """§2.9: whole cards, `{n, GCU, 100, 100%, 100}`."""
        return self.whole(container, memreq=TOKEN, coresreq=TOKEN)

    def memory_text(self, amount: int) -> str:
        """`app.core.units.Units`: memory and cores are 100 tokens per card (whole cards only)."""
        return f"{amount}/{TOKEN} memory"

    def cores_text(self, amount: int) -> str:
        return f"{amount}/{TOKEN} cores"

    def request_cores_text(self, amount: int) -> str:
        return self.cores_text(amount)

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
