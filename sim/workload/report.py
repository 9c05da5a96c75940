"""The demo's verdict, computed from the API server alone — independently of the scheduler's own cache.

Per device, the usage of bound, non-terminated pods is rebuilt from each pod's allocation annotations,
every vendor's (`hami.io/vgpu-devices-allocated`, `hami.io/<cw>-devices-allocated`, ...; one `;` group per
container, init containers first): a pod's init
containers run one after another before its regular containers, so its use of a device is the larger of the
init peak and the sum over regular containers, per dimension (slots: the number of regular containers on the
device, at least 1); once every init container terminated with exit code 0, only the regular containers
count (the init containers' memory is free again — HAMi's AppContainersOnlyDeviceUsage). The sums over pods
are compared with each device's `count`, `devmem` and `devcore` as the vendors register or derive them
(`app.core.inventory`), and the holders of each device are judged by their vendor's sharing rules as well
(sim.workload.devicerules: AWS Neuron core masks, whole cards, Kunlunxin vXPU templates, Metax sGPU classes
and QoS). A device a pod names that is not on the pod's node is "misplaced". Bound pods are also counted per
vendor (`pods_bound_by_vendor`), with their bind phases (`bind_phases_by_vendor`). What the demo prints
from the same objects is sim.workload.terminal.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.core import codec
from app.core.inventory import NodeUnregistered, decode_node
from app.core.model import ContainerDevice, ContainerDevices, DeviceInfo
from app.devices import build_vendors
from sim.kit import podutil
from sim.nodes.twobackends import TWO_BACKEND_SECTIONS
from sim.workload.devicerules import Holder, conflicts
from sim.workload.mix import KIND_LABEL

LOCK = "hami.io/mutex.lock"
# every vendor the simulator has nodes of, with the chart's settings (Ascend's chips included)
VENDORS = build_vendors(
    {
        "cambricon": {"resourceCountName": "cambricon.com/vmlu"},
        "hygon": {"resourceCountName": "hygon.com/dcunum"},
        "mthreads": {"resourceCountName": "mthreads.com/vgpu"},
        "awsneuron": {"resourceCountName": "aws.amazon.com/neuron"},
        "amd": {"resourceCountName": "amd.com/gpu"},
        "vastai": {"resourceCountName": "vastaitech.com/va"},
        "biren": {"resourceCountName": "birentech.com/gpu"},
        **TWO_BACKEND_SECTIONS,
    },
    frozenset({"ascend", "iluvatar"}),
)
ALLOCATED_BY_VENDOR = {v.key: v.allocated_annotation for v in VENDORS}
VENDOR_BY_KEY = {v.key: v for v in VENDORS}
LOCKS = frozenset(spec.annotation for v in VENDORS if (spec := v.lock) is not None)
BIND_PHASE = "hami.io/bind-phase"
Obj = dict[str, Any]


@dataclass
class DeviceLoad:
    node: str
    device: DeviceInfo
    slots: int = 0
    mem: int = 0
    cores: int = 0
    pods: list[str] = field(default_factory=list)
    holders: list[Holder] = field(default_factory=list)

    def over(self) -> list[str]:
        """The dimensions in which this device is over capacity, then the vendor rules its holders break."""
        d = self.device
        checks = (
            ("slots", self.slots, d.count),
            ("memory", self.mem, d.devmem),
            ("cores", self.cores, d.devcore),
        )
        over = [what for what, used, cap in checks if used > cap]
        return over + conflicts(d, VENDOR_BY_KEY.get(d.vendor), self.holders)


def inventory(nodes: Iterable[Mapping[str, Any]]) -> dict[str, tuple[DeviceInfo, ...]]:
    """Node name -> registered devices of every vendor (nodes that do not decode are left out)."""
    result = {}
    for node in nodes:
        try:
            result[podutil.name(node)] = decode_node(node, VENDORS).devices
        except NodeUnregistered:
            continue
    return result


def init_finished(pod: Mapping[str, Any]) -> bool:
    """Every init container terminated with exit code 0: their devices are free again."""
    status = pod.get("status")
    statuses = status.get("initContainerStatuses") if isinstance(status, Mapping) else None
    if not isinstance(statuses, list) or not statuses:
        return False
    return all(((s.get("state") or {}).get("terminated") or {}).get("exitCode", 1) == 0 for s in statuses)


def vendors_of(pod: Mapping[str, Any]) -> list[str]:
    """The vendors whose allocation annotation names a device for the pod (undecodable ones name none)."""
    notes = podutil.annotations_of(pod)
    found = []
    for key, annotation in ALLOCATED_BY_VENDOR.items():
        try:
            if any(codec.decode_pod_single_device(notes.get(annotation, ""))):
                found.append(key)
        except codec.CodecError:
            continue
    return found


def pod_device_use(pod: Mapping[str, Any]) -> dict[str, tuple[int, int, int]]:
    """Device UUID -> (slots, mem, cores) this pod holds, init containers collapsed (see module doc), over
    every vendor's allocation annotation."""
    use: dict[str, tuple[int, int, int]] = {}
    notes = podutil.annotations_of(pod)
    for annotation in ALLOCATED_BY_VENDOR.values():
        value = notes.get(annotation, "")
        if value:
            use.update(_collapsed(pod, list(codec.decode_pod_single_device(value))))
    return use


def pod_device_entries(pod: Mapping[str, Any]) -> dict[str, tuple[ContainerDevice, ...]]:
    """Device UUID -> every entry of the pod's allocations naming it (each container's, as recorded)."""
    entries: dict[str, list[ContainerDevice]] = {}
    notes = podutil.annotations_of(pod)
    for annotation in ALLOCATED_BY_VENDOR.values():
        value = notes.get(annotation, "")
        if value:
            for group in codec.decode_pod_single_device(value):
                for device in group:
                    entries.setdefault(device.uuid, []).append(device)
    return {uuid: tuple(found) for uuid, found in entries.items()}


def _collapsed(pod: Mapping[str, Any], groups: list[ContainerDevices]) -> dict[str, tuple[int, int, int]]:
    init_count = len(podutil.containers(pod, init=True))
    skip_init = init_finished(pod)
    init_peak: dict[str, tuple[int, int]] = {}
    app: dict[str, tuple[int, int, int]] = {}
    for index, group in enumerate(groups):
        for device in group:
            if index < init_count and skip_init:
                continue
            if index < init_count:
                mem, cores = init_peak.get(device.uuid, (0, 0))
                init_peak[device.uuid] = (max(mem, device.usedmem), max(cores, device.usedcores))
            else:
                slots, mem, cores = app.get(device.uuid, (0, 0, 0))
                app[device.uuid] = (slots + 1, mem + device.usedmem, cores + device.usedcores)
    use = {}
    for uuid in set(init_peak) | set(app):
        i_mem, i_cores = init_peak.get(uuid, (0, 0))
        a_slots, a_mem, a_cores = app.get(uuid, (0, 0, 0))
        use[uuid] = (max(1, a_slots), max(i_mem, a_mem), max(i_cores, a_cores))
    return use


def device_loads(
    pods: Iterable[Mapping[str, Any]], devices: Mapping[str, tuple[DeviceInfo, ...]]
) -> tuple[list[DeviceLoad], list[str], list[str]]:
    """Per-device load of bound, non-terminated pods; misplaced device references; undecodable pods."""
    loads = {(node, d.id): DeviceLoad(node, d) for node, devs in devices.items() for d in devs}
    misplaced: list[str] = []
    broken: list[str] = []
    for pod in pods:
        node = podutil.node_name(pod)
        if not node or podutil.phase(pod) in podutil.TERMINAL:
            continue
        try:
            use, entries = pod_device_use(pod), pod_device_entries(pod)
        except codec.CodecError as exc:
            broken.append(f"{podutil.key(pod)}: {exc}")
            continue
        for uuid, (slots, mem, cores) in use.items():
            load = loads.get((node, uuid))
            if load is None:
                misplaced.append(f"{podutil.key(pod)} on {node} names {uuid}")
                continue
            load.slots += slots
            load.mem += mem
            load.cores += cores
            load.pods.append(podutil.key(pod))
            notes = podutil.annotations_of(pod)
            load.holders.append(Holder(podutil.key(pod), entries.get(uuid, ()), notes))
    return list(loads.values()), misplaced, broken


def kind_of(pod: Mapping[str, Any]) -> str:
    return podutil.labels(pod).get(KIND_LABEL, "?")


def outcome_of(pod: Mapping[str, Any]) -> str:
    if podutil.node_name(pod):
        return "bound"
    if podutil.unschedulable_reason(pod) is not None:
        return "unschedulable"
    return "pending"


def summarize(pods: list[Obj], nodes: list[Obj]) -> Obj:
    """The API-derived part of the report."""
    devices = inventory(nodes)
    loads, misplaced, broken = device_loads(pods, devices)
    outcomes = Counter(outcome_of(p) for p in pods)
    by_kind: dict[str, Counter[str]] = {}
    for pod in pods:
        by_kind.setdefault(kind_of(pod), Counter())[outcome_of(pod)] += 1
    phases = Counter(podutil.phase(p) for p in pods if podutil.node_name(p))
    by_vendor = Counter(key for p in pods if podutil.node_name(p) for key in vendors_of(p))
    bind_phases = Counter(
        podutil.annotations_of(p).get(BIND_PHASE, "-") for p in pods if podutil.node_name(p)
    )
    phases_by_vendor: dict[str, Counter[str]] = {}
    for pod in pods:
        if podutil.node_name(pod):
            for key in vendors_of(pod):
                phase = podutil.annotations_of(pod).get(BIND_PHASE, "-")
                phases_by_vendor.setdefault(key, Counter())[phase] += 1
    over = [
        {
            "node": load.node,
            "device": load.device.id,
            "over": load.over(),
            "slots": load.slots,
            "memory": load.mem,
            "cores": load.cores,
            "pods": load.pods,
        }
        for load in loads
        if load.over()
    ]
    total_mem = sum(load.device.devmem for load in loads) or 1
    total_cores = sum(load.device.devcore for load in loads) or 1
    locks = sorted(podutil.name(n) for n in nodes if LOCKS & podutil.annotations_of(n).keys())
    return {
        "pods_total": len(pods),
        "pods_bound": outcomes["bound"],
        "pods_unschedulable": outcomes["unschedulable"],
        "pods_pending": outcomes["pending"],
        "pods_by_phase": dict(sorted(phases.items())),
        "bind_phases": dict(sorted(bind_phases.items())),
        "bind_phases_by_vendor": {k: dict(sorted(v.items())) for k, v in sorted(phases_by_vendor.items())},
        "pods_by_kind": {k: dict(sorted(v.items())) for k, v in sorted(by_kind.items())},
        "pods_bound_by_vendor": dict(sorted(by_vendor.items())),
        "oversubscribed_devices": len(over),
        "oversubscribed": over,
        "misplaced_devices": misplaced,
        "undecodable_allocations": broken,
        "node_locks_held": len(locks),
        "locked_nodes": locks,
        "nodes": len(nodes),
        "gpus": len(loads),
        "gpus_in_use": sum(1 for load in loads if load.pods),
        "gpu_memory_allocated_pct": round(100.0 * sum(load.mem for load in loads) / total_mem, 1),
        "gpu_cores_allocated_pct": round(100.0 * sum(load.cores for load in loads) / total_cores, 1),
        "rejected": {
            podutil.key(p): podutil.unschedulable_reason(p) or ""
            for p in pods
            if outcome_of(p) == "unschedulable"
        },
    }


def histogram_quantile_ms(metrics: str, name: str, q: float, phase: str = "") -> float:
    """Prometheus' histogram_quantile over histogram `name` (only its series of `phase` when given) in a
    text exposition (linear within the bucket), in milliseconds; 0.0 without observations."""
    buckets: list[tuple[float, float]] = []
    prefix = f"{name}_bucket{{"
    for line in metrics.splitlines():
        if not line.startswith(prefix) or (phase and f'phase="{phase}"' not in line):
            continue
        labels, _, value = line.rpartition(" ")
        le = labels.split('le="', 1)[1].split('"', 1)[0]
        buckets.append((float("inf") if le == "+Inf" else float(le), float(value)))
    buckets.sort()
    total = buckets[-1][1] if buckets else 0.0
    if total <= 0:
        return 0.0
    rank, lower, below = q * total, 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if bound == float("inf"):
                return round(lower * 1000.0, 3)
            width = count - below
            fraction = (rank - below) / width if width > 0 else 1.0
            return round((lower + (bound - lower) * fraction) * 1000.0, 3)
        lower, below = bound, count
    return round(lower * 1000.0, 3)
