"""The Vastai vendor (reference vendors §2.12, quirks §3.12): HAMi's `VastaiDevices`.

Devices come from `hami.io/node-va-register` (JSON, `Devcore` forced to 100, `custominfo` kept: the plugin
names each device's card as `AIC` and `DeviceStrategy: "die"` when it registers dies rather than cards);
health is the generic handshake on `hami.io/node-handshake-va`; pods take the shared node lock. Requests
are whole devices (`vastaitech.com/va`), shared only as far as `count` allows; no memory or cores.

Fit: health, type, `vastaitech.com/use-gpuuuid`/`nouse-gpuuuid`, slots, mutex. In die mode (decided by the
first candidate, §3.12 #1, kept) the mutex policy also refuses an idle die on a card (AIC) with a busy die,
every passing die is collected, and a multi-die request takes the cards with the most passing dies first.
ScoreNode: per container, the share of its dies on its largest card (0 unless every die is in die mode and
names its card); summed, not weighted, not policy-neutral (§3.12 #3, kept).

Differences (docs/compatibility.md): a die without an `AIC` is its own card when choosing the best
combination (HAMi drops it and may bind fewer dies than requested), and cards with equally many passing
dies keep the order in which they were tried (HAMi: Go map order); a negative count is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from app.core.model import ContainerDevice, DeviceRequest, DeviceUsage
from app.core.policy import MUTEX, policy_contains
from app.core.score import f32
from app.core.vendor import FitContext, FitOutcome, ScoreContext
from app.devices.common import slots, template
from app.devices.common.countonly import CountOnly, CountOnlyKeys, count_section

KEYS = CountOnlyKeys(
    "Vastai",
    "hami.io/node-va-register",
    "hami.io/node-handshake-va",
    "vastaitech.com/use-gpuuuid",
    "vastaitech.com/nouse-gpuuuid",
    custom=True,
)
STRATEGY, DIE, AIC = "DeviceStrategy", "die", "AIC"


@dataclass(frozen=True, slots=True)
class VastaiConfig:
    """The `vastai:` section (chart default, vendors §1.3)."""

    resource_count_name: str = "vastaitech.com/va"


def parse_vastai_config(value: Any) -> VastaiConfig:
    return VastaiConfig(count_section(value, "vastai", VastaiConfig().resource_count_name))


def card_of(custom: Mapping[str, Any]) -> str | None:
    """The die's card (`AIC`), when it is a string (HAMi reads it with a string assertion)."""
    value = custom.get(AIC)
    return value if isinstance(value, str) else None


def die_mode(devices: Sequence[DeviceUsage]) -> bool:
    return bool(devices) and devices[0].custom.get(STRATEGY) == DIE


def best_combination(
    wanted: int, chosen: Sequence[ContainerDevice], cards: Mapping[str, str | None]
) -> tuple[ContainerDevice, ...]:
    """HAMi `computeBestCombination`: cards with the most collected dies first, cut at `wanted`."""
    groups: dict[object, list[ContainerDevice]] = {}
    for device in chosen:
        card = cards.get(device.uuid)
        groups.setdefault(card if card is not None else ("no card", device.uuid), []).append(device)
    ordered = sorted(groups.values(), key=len, reverse=True)  # stable: ties keep try order
    return tuple(d for group in ordered for d in group)[:wanted]


@dataclass(frozen=True, slots=True)
class Vastai(CountOnly):
    PLUGIN: ClassVar[str] = "Vastai's device plugin (HAMi protocol)"
    KEYS: ClassVar[CountOnlyKeys] = KEYS
    config: VastaiConfig = field(default_factory=VastaiConfig)

    @property
    def scores_nodes(self) -> bool:
        return True

    def fit(self, devices: Sequence[DeviceUsage], request: DeviceRequest, ctx: FitContext) -> FitOutcome:
        dies = die_mode(devices)
        occupied: set[str] = set()
        if dies and policy_contains(ctx.policy, MUTEX):
            occupied = {c for d in devices if d.used > 0 and (c := card_of(d.custom)) is not None}

        def conflict(device: DeviceUsage) -> bool:
            return dies and card_of(device.custom) in occupied

        def take(device: DeviceUsage) -> ContainerDevice:
            return ContainerDevice(device.id, KEYS.vendor, 0, request.coresreq, idx=device.index)

        found = slots.run(devices, request, ctx, KEYS.rules, take, conflict=conflict, collect_all=dies)
        if found.done:
            return FitOutcome(True, tuple(found.chosen))
        if dies and len(found.chosen) >= request.nums:
            if len(found.chosen) == request.nums or request.nums == 1:
                return FitOutcome(True, tuple(found.chosen[: request.nums]))
            cards = {d.id: card_of(d.custom) for d in devices}
            return FitOutcome(True, best_combination(request.nums, found.chosen, cards))
        return template.failure(found, len(devices))

    def score_node(self, ctx: ScoreContext) -> float:
        """§2.12 ScoreNode: per non-empty container, the largest share of its dies on one card."""
        custom = {d.id: d.custom for d in ctx.node.devices}
        score = 0.0
        for group in ctx.allocation:
            if not group:
                continue
            per_card: dict[str, int] = {}
            for device in group:
                info = custom.get(device.uuid)
                if not info:  # HAMi: nil CustomInfo; an empty one has no AIC either
                    return 0.0
                strategy = info.get(STRATEGY)
                if isinstance(strategy, str) and strategy != DIE:
                    return 0.0
                if AIC not in info:
                    return 0.0
                card = card_of(info)
                if card is not None:
                    per_card[card] = per_card.get(card, 0) + 1
            total = sum(per_card.values())
            if total:
                score = f32(score + f32(f32(float(max(per_card.values()))) / f32(float(total))))
        return score
