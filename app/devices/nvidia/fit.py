"""NVIDIA `Fit`: choose GPUs for one container from a sorted candidate list (reference §4.7).

Candidates are tried from the END of the list (the policy sorted the preferred device last). For each
device the first failing check, in HAMi's order, counts towards the reason string; the order matters
because it decides which reason a user sees (quota before memory, memory before cores, ...).

A `mig`-mode GPU that passes is tried again at once for another slice of the same container (HAMi's `i++`):
only placement availability (check 13) limits how many slices one GPU gives a container; its slots, memory
and cores are not updated between those passes (quirk #12, kept).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import combinations

from app.core import reasons as r
from app.core.model import ContainerDevice, DeviceRequest, DeviceUsage, NodeDevices
from app.core.policy import MUTEX, TOPOLOGY, numa_bind, policy_contains
from app.core.vendor import FitContext, FitOutcome
from app.devices.common.template import memory_request
from app.devices.nvidia import keys, mig
from app.devices.nvidia.config import MigAllowlistEntry


def _entries(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def type_allowed(annotations: Mapping[str, str], device_type: str) -> bool:
    """use/nouse-gputype: case-insensitive substring match (quirk #7: `A10` also selects `A100`)."""
    card = device_type.upper()
    use = _entries(annotations.get(keys.USE_TYPE, ""))
    if use and not any(entry.upper() in card for entry in use):
        return False
    nouse = _entries(annotations.get(keys.NOUSE_TYPE, ""))
    return not any(entry.upper() in card for entry in nouse)


def mode_allowed(annotations: Mapping[str, str], mode: str) -> bool:
    """`nvidia.com/vgpu-mode` must contain the device mode (an empty mode always matches)."""
    wanted = annotations.get(keys.VGPU_MODE)
    return wanted is None or mode in wanted


def uuid_allowed(annotations: Mapping[str, str], uuid: str) -> bool:
    """use-gpuuuid (exact allow-list) and nouse-gpuuuid (exact exclusion) both apply (§3.3, HAMi #1965)."""
    use = _entries(annotations.get(keys.USE_UUID, ""))
    if use and uuid not in use:
        return False
    return uuid not in _entries(annotations.get(keys.NOUSE_UUID, ""))


def _pair_score(node: NodeDevices, a: str, b: str) -> int:
    for device in node.devices:
        if device.id == a:
            return device.pair_scores.get(b, 0)
    return 0


def _worst_connected(node: NodeDevices, chosen: Sequence[ContainerDevice]) -> ContainerDevice:
    """The single candidate with the lowest summed pair score to the others (first wins ties)."""
    worst: ContainerDevice | None = None
    worst_score = 0
    for one in chosen:
        total = sum(_pair_score(node, one.uuid, other.uuid) for other in chosen if other.uuid != one.uuid)
        if worst is None or total < worst_score:
            worst, worst_score = one, total
    assert worst is not None
    return worst


def _best_combination(
    node: NodeDevices, chosen: Sequence[ContainerDevice], size: int
) -> tuple[ContainerDevice, ...]:
    """The combination (in candidate order) with the highest summed pairwise score (first wins ties)."""
    best: tuple[ContainerDevice, ...] | None = None
    best_score = 0
    for combo in combinations(chosen, size):
        total = sum(
            _pair_score(node, combo[i].uuid, combo[j].uuid)
            for i in range(len(combo) - 1)
            for j in range(i + 1, len(combo))
        )
        if best is None or total > best_score:  # HAMi: `!found || totalScore > bestScore`
            best, best_score = combo, total
    assert best is not None
    return best


def fit(
    devices: Sequence[DeviceUsage],
    request: DeviceRequest,
    ctx: FitContext,
    allowlist: Sequence[MigAllowlistEntry] = (),
) -> FitOutcome:
    annotations = ctx.pod_annotations
    original = nums = request.nums
    cores = request.coresreq
    prev_numa = -1
    chosen: list[ContainerDevice] = []
    counts: Counter[str] = Counter()
    topology = policy_contains(ctx.policy, TOPOLOGY)
    mutex = policy_contains(ctx.policy, MUTEX)
    bind = numa_bind(annotations)
    i = len(devices)
    while i > 0:
        i -= 1
        d = devices[i]
        if not d.health:
            counts[r.CARD_NOT_HEALTH] += 1
            continue
        if d.id in ctx.node.cordoned:
            counts[r.CARD_CORDONED] += 1
            continue
        if (
            request.type != keys.VENDOR
            or not type_allowed(annotations, d.type)
            or not mode_allowed(annotations, d.mode)
        ):
            counts[r.CARD_TYPE_MISMATCH] += 1
            continue
        if bind and d.numa != prev_numa:
            if nums != original:
                counts[r.NUMA_NOT_FIT] += len(chosen)  # Go: += len(tmpDevs[k.Type]), the discarded run
            nums, prev_numa, chosen = original, d.numa, []
        if not uuid_allowed(annotations, d.id):
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
        candidate = ContainerDevice(d.id, keys.VENDOR, memreq, cores, idx=d.index)
        if not ctx.quota_fits([*chosen, candidate]):
            counts[r.RESOURCE_QUOTA_NOT_FIT] += 1
            continue
        if d.totalmem - d.usedmem < memreq:
            counts[r.CARD_INSUFFICIENT_MEMORY] += 1
            continue
        if d.totalcore - d.usedcores < cores:
            counts[r.CARD_INSUFFICIENT_CORE] += 1
            continue
        if d.totalcore == 100 and cores == 100 and d.used > 0:
            counts[r.EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT] += 1
            continue
        if d.totalcore != 0 and d.usedcores == d.totalcore and cores == 0:
            counts[r.CARD_COMPUTE_UNITS_EXHAUSTED] += 1
            continue
        if d.mode == keys.MIG_MODE:
            queued = [c.usedmem for c in chosen if c.uuid == d.id]
            if not mig.fits(mig.usable_profiles(d, allowlist), d.mig_in_use, queued, memreq):
                counts[r.CARD_MIG_TOPOLOGY_INFEASIBLE] += 1
                continue
        if nums > 0:
            if not topology:
                nums -= 1
            chosen.append(candidate)
        if nums == 0 and not topology:
            return FitOutcome(True, tuple(chosen))
        if d.mode == keys.MIG_MODE:
            i += 1  # the same GPU again, for another slice
    if topology:
        if len(chosen) == original:
            return FitOutcome(True, tuple(chosen))
        if len(chosen) > original:
            if original == 1:
                return FitOutcome(True, (_worst_connected(ctx.node, chosen),))
            return FitOutcome(True, _best_combination(ctx.node, chosen, original))
    if chosen:
        counts[r.ALLOCATED_CARDS_INSUFFICIENT_REQUEST] = len(chosen)  # Go: = len(tmpDevs[k.Type])
    return FitOutcome(False, tuple(chosen), r.gen_reason(counts, len(devices)))
