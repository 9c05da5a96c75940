"""Metax sGPU `Fit` and `ScoreNode` (reference vendors §2.5, quirks §3.5).

HAMi's own loop, not the template: from the end of the sorted list, the first failing check of a device
counts its reason, in this order: type, health (`CardUnhealthy`), app class, QoS (not for online pods),
UUID, slots, mutex, memory, then for pods that are not online cores, exclusive use and exhausted compute.
Every device that passes is a candidate; with more candidates than needed an online pod prefers devices with
fewer online tasks (and avoids devices running only offline tasks), an exclusive request (100 cores)
prefers devices of one MetaLink zone (`LinkZone`), smallest fitting zone first.

The tasks on a device (HAMi's PodInfos) and their QoS are the device's usage tags (`Vendor.usage_tags`:
`app=<class>`, `qos=<policy>`), kept in the ledger and rebuilt from the pods' annotations, where HAMi keeps
a process cache that other replicas and a restarted scheduler do not have (§3.5 #3, V§3.0 #5). A used
device's QoS is its holders'; without holders that have one, what the node reports (`qosPolicy`).

Ties HAMi leaves to map order and an unstable sort (§3.5 #2) keep the order the devices were tried in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from app.core import reasons as r
from app.core.model import ContainerDevice, DeviceInfo, DeviceRequest, DeviceUsage, DeviceUse
from app.core.policy import MUTEX, SPREAD, go_parse_bool, policy_contains
from app.core.recheck import capacity_misfit
from app.core.score import f32
from app.core.vendor import FitContext, FitOutcome, ScoreContext
from app.devices.common import placement
from app.devices.common.selectors import uuid_allowed
from app.devices.common.template import memory_request

VENDOR = "Metax-SGPU"
APP_CLASS = "metax-tech.com/sgpu-app-class"
QOS_POLICY = "metax-tech.com/sgpu-qos-policy"
TOPOLOGY_AWARE = "metax-tech.com/sgpu-topology-aware"
USE_UUID, NOUSE_UUID = "metax-tech.com/use-gpuuuid", "metax-tech.com/nouse-gpuuuid"
ONLINE, OFFLINE = "online", "offline"
APP_TAG, QOS_TAG = "app=", "qos="
DIRECT_LINK_SCORE = 10
POLICY_NEUTRAL_WEIGHT = 10000


def usage_tags(annotations: Mapping[str, str]) -> tuple[str, ...]:
    """What later Fits must know about a pod on a device: its app class and (unless online) its QoS."""
    app = annotations.get(APP_CLASS, "")
    tags = [APP_TAG + app] if app in (ONLINE, OFFLINE) else []
    if app != ONLINE:
        tags.append(QOS_TAG + annotations.get(QOS_POLICY, ""))
    return tuple(tags)


def _classes(device: DeviceUsage) -> tuple[int, int]:
    """(online, offline) tasks on the device."""
    return device.tags.count(APP_TAG + ONLINE), device.tags.count(APP_TAG + OFFLINE)


def app_class_fits(requested: str, device: DeviceUsage) -> bool:
    """HAMi `checkAppClass`: online/offline pods share devices only with such pods (an offline pod never
    joins an online one); other pods only devices without them. An idle device takes anything."""
    if device.used == 0:
        return True
    online, offline = _classes(device)
    classed = online > 0 or offline > 0
    if classed != (requested in (ONLINE, OFFLINE)):
        return False
    return not (online > 0 and requested == OFFLINE)


def link_zone(device: DeviceUsage) -> int:
    value = device.custom.get("LinkZone")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def qos_fits(requested: str, device: DeviceUsage, request: DeviceRequest, own: bool) -> bool:
    """HAMi `checkDeviceQos`: an idle device or an exclusive request fits any QoS; otherwise the device's
    QoS (its holders', this pod's own earlier containers' included; else the node's report) must be unset
    or the pod's."""
    if device.used == 0 or request.coresreq == 100:
        return True
    held = [tag[len(QOS_TAG) :] for tag in device.tags if tag.startswith(QOS_TAG)]
    if held or own:
        return all(qos in ("", requested) for qos in held)
    reported = device.custom.get("QosPolicy")
    current = reported if isinstance(reported, str) else ""
    return current in ("", requested)


def _online_order(device: DeviceUsage) -> tuple[int, int, int]:
    """`prioritizeOnlineDevices`: devices running only offline tasks last (fewer of them first), the others
    by fewer online tasks, then fewer offline tasks."""
    online, offline = _classes(device)
    if online == 0 and offline > 0:
        return (1, offline, 0)
    return (0, online, offline)


def prioritize_exclusive(candidates: Sequence[DeviceUsage], nums: int) -> list[DeviceUsage]:
    """`prioritizeExclusiveDevices`: the smallest MetaLink zone with enough devices; else across zones
    (smallest first), then devices outside any zone; else the first candidates."""
    zones: dict[int, list[DeviceUsage]] = {}
    other: list[DeviceUsage] = []
    for device in candidates:
        zone = link_zone(device)
        if zone > 0:
            zones.setdefault(zone, []).append(device)
        else:
            other.append(device)
    ordered = sorted(zones.values(), key=len)
    for group in ordered:
        if len(group) >= nums:
            return group[:nums]
    picked: list[DeviceUsage] = []
    for device in [d for group in ordered for d in group] + other:
        picked.append(device)
        if len(picked) >= nums:
            return picked
    return list(candidates[:nums])


def fit(devices: Sequence[DeviceUsage], request: DeviceRequest, ctx: FitContext) -> FitOutcome:
    """HAMi `MetaxSDevices.Fit` (§2.5)."""
    annotations = ctx.pod_annotations
    app = annotations.get(APP_CLASS, "")
    qos = annotations.get(QOS_POLICY, "")
    mutex = policy_contains(ctx.policy, MUTEX)
    mine = {d.uuid for group in ctx.allocated for d in group}
    counts: Counter[str] = Counter()
    candidates: list[DeviceUsage] = []
    for i in range(len(devices) - 1, -1, -1):
        d = devices[i]
        if request.type != VENDOR:
            counts[r.CARD_TYPE_MISMATCH] += 1
        elif not d.health:
            counts[r.CARD_UNHEALTHY] += 1
        elif not app_class_fits(app, d):
            counts[r.CARD_APP_CLASS_MISMATCH] += 1
        elif app != ONLINE and not qos_fits(qos, d, request, d.id in mine):
            counts[r.CARD_QOS_POLICY_MISMATCH] += 1
        elif not uuid_allowed(annotations, USE_UUID, NOUSE_UUID, d.id):
            counts[r.CARD_UUID_MISMATCH] += 1
        elif d.count <= d.used:
            counts[r.CARD_TIME_SLICING_EXHAUSTED] += 1
        elif mutex and d.used > 0:
            counts[r.EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT] += 1
        elif d.totalmem - d.usedmem < memory_request(d, request):
            counts[r.CARD_INSUFFICIENT_MEMORY] += 1
        elif app != ONLINE and d.totalcore - d.usedcores < request.coresreq:
            counts[r.CARD_INSUFFICIENT_CORE] += 1
        elif app != ONLINE and d.totalcore == 100 and request.coresreq == 100 and d.used > 0:
            counts[r.EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT] += 1
        elif app != ONLINE and d.totalcore != 0 and d.usedcores == d.totalcore and request.coresreq == 0:
            counts[r.CARD_COMPUTE_UNITS_EXHAUSTED] += 1
        else:
            candidates.append(d)
    if len(candidates) < request.nums:
        if candidates:
            counts[r.ALLOCATED_CARDS_INSUFFICIENT_REQUEST] = len(candidates)
        return FitOutcome(False, (), r.gen_reason(counts, len(devices)))
    best = candidates[: request.nums]
    if len(candidates) > request.nums:
        if APP_CLASS in annotations:
            if app == ONLINE:
                best = sorted(candidates, key=_online_order)[: request.nums]
        elif request.coresreq == 100:
            best = prioritize_exclusive(candidates, request.nums)
    cores = 0 if app == ONLINE else request.coresreq
    chosen = tuple(
        ContainerDevice(d.id, VENDOR, memory_request(d, request), cores, idx=d.index) for d in best
    )
    return FitOutcome(True, chosen)


def placement_misfit(device: DeviceInfo, others: DeviceUse, own: DeviceUse) -> str:
    """`Placement`: capacity, then Fit's app class and QoS rules with the pod's own tags and the others',
    and (for pods that are not online) the exclusive and exhausted-compute rules."""
    why = capacity_misfit(device, others, own)
    if why:
        return why
    working = placement.working(device, others)
    app = next((tag[len(APP_TAG) :] for tag in own.tags if tag.startswith(APP_TAG)), "")
    qos = next((tag[len(QOS_TAG) :] for tag in own.tags if tag.startswith(QOS_TAG)), "")
    if not app_class_fits(app, working):
        online, offline = _classes(working)
        return (
            f"{device.id} runs {online} online and {offline} offline tasks, where this pod's class is {app!r}"
        )
    if app == ONLINE:
        return ""
    if not qos_fits(qos, working, DeviceRequest(1, VENDOR, own.mem, coresreq=own.cores), False):
        return f"{device.id} runs tasks of another QoS policy than this pod's {qos!r}"
    return placement.exclusive_misfit(working, own)


def _link_score(devices: Sequence[tuple[str, int]]) -> int:
    """`LinkDevices.Score`: 10 for every pair of distinct devices in one (non-zero) link zone."""
    score = 0
    for i, (uuid, zone) in enumerate(devices):
        for other, other_zone in devices[i + 1 :]:
            if uuid != other and zone != 0 and zone == other_zone:
                score += DIRECT_LINK_SCORE
    return score


def _online_score(ctx: ScoreContext, used: set[str]) -> int:
    """`scoreOnlineDevices`: -100 per offline task on devices running only offline tasks, else -20 per
    online and -2 per offline task, over the devices the pod takes (usage before the pod)."""
    result = 0
    for device in ctx.previous:
        if device.id not in used:
            continue
        online, offline = _classes(device)
        result += -100 * offline if offline > 0 and online == 0 else -20 * online - 2 * offline
    return result


def _exclusive_score(ctx: ScoreContext) -> int:
    """`scoreExclusiveDevices`: 10 x the links among the pod's exclusive devices, minus the links among
    idle devices it breaks."""
    zones = {d.id: link_zone(d) for d in ctx.previous}
    allocated = [(d.uuid, zones.get(d.uuid, 0)) for g in ctx.allocation for d in g if d.usedcores == 100]
    taken = {uuid for uuid, _ in allocated}
    available = [(d.id, link_zone(d)) for d in ctx.previous if d.used == 0]
    rest = [(uuid, zone) for uuid, zone in available if uuid not in taken]
    mine = _link_score(allocated)
    loss = _link_score(available) - mine - _link_score(rest)
    return 10 * mine - loss


def score(ctx: ScoreContext, topology_aware: bool) -> float:
    """§2.5 ScoreNode, policy-neutral: x10000 under binpack, x-10000 under spread (node_policy.go)."""
    chosen = [d for group in ctx.allocation for d in group]
    if not chosen:
        return 0.0
    weight = -POLICY_NEUTRAL_WEIGHT if ctx.node_policy == SPREAD else POLICY_NEUTRAL_WEIGHT
    if ctx.pod_annotations.get(APP_CLASS) == ONLINE:
        return f32(float(weight * _online_score(ctx, {d.uuid for d in chosen})))
    if not any(d.usedcores == 100 for d in chosen):
        return 0.0
    override = go_parse_bool(ctx.pod_annotations.get(TOPOLOGY_AWARE, ""))
    enabled = topology_aware if override is None else override
    return f32(float(weight * _exclusive_score(ctx))) if enabled else 0.0
