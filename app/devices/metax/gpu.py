"""Metax whole GPUs (reference vendors §2.4, quirks §3.4): HAMi's `MetaxDevices`.

Devices are derived from node capacity: `metax-tech.com/gpu` cards `<node>-metax-<i>`, one task each, a fixed
65536 MiB and 100 cores (Metax's own gpu-device plugin does the real allocation; HAMi records it). No
selectors, no handshake; bind takes the shared node lock, unlike HAMi (`lock`). Fit is the template with the
rule that all of a pod's Metax GPUs are one device (§3.4 #1, kept: with one task per card a second container
can never fit). The node score reads Metax's topology tables on the node: under binpack `2000 -
metax-tech.com/gpu.topology.losses[n]`, under spread `2000 - metax-tech.com/gpu.topology.scores[n]`, n = the
pod's number of cards (not policy-neutral).

Differences (docs/compatibility.md): a topology table that is not a JSON object of integers excludes the
node with a reason (HAMi scores it as a perfect 2000, §3.4 #3), and a table without an entry for n adds
nothing, as a node without the table (HAMi: 2000); a negative count is refused instead of wrapping; the
shared node lock is taken.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.core import codec, health
from app.core.health import Health, Reported
from app.core.model import DeviceRequest, DeviceUsage, PodSingleDevice
from app.core.policy import BINPACK, SPREAD
from app.core.score import f32
from app.core.vendor import (
    SHARED_LOCK,
    AnnotationContext,
    Discovery,
    FitContext,
    FitOutcome,
    LockSpec,
    NodeView,
    PodKey,
    Reads,
    ScoreContext,
)
from app.devices.common import template
from app.devices.common.base import device_lists
from app.devices.common.capacity import WholeCards
from app.devices.common.nodes import capacity_count
from app.devices.common.placement import TemplatePlacement
from app.devices.common.podkeys import hami_lists
from app.devices.metax.config import MetaxConfig

VENDOR = "Metax-GPU"
TO_ALLOCATE = "hami.io/metax-gpu-devices-to-allocate"
ALLOCATED = "hami.io/metax-gpu-devices-allocated"
LOSSES = "metax-tech.com/gpu.topology.losses"
SCORES = "metax-tech.com/gpu.topology.scores"
DEVMEM, DEVCORE = 65536, 100
TOPOLOGY_BASE = 2000


def _one_device(device: DeviceUsage, ctx: FitContext) -> bool:
    """§2.4 custom rule: every device the pod's earlier containers got is this device."""
    return all(d.uuid == device.id for group in ctx.allocated for d in group)


RULES = template.Rules(VENDOR, "", "", custom=_one_device)  # no selectors (`checkUUID` is always true)


def _integer_key(text: str) -> int | None:
    """Go's `strconv.ParseInt(key, 10, 64)` for a `map[int]int` key."""
    body = text[1:] if text[:1] in "+-" else text
    if not body or not body.isascii() or not body.isdigit():
        return None
    return int(text)


def parse_table(name: str, value: str) -> dict[str, int]:
    """A topology table (`{"1":0,"2":10,"4":30}`: card count -> value), with canonical decimal keys;
    raises CodecError for anything Go's `json.Unmarshal` into `map[int]int` refuses."""
    try:
        raw = json.loads(value)
    except (ValueError, RecursionError) as exc:
        raise codec.CodecError(f"{name}: invalid JSON: {exc}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise codec.CodecError(f"{name}: expected a JSON object of card counts")
    table: dict[str, int] = {}
    for key, entry in raw.items():
        number = _integer_key(key)
        if number is None:
            raise codec.CodecError(f"{name}: key {key!r} is not an integer")
        if entry is None:
            entry = 0  # Go stores the zero value for null
        if isinstance(entry, bool) or not isinstance(entry, int):
            raise codec.CodecError(f"{name}: value of {key!r} is not an integer")
        table[str(number)] = entry
    return table


@dataclass(frozen=True, slots=True)
class MetaxGpu(TemplatePlacement, WholeCards):
    config: MetaxConfig = field(default_factory=MetaxConfig)

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
        return TO_ALLOCATE

    @property
    def lock(self) -> LockSpec:
        """HAMi's shared node lock, which HAMi never takes for these pods (docs/compatibility.md): Metax's
        gpu-device plugin follows HAMi's to-allocate protocol and finds the pod it serves through that lock,
        else the first pod on the node waiting in bind-phase `allocating` — which, without the lock, may be
        another vendor's pod allocating at the same time (the CI storm served a GCU Allocate from an NVIDIA
        pod's annotations and failed both pods)."""
        return SHARED_LOCK

    @property
    def reads(self) -> Reads:
        return Reads(node_annotations=(LOSSES, SCORES), capacity=(self.count_resource,))

    @property
    def pod_keys(self) -> tuple[PodKey, ...]:
        return hami_lists(TO_ALLOCATE, ALLOCATED, "Metax's gpu-device plugin")

    @property
    def scores_nodes(self) -> bool:
        return True

    def discover(self, node: NodeView) -> Discovery:
        """HAMi `GetNodeDevices` (§2.4): one card per unit of capacity; the topology tables as node info."""
        cards = self.cards(node, word="metax", count=1, devmem=DEVMEM, devcore=DEVCORE)
        info = {
            key: parse_table(key, node.annotations[key])
            for key in (LOSSES, SCORES)
            if key in node.annotations
        }
        return Discovery(cards.devices, info)

    def health(self, node: NodeView, reported: Reported, now: datetime) -> Health:
        """§1.10: healthy while the node has cards."""
        name = self.count_resource
        return health.capacity_health(capacity_count(node, name), name)

    def container_request(self, container: Mapping[str, Any]) -> DeviceRequest | None:
        """§2.4: whole cards, `{n, Metax-GPU, 0, 100%, 100}`."""
        return self.whole(container, memreq=0, coresreq=100)

    def fit(self, devices: Sequence[DeviceUsage], request: DeviceRequest, ctx: FitContext) -> FitOutcome:
        return template.fit(devices, request, ctx, RULES)

    def score_node(self, ctx: ScoreContext) -> float:
        """§2.4 ScoreNode: `2000 - table[n]` from the policy's table; 0 without it (or without an entry)."""
        key = {BINPACK: LOSSES, SPREAD: SCORES}.get(ctx.node_policy)
        table = ctx.node.info.get(VENDOR, {}).get(key) if key else None
        if not table:
            return 0.0
        value = table.get(str(sum(len(group) for group in ctx.allocation)))
        return 0.0 if value is None else f32(TOPOLOGY_BASE - f32(float(value)))

    def pod_annotations(
        self, devices: PodSingleDevice, ctx: AnnotationContext | None = None
    ) -> dict[str, str]:
        return device_lists(devices, TO_ALLOCATE, ALLOCATED)
