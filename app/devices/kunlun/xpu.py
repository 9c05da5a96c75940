"""Kunlunxin whole XPUs (reference vendors §2.8 `kunlun`, quirks §3.8): HAMi's `KunlunDevices`.

Devices are derived from node capacity `kunlunxin.com/xpu`: cards `<node>-kunlun-<i>` of 98304 MiB and 100
cores, the upper half on NUMA 1. A card is taken whole (`Used == 0`), placed by the interconnect groups
(`topology`), with both selector pairs (`baidu.com/use-gpuuuid`/`nouse-gpuuuid` and
`hami.io/use-xpu-uuid`/`no-use-xpu-uuid`). The node score (not policy-neutral) rewards allocations that
split the wings less than the used cards do; it is 0 on a node with any device that is not a whole XPU
(§3.8 #4, kept). No lock, no handshake, no to-allocate key: the filter writes `hami.io/kunlun-allocated`
and `BAIDU_COM_DEVICE_IDX`, the indexes of the last container with cards (§3.8 #7, kept: the device plugin
reads one list).

Differences (docs/compatibility.md): placement by index, not position (`topology`); a negative count is
refused; the failure reason's denominator is the number of devices (see `topology_failure`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.core import reasons as r
from app.core.model import ContainerDevice, DeviceRequest, DeviceUsage, PodSingleDevice
from app.core.vendor import (
    ALLOCATION,
    AnnotationContext,
    Discovery,
    FitContext,
    FitOutcome,
    NodeView,
    PodKey,
    ScoreContext,
)
from app.devices.common.base import device_lists
from app.devices.common.capacity import WholeCards
from app.devices.common.selectors import uuid_allowed
from app.devices.kunlun import topology
from app.devices.kunlun.config import KunlunConfig

VENDOR = "kunlun"
ALLOCATED = "hami.io/kunlun-allocated"
DEVICE_IDX = "BAIDU_COM_DEVICE_IDX"
SELECTORS = (
    ("baidu.com/use-gpuuuid", "baidu.com/nouse-gpuuuid"),
    ("hami.io/use-xpu-uuid", "hami.io/no-use-xpu-uuid"),
)
DEVMEM, DEVCORE = 98304, 100


def uuid_fits(annotations: Mapping[str, str], device: DeviceUsage) -> bool:
    return all(uuid_allowed(annotations, use, nouse, device.id) for use, nouse in SELECTORS)


def topology_failure(
    devices: Sequence[DeviceUsage], annotations: Mapping[str, str], conflicts: int = 0
) -> FitOutcome:
    """Only one reason is reported (§3.8 #9): mutex conflicts (vXPU), else UUID mismatches, else
    `1/<n> NumaNotFit`."""
    total = len(devices)
    if conflicts:
        return FitOutcome(False, (), r.gen_reason({r.EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT: conflicts}, total))
    mismatched = len({d.id for d in devices if not uuid_fits(annotations, d)})
    if mismatched:
        return FitOutcome(False, (), r.gen_reason({r.CARD_UUID_MISMATCH: mismatched}, total))
    return FitOutcome(False, (), r.gen_reason({r.NUMA_NOT_FIT: 1}, total))


@dataclass(frozen=True, slots=True)
class KunlunXpu(WholeCards):
    config: KunlunConfig = field(default_factory=KunlunConfig)

    @property
    def key(self) -> str:
        return VENDOR

    @property
    def count_resource(self) -> str:
        return self.config.resource_count_name

    @property
    def allocated_annotation(self) -> str:
        return ALLOCATED

    @property
    def to_allocate_annotation(self) -> str:
        return ""

    @property
    def pod_keys(self) -> tuple[PodKey, ...]:
        return (
            PodKey(ALLOCATED, ALLOCATION),
            PodKey(DEVICE_IDX, ALLOCATION),  # the card indexes Kunlunxin's XPU plugin hands out
        )

    @property
    def scores_nodes(self) -> bool:
        return True

    def discover(self, node: NodeView) -> Discovery:
        """HAMi `GetNodeDevices` (§2.8): one card per unit of capacity (100 tasks each), the upper half on
        NUMA 1."""
        devices = self.cards(node, word="kunlun", count=100, devmem=DEVMEM, devcore=DEVCORE).devices
        half = len(devices) // 2
        return Discovery(tuple(dataclasses.replace(d, numa=int(d.index >= half)) for d in devices))

    def container_request(self, container: Mapping[str, Any]) -> DeviceRequest | None:
        """§2.8: whole cards, `{n, kunlun, 0, 100%, 0}`."""
        return self.whole(container, memreq=0, coresreq=0)

    def fit(self, devices: Sequence[DeviceUsage], request: DeviceRequest, ctx: FitContext) -> FitOutcome:
        """§2.8 Fit: free, healthy cards that pass both selector pairs, placed by `topology.select`; each
        taken whole (`Usedmem`/`Usedcores` = the card's)."""
        notes = ctx.pod_annotations

        def fits(d: DeviceUsage) -> bool:
            return uuid_fits(notes, d) and d.used == 0 and d.health

        chosen = topology.select(devices, request.nums, fits)
        if not chosen:
            return topology_failure(devices, notes)
        return FitOutcome(
            True, tuple(ContainerDevice(d.id, VENDOR, d.totalmem, d.totalcore, idx=d.index) for d in chosen)
        )

    def score_node(self, ctx: ScoreContext) -> float:
        """§2.8 ScoreNode: 0 if the node has any other device type; else how the pod's cards split the
        wings compared with the used cards (`topology.score`)."""
        if any(VENDOR not in d.type for d in ctx.previous):
            return 0.0
        chosen = [d for group in ctx.allocation for d in group]
        if any(VENDOR not in d.type for d in chosen):
            return 0.0
        used = [d.index for d in ctx.previous if d.used > 0]
        return topology.score(used, [d.idx for d in chosen])

    def pod_annotations(
        self, devices: PodSingleDevice, ctx: AnnotationContext | None = None
    ) -> dict[str, str]:
        """§2.8 PatchAnnotations: the allocation, and the indexes of the last container with cards."""
        result = device_lists(devices, ALLOCATED)
        if result:
            last = [group for group in devices if group][-1]
            result[DEVICE_IDX] = ",".join(str(d.idx) for d in last)
        return result
