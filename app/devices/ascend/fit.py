"""Ascend `Fit` and `ScoreNode` (reference vendors §2.1.5, §2.1.6; quirks §3.1).

The loop is HAMi's template with Ascend's differences: UUID selectors `hami.io/use-<cw>-uuid` /
`no-use-<cw>-uuid`, no quota step, cores judged against 100 in hami-core (soft split) mode, and — for
910-series chips whose devices all carry a `NetworkID`, and for multi-chip 910C requests — every passing
chip is collected first and the choice made after the loop:
- 910C, more than one NPU: whole cards (two NPUs per card, card = index / 2), fullest cards first; a result
  of another size fails with `<n>/<request> AllocatedCardsInsufficientRequest` (HAMi's denominator);
- network topology: exactly the request collected wins; one NPU: the first collected; else the largest
  NetworkID groups first, cut at the request.
HAMi breaks ties between equal cards and groups by Go map order (random, quirks §3.1 #4-5); we keep the
order in which the chips were tried, so the choice is deterministic (docs/compatibility.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from app.core import reasons as r
from app.core.model import ContainerDevice, DeviceRequest, DeviceUsage, NodeDevices
from app.core.score import f32
from app.core.vendor import FitContext, FitOutcome, ScoreContext
from app.devices.common import template

NETWORK_ID = "NetworkID"
SUPER_POD_CHIP = "Ascend910C"


def _number(value: object) -> float | None:
    """A JSON number (Go decodes them as float64); booleans and strings are not."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def needs_topology(common_word: str, devices: Sequence[DeviceUsage]) -> bool:
    return common_word.startswith("Ascend910") and all(NETWORK_ID in d.custom for d in devices)


def _pairs(chosen: Sequence[ContainerDevice], wanted: int, run: template.Run) -> FitOutcome:
    """HAMi `computeBestCombination910C`."""
    cards: dict[int, list[ContainerDevice]] = {}
    for device in chosen:
        cards.setdefault(device.idx // 2, []).append(device)
    ordered = sorted(cards.values(), key=len, reverse=True)  # stable: ties keep try order
    result: list[ContainerDevice] = []
    for npus in ordered:
        if len(result) >= wanted:
            break
        if len(npus) == 2:
            result.extend(npus)
    if len(result) != wanted:
        counts = dict(run.counts)
        counts[r.ALLOCATED_CARDS_INSUFFICIENT_REQUEST] = len(result)
        return FitOutcome(False, tuple(result), r.gen_reason(counts, wanted))
    return FitOutcome(True, tuple(result))


def _network_groups(
    chosen: Sequence[ContainerDevice], wanted: int, node: Sequence[DeviceUsage]
) -> FitOutcome:
    """HAMi `computeBestCombination`: the largest NetworkID groups first, cut at `wanted`."""
    network = {d.id: d.custom.get(NETWORK_ID) for d in node}
    groups: dict[object, list[ContainerDevice]] = {}
    for device in chosen:
        value = network.get(device.uuid)
        number = _number(value)
        groups.setdefault(int(number) if number is not None else repr(value), []).append(device)
    ordered = sorted(groups.values(), key=len, reverse=True)
    return FitOutcome(True, tuple(d for group in ordered for d in group)[:wanted])


def fit(
    common_word: str,
    rules: template.Rules,
    devices: Sequence[DeviceUsage],
    request: DeviceRequest,
    ctx: FitContext,
) -> FitOutcome:
    """The loop and the choice after it; the ModeNotFit check is the caller's."""
    pairs = common_word == SUPER_POD_CHIP and request.nums > 1
    topology = needs_topology(common_word, devices)
    run = template.run(devices, request, ctx, rules, collect_all=pairs or topology)
    if run.done:
        return FitOutcome(True, tuple(run.chosen))
    if pairs:
        return _pairs(run.chosen, request.nums, run)
    if topology and len(run.chosen) >= request.nums:
        if len(run.chosen) == request.nums or request.nums == 1:
            return FitOutcome(True, tuple(run.chosen[: request.nums]))
        return _network_groups(run.chosen, request.nums, devices)
    return template.failure(run, len(devices))


def score(ctx: ScoreContext) -> float:
    """HAMi `ScoreNode` (§2.1.6): per container, the share of its chips (those whose NetworkID is a number)
    in the largest NetworkID group; summed, times 10. A chip without a NetworkID makes the whole score 0.
    Not policy-neutral (§3.1 #6)."""
    network = {d.id: d.custom for d in ctx.node.devices}
    total = 0.0
    for group in ctx.allocation:
        if not group:
            continue
        counts: dict[float, int] = {}
        for device in group:
            custom = network.get(device.uuid)
            if not custom or NETWORK_ID not in custom:
                return 0.0
            number = _number(custom[NETWORK_ID])
            if number is not None:
                counts[number] = counts.get(number, 0) + 1
        counted = sum(counts.values())  # chips whose NetworkID is a number
        if counted == 0:
            continue
        total = f32(total + f32(f32(float(max(counts.values()))) / f32(float(counted))))
    return f32(total * 10)


def node_supports_hami_core(node: NodeDevices, common_word: str, default: bool) -> bool:
    """The global `hamiVnpuCore`, overridden by the node's `hami-vnpu-core` annotation when present."""
    value = node.info.get(common_word, {}).get("hami-vnpu-core")
    return default if value is None else value == "true"
