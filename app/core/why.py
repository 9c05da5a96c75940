"""The numbers behind HAMi's reason strings, for `explain`: why a node does not fit, in amounts.

Why it exists: a node's failure reason is HAMi's `GenReason` (`2/2 CardInsufficientMemory`), kept byte-exact
in FailedNodes and events because tools match it; it counts devices, not amounts. Here each reason key a
node reports gets one sentence with the amounts behind it, computed from the same request, devices and usage
the decision used: `asks 200000 MiB on one device; the most free on any of its 8 devices is 81559 MiB`. The
reason strings themselves are never changed. Amounts read in the vendor's units (app.core.units).

What is compared is the node before this pod (each container's request against the node's devices as
they are), so for a pod with several containers a sentence may describe a device that an earlier container
of the same pod would have taken first; the counts in HAMi's reason remain the authority.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from app.core import quota, reasons, units
from app.core.model import PERCENT_UNSET, DeviceRequest, DeviceUsage, NodeDevices, NodeUse, QuotaView
from app.core.usage import working_devices
from app.core.vendor import CoreMasks, Vendor

_COUNTED = re.compile(r"^(\d+)/(\d+) (\S+)$")


@dataclass(frozen=True, slots=True)
class Asked:
    """One container's request of one vendor (`container` names it in the sentences)."""

    container: str
    vendor: Vendor
    request: DeviceRequest


@dataclass(frozen=True, slots=True)
class _Facts:
    asked: Asked
    devices: Sequence[DeviceUsage]  # the vendor's devices on the node, usage applied
    count: int  # devices HAMi's reason counts for this key
    total: int
    annotations: Mapping[str, str]
    quota: QuotaView
    namespace: str


def counted(reason: str) -> list[tuple[str, int, int]]:
    """(key, count, total) per part of a `GenReason` string; a part without a count is (part, 0, 0)."""
    parts = []
    for part in reason.split(", "):
        match = _COUNTED.match(part)
        parts.append((match.group(3), int(match.group(1)), int(match.group(2))) if match else (part, 0, 0))
    return parts


def _mem(facts: _Facts, amount: int) -> str:
    return units.memory_text(facts.asked.vendor, amount)


def _cores(facts: _Facts, amount: int) -> str:
    return units.cores_text(facts.asked.vendor, amount)


def _memory(facts: _Facts) -> str:
    request, devices = facts.asked.request, facts.devices
    best = max(devices, key=lambda d: d.totalmem - d.usedmem)
    free = (
        f"the most free on any of its {len(devices)} devices is {_mem(facts, best.totalmem - best.usedmem)}"
    )
    if request.memreq > 0 or request.mem_percentage == PERCENT_UNSET:
        return f"asks {_mem(facts, request.memreq)} on one device; {free}"
    share = best.totalmem * request.mem_percentage // 100
    return (
        f"asks {request.mem_percentage}% of one device's memory ({_mem(facts, share)} of "
        f"{_mem(facts, best.totalmem)} on the device with the most free); {free}"
    )


def _core_share(facts: _Facts) -> str:
    devices = facts.devices
    asked = units.request_cores_text(facts.asked.vendor, facts.asked.request.coresreq)
    if isinstance(facts.asked.vendor, CoreMasks):  # cores are bits: count the free ones
        free = max((d.totalcore & ~d.usedcores).bit_count() for d in devices)
        most = f"{free} of {max(d.totalcore.bit_count() for d in devices)} cores"
    else:
        best = max(devices, key=lambda d: d.totalcore - d.usedcores)
        most = f"{_cores(facts, best.totalcore - best.usedcores)} of {_cores(facts, best.totalcore)}"
    return f"asks {asked} on one device; the most free on any of its {len(devices)} devices is {most}"


def _busy(facts: _Facts) -> str:
    busy = sum(1 for d in facts.devices if d.used > 0)
    return (
        f"asks a device of its own (whole device or mutex policy); {busy} of {len(facts.devices)} run tasks"
    )


def _slots(facts: _Facts) -> str:
    full = [d for d in facts.devices if d.count <= d.used]
    limit = f"{full[0].count} tasks each" if full else "their task limit"
    return f"{len(full)} of {len(facts.devices)} devices are full ({limit})"


def _exhausted(facts: _Facts) -> str:
    gone = sum(1 for d in facts.devices if d.totalcore and d.usedcores >= d.totalcore)
    return (
        f"asks no cores, which needs a device with cores left; {gone} of {len(facts.devices)} have all their "
        "cores taken"
    )


def _cordoned(facts: _Facts) -> str:
    return f"{facts.count} of {facts.total} devices are cordoned (the node's hami.io/device-cordon)"


def _unhealthy(facts: _Facts) -> str:
    sick = sum(1 for d in facts.devices if not d.health)
    return f"{sick} of {len(facts.devices)} devices are unhealthy"


def _selectors(word: str) -> Callable[[_Facts], str]:
    def sentence(facts: _Facts) -> str:
        keys = sorted(k for k in facts.annotations if word in k.lower())
        types = sorted({d.type for d in facts.devices})
        chosen = f"the pod's selectors ({', '.join(keys)})" if keys else "the pod's selectors"
        return f"{chosen} leave out {facts.count} of {facts.total} devices (types here: {', '.join(types)})"

    return sentence


def _quota(facts: _Facts) -> str:
    request, vendor = facts.asked.request, facts.asked.vendor
    mem = request.memreq * request.nums
    over = quota.excess(facts.quota, facts.namespace, vendor, mem, request.coresreq * request.nums)
    return (
        f"namespace quota: {over}"
        if over
        else "the namespace's quota is used up on the devices it would take"
    )


def _fewer(facts: _Facts) -> str:
    return f"asks {facts.asked.request.nums} devices; {facts.count} of {facts.total} fit"


def _numa(facts: _Facts) -> str:
    groups: dict[int, int] = {}
    for d in facts.devices:
        groups[d.numa] = groups.get(d.numa, 0) + 1
    layout = ", ".join(f"NUMA {numa}: {n}" for numa, n in sorted(groups.items()))
    return (
        f"asks {facts.asked.request.nums} devices together (NUMA or topology rule); devices here by {layout}"
    )


SENTENCES: Mapping[str, Callable[[_Facts], str]] = {
    reasons.CARD_INSUFFICIENT_MEMORY: _memory,
    reasons.CARD_INSUFFICIENT_CORE: _core_share,
    reasons.EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT: _busy,
    reasons.CARD_TIME_SLICING_EXHAUSTED: _slots,
    reasons.CARD_COMPUTE_UNITS_EXHAUSTED: _exhausted,
    reasons.CARD_NOT_HEALTH: _unhealthy,
    reasons.CARD_CORDONED: _cordoned,
    reasons.CARD_UNHEALTHY: _unhealthy,
    reasons.CARD_TYPE_MISMATCH: _selectors("type"),
    reasons.CARD_UUID_MISMATCH: _selectors("uuid"),
    reasons.RESOURCE_QUOTA_NOT_FIT: _quota,
    reasons.ALLOCATED_CARDS_INSUFFICIENT_REQUEST: _fewer,
    reasons.NUMA_NOT_FIT: _numa,
}


def _generic(key: str, facts: _Facts) -> str:
    return f"{facts.count} of {facts.total} devices refused by {facts.asked.vendor.key}'s rule {key}"


def numbers(
    reason: str,
    node: NodeDevices,
    use: NodeUse,
    asked: Sequence[Asked],
    annotations: Mapping[str, str],
    quota_view: QuotaView,
    namespace: str,
) -> list[str]:
    """One sentence per reason key of `reason` (a failed node's), for each request it can concern."""
    working = working_devices(node, use)
    lines: list[str] = []
    named = len({a.container for a in asked}) > 1
    for key, count, total in counted(reason):
        for one in asked:
            devices = [d for d in working if one.vendor.sees(d.type, d.vendor)]
            prefix = f"container {one.container}: " if named else ""
            if key == reasons.NODE_INSUFFICIENT_DEVICE:
                has = f"the node has {len(devices)}"
                lines.append(f"{prefix}{key}: asks {one.request.nums} {one.vendor.key} devices; {has}")
                continue
            if not total or not devices or total != len(devices):
                continue  # not this vendor's count (or a reason without one: node unregistered, ...)
            facts = _Facts(one, devices, count, total, annotations, quota_view, namespace)
            sentence = SENTENCES.get(key)
            lines.append(f"{prefix}{key}: {sentence(facts) if sentence else _generic(key, facts)}")
    return list(dict.fromkeys(lines))
