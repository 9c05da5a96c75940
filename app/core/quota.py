"""GPU memory and core quotas per namespace (reference §6.3).

Only `limits.<memory-resource>` and `limits.<core-resource>` keys of ResourceQuotas are tracked, and the
used amount is the sum over the namespace's reservations, as HAMi's QuotaManager keeps it. Where several
ResourceQuotas in one namespace set the same key, HAMi lets the last one win and deleting any of them clears
the limit (quirk #35); we use the smallest limit, as the API server's own quota admission would
(docs/compatibility.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from app.core import quantity
from app.core.model import PodDevices, PodRequests, QuotaEntry, QuotaView
from app.core.vendor import Vendor, quota_amounts

QUOTA_PREFIX = "limits."


def tracked_resources(vendors: Sequence[Vendor]) -> set[str]:
    names: set[str] = set()
    for vendor in vendors:
        names.update(n for n in (vendor.resources.memory, vendor.resources.cores) if n)
    return names


def quota_limits(quotas: Iterable[Mapping[str, Any]], vendors: Sequence[Vendor]) -> dict[str, dict[str, int]]:
    """namespace -> resource -> limit, from ResourceQuota objects (smallest limit wins)."""
    tracked = tracked_resources(vendors)
    limits: dict[str, dict[str, int]] = {}
    for quota in quotas:
        metadata = quota.get("metadata") or {}
        spec = quota.get("spec") or {}
        hard = spec.get("hard") if isinstance(spec, Mapping) else None
        namespace = metadata.get("namespace") if isinstance(metadata, Mapping) else None
        if not isinstance(hard, Mapping) or not isinstance(namespace, str):
            continue
        for key, value in hard.items():
            if not isinstance(key, str) or not key.startswith(QUOTA_PREFIX):
                continue
            name = key[len(QUOTA_PREFIX) :]
            amount = quantity.as_int64(value)
            if name not in tracked or amount is None:
                continue
            current = limits.setdefault(namespace, {}).get(name)
            limits[namespace][name] = amount if current is None else min(current, amount)
    return limits


def pod_quota_use(collapsed: PodDevices, vendors: Sequence[Vendor]) -> dict[str, int]:
    """resource -> amount one (collapsed) allocation counts against its namespace quota."""
    by_key = {v.key: v for v in vendors}
    use: dict[str, int] = {}
    for key, containers in collapsed.items():
        vendor = by_key.get(key)
        if vendor is None:
            continue
        amounts = [quota_amounts(vendor, d) for devices in containers for d in devices]
        mem, cores = sum(a[0] for a in amounts), sum(a[1] for a in amounts)
        for name, amount in ((vendor.resources.memory, mem), (vendor.resources.cores, cores)):
            if name:
                use[name] = use.get(name, 0) + amount
    return use


def build_view(limits: Mapping[str, Mapping[str, int]], used: Mapping[str, Mapping[str, int]]) -> QuotaView:
    """Combine limits and used amounts into HAMi-shaped entries."""
    view: dict[str, dict[str, QuotaEntry]] = {}
    for namespace in limits.keys() | used.keys():
        names = limits.get(namespace, {}).keys() | used.get(namespace, {}).keys()
        view[namespace] = {
            name: QuotaEntry(
                used=used.get(namespace, {}).get(name, 0),
                limit=limits.get(namespace, {}).get(name, 0),
                limit_set=name in limits.get(namespace, {}),
            )
            for name in names
        }
    return view


def limited(quota: QuotaView, namespace: str, vendor: Vendor) -> bool:
    """Is there a limit `fits` may refuse by? (Without one it is true whatever the amounts.)"""
    entries = quota.get(namespace)
    if entries is None:
        return False
    return any(
        entry is not None and entry.limit_set
        for entry in (entries.get(vendor.resources.memory), entries.get(vendor.resources.cores))
    )


def excess(quota: QuotaView, namespace: str, vendor: Vendor, mem: int, cores: int) -> str | None:
    """Why `mem`/`cores` more would not stay within the namespace's limits (HAMi `FitQuota` false), or None.

    The first resource over its limit, as `limits.<resource> in namespace <ns>: used U, limit L, requested
    R` in the units the comparison uses (memory in MiB times `memoryFactor`, whose limit is scaled alike)."""
    entries = quota.get(namespace)
    if entries is None:
        return None
    memory = entries.get(vendor.resources.memory)
    if memory is not None and memory.limit_set:
        limit = memory.limit * vendor.memory_factor if vendor.memory_factor > 1 else memory.limit
        if memory.used + mem > limit:
            scaled = (
                f" ({memory.limit} x memoryFactor {vendor.memory_factor})" if limit != memory.limit else ""
            )
            return _excess(vendor.resources.memory, namespace, memory.used, f"{limit}{scaled}", mem)
    core = entries.get(vendor.resources.cores)
    if core is not None and core.limit_set and core.used + cores > core.limit:
        return _excess(vendor.resources.cores, namespace, core.used, str(core.limit), cores)
    return None


def _excess(name: str, namespace: str, used: int, limit: str, requested: int) -> str:
    return f"{QUOTA_PREFIX}{name} in namespace {namespace}: used {used}, limit {limit}, requested {requested}"


def fits(quota: QuotaView, namespace: str, vendor: Vendor, mem: int, cores: int) -> bool:
    """HAMi `FitQuota`: would `mem`/`cores` more stay within the namespace's limits?"""
    return excess(quota, namespace, vendor, mem, cores) is None


def admission_excess(
    requests: PodRequests, vendors: Sequence[Vendor], quota: QuotaView, namespace: str
) -> str | None:
    """HAMi `fitResourceQuota`: the pod's peak (init max vs app sum) of memory and cores must fit; None when
    it does, else what exceeds (`excess`) for the first vendor that does not fit.

    Percentage-based memory counts as 0 here because the card is not known yet (quirk #4).
    """
    for vendor in vendors:
        if not vendor.resources.memory and not vendor.resources.cores:
            continue
        app_mem = app_cores = init_mem = init_cores = 0
        for position, container in enumerate(requests.containers):
            request = container.get(vendor.key)
            if request is None or request.nums <= 0:
                continue
            mem, cores = request.memreq * request.nums, request.coresreq * request.nums
            if position < requests.init_count:
                init_mem, init_cores = max(init_mem, mem), max(init_cores, cores)
            else:
                app_mem, app_cores = app_mem + mem, app_cores + cores
        mem, cores = max(app_mem, init_mem), max(app_cores, init_cores)
        if mem == 0 and cores == 0:
            continue
        found = excess(quota, namespace, vendor, mem, cores)
        if found is not None:
            return found
    return None
