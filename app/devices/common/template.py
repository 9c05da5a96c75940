"""HAMi's template Fit (vendors §1.8): the loop Hygon, Cambricon, Iluvatar, Metax GPU, Mthreads and (with
changes) Ascend copy from one another, with the differences as parameters.

Candidates are tried from the END of the sorted list; the first failing check of a device counts towards
the reason string, in this order: health, type, UUID, slots, mutex, [quota], memory, cores, exclusive,
compute exhausted, [custom rule]. The order decides which reason a user sees, so it is HAMi's exactly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from app.core import reasons as r
from app.core.model import PERCENT_UNSET, ContainerDevice, DeviceRequest, DeviceUsage
from app.core.policy import MUTEX, policy_contains
from app.core.score import i32
from app.core.vendor import FitContext, FitOutcome
from app.devices.common.selectors import uuid_allowed

TypeCheck = Callable[[Mapping[str, str], DeviceUsage], bool]
CustomRule = Callable[[DeviceUsage, FitContext], bool]


def go_div(numerator: int, denominator: int) -> int:
    """Go integer division truncates toward zero."""
    quotient = abs(numerator) // abs(denominator)
    return quotient if (numerator >= 0) == (denominator >= 0) else -quotient


def memory_request(device: DeviceUsage, request: DeviceRequest) -> int:
    """HAMi's `memreq` on one device: the absolute request, else a percentage of the card (int32)."""
    memreq = request.memreq if request.memreq > 0 else 0
    if request.mem_percentage != PERCENT_UNSET and request.memreq == 0:
        memreq = go_div(i32(device.totalmem * request.mem_percentage), 100)
    return memreq


@dataclass(frozen=True, slots=True)
class Rules:
    """One vendor's variant of the template."""

    vendor: str  # the request type the vendor accepts (its checkType compares it)
    use_uuid: str  # pod annotation keys of the UUID selectors
    nouse_uuid: str
    type_check: TypeCheck | None = None  # extra device-type rule (Hygon's use-dcutype), step 2
    quota: bool = False  # step 9: the namespace quota per candidate (Cambricon, as NVIDIA)
    custom: CustomRule | None = None  # step 14 (Metax GPU, Mthreads)
    total_core: Callable[[DeviceUsage], int] | None = None  # steps 11-13 (Ascend hami-core: 100)


@dataclass(slots=True)
class Run:
    """What the loop found: the devices taken (in try order), the reason counts, and whether it stopped
    early because `nums` were taken."""

    chosen: list[ContainerDevice]
    counts: Counter[str]
    done: bool


def run(
    devices: Sequence[DeviceUsage],
    request: DeviceRequest,
    ctx: FitContext,
    rules: Rules,
    *,
    collect_all: bool = False,
) -> Run:
    """The loop; `collect_all` keeps going after `nums` devices pass (Ascend's topology and 910C paths)."""
    annotations = ctx.pod_annotations
    mutex = policy_contains(ctx.policy, MUTEX)
    nums, cores = request.nums, request.coresreq
    chosen: list[ContainerDevice] = []
    counts: Counter[str] = Counter()
    for i in range(len(devices) - 1, -1, -1):
        d = devices[i]
        if not d.health:
            counts[r.CARD_NOT_HEALTH] += 1
            continue
        if request.type != rules.vendor or (
            rules.type_check is not None and not rules.type_check(annotations, d)
        ):
            counts[r.CARD_TYPE_MISMATCH] += 1
            continue
        if not uuid_allowed(annotations, rules.use_uuid, rules.nouse_uuid, d.id):
            counts[r.CARD_UUID_MISMATCH] += 1
            continue
        if d.count <= d.used:
            counts[r.CARD_TIME_SLICING_EXHAUSTED] += 1
            continue
        if mutex and d.used > 0:
            counts[r.EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT] += 1
            continue
        cores = min(cores, 100)
        memreq = memory_request(d, request)
        candidate = ContainerDevice(d.id, request.type, memreq, cores, idx=d.index)
        if rules.quota and not ctx.quota_fits([*chosen, candidate]):
            counts[r.RESOURCE_QUOTA_NOT_FIT] += 1
            continue
        if d.totalmem - d.usedmem < memreq:
            counts[r.CARD_INSUFFICIENT_MEMORY] += 1
            continue
        total_core = rules.total_core(d) if rules.total_core is not None else d.totalcore
        if total_core - d.usedcores < cores:
            counts[r.CARD_INSUFFICIENT_CORE] += 1
            continue
        if total_core == 100 and cores == 100 and d.used > 0:
            counts[r.EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT] += 1
            continue
        if total_core != 0 and d.usedcores == total_core and cores == 0:
            counts[r.CARD_COMPUTE_UNITS_EXHAUSTED] += 1
            continue
        if rules.custom is not None and not rules.custom(d, ctx):
            counts[r.CARD_NOT_FOUND_CUSTOM_FILTER_RULE] += 1
            continue
        if collect_all:
            chosen.append(candidate)
            continue
        if nums > 0:
            nums -= 1
            chosen.append(candidate)
        if nums == 0:
            return Run(chosen, counts, True)
    return Run(chosen, counts, False)


def failure(found: Run, total: int) -> FitOutcome:
    """The template's failure: devices taken so far count as AllocatedCardsInsufficientRequest (assigned,
    not added), the reasons are over `total` candidates."""
    counts = Counter(found.counts)
    if found.chosen:
        counts[r.ALLOCATED_CARDS_INSUFFICIENT_REQUEST] = len(found.chosen)
    return FitOutcome(False, tuple(found.chosen), r.gen_reason(counts, total))


def fit(devices: Sequence[DeviceUsage], request: DeviceRequest, ctx: FitContext, rules: Rules) -> FitOutcome:
    """The whole template Fit: success with the first `nums` devices that pass, else the failure."""
    found = run(devices, request, ctx, rules)
    if found.done:
        return FitOutcome(True, tuple(found.chosen))
    return failure(found, len(devices))
