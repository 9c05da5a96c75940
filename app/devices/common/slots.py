"""The Fit loop of HAMi's vendors that share devices by slots only (Vastai §2.12, Biren §2.13, and the checks
AWS Neuron and AMD run before their own memory/core rules, §2.10-2.11).

Candidates are tried from the END of the sorted list; the first failing check of a device counts towards
the reason string, in HAMi's order: health, type, UUID, slots, mutex (with an optional extra conflict, e.g.
Vastai's die on an occupied card). What a vendor checks after these is its own (`check` returns a reason or
the device to take).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from app.core import reasons as r
from app.core.model import ContainerDevice, DeviceRequest, DeviceUsage
from app.core.policy import MUTEX, policy_contains
from app.core.vendor import FitContext
from app.devices.common.selectors import uuid_allowed
from app.devices.common.template import Run

TypeCheck = Callable[[Mapping[str, str], DeviceUsage], bool]
Conflict = Callable[[DeviceUsage], bool]
# After the common checks: a reason key (device skipped) or the device to take.
Check = Callable[[DeviceUsage], "str | ContainerDevice"]


@dataclass(frozen=True, slots=True)
class SlotRules:
    vendor: str  # the request type the vendor accepts
    use_uuid: str
    nouse_uuid: str
    type_check: TypeCheck | None = None  # the device-type rule after the request type (AMD use-gputype)


def common_reason(
    device: DeviceUsage,
    request: DeviceRequest,
    ctx: FitContext,
    rules: SlotRules,
    mutex: bool,
    conflict: Conflict | None = None,
) -> str | None:
    """The first of HAMi's common checks the device fails (a reason key), None when it passes them all."""
    if not device.health:
        return r.CARD_NOT_HEALTH
    if request.type != rules.vendor or (
        rules.type_check is not None and not rules.type_check(ctx.pod_annotations, device)
    ):
        return r.CARD_TYPE_MISMATCH
    if not uuid_allowed(ctx.pod_annotations, rules.use_uuid, rules.nouse_uuid, device.id):
        return r.CARD_UUID_MISMATCH
    if device.count <= device.used:
        return r.CARD_TIME_SLICING_EXHAUSTED
    if mutex and (device.used > 0 or (conflict is not None and conflict(device))):
        return r.EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT
    return None


def run(
    devices: Sequence[DeviceUsage],
    request: DeviceRequest,
    ctx: FitContext,
    rules: SlotRules,
    check: Check,
    *,
    conflict: Conflict | None = None,
    collect_all: bool = False,
) -> Run:
    """The loop: devices that pass the common checks and `check` are taken until `nums` (every one with
    `collect_all`, Vastai's die mode)."""
    mutex = policy_contains(ctx.policy, MUTEX)
    nums = request.nums
    chosen: list[ContainerDevice] = []
    counts: Counter[str] = Counter()
    for i in range(len(devices) - 1, -1, -1):
        device = devices[i]
        reason = common_reason(device, request, ctx, rules, mutex, conflict)
        taken = check(device) if reason is None else reason
        if isinstance(taken, str):
            counts[taken] += 1
            continue
        if collect_all:
            chosen.append(taken)
            continue
        if nums > 0:
            nums -= 1
            chosen.append(taken)
        if nums == 0:
            return Run(chosen, counts, True)
    return Run(chosen, counts, False)
