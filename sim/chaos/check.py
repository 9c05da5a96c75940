"""The chaos storm's verdict, from the API alone (read through the emulator's fault-free hooks) and from
the leader's own ledger file.

- Outcome per pod: `bound` (bound, Running or Succeeded, and allocated: no device left in any vendor's
  to-allocate annotation its device plugin consumes — `hami.io/vgpu-devices-to-allocate`, ... — and for
  an NVIDIA pod bind-phase `success`), `unschedulable` (not bound, rejected by the
  simulated kube-scheduler as unschedulable), else lost, with the reason: `pending` (neither bound nor
  rejected), `rejected-after-errors` (the scheduler gave up after errors, not for lack of capacity),
  `not-allocated` (bound but never allocated), `failed` (the kubelet failed it, e.g. Allocate served it
  another pod's devices) or `missing` (created, then gone).
- Oversubscription: sim.workload.report's per-device sums (init containers collapsed), and each vendor's
  sharing rules over the device's holders (sim.workload.devicerules: AWS Neuron core masks held twice, whole
  cards held twice, two Kunlunxin vXPU sizes on one device, Metax sGPU classes or QoS mixed).
- Leaked node locks: a `hami.io/mutex.lock` still on a node whose owner no longer needs it — gone, terminal,
  never bound (its bind failed), bound elsewhere, or bound and allocated. Only an owner bound to the node
  and still waiting for Allocate legitimately holds one (it then shows up as a lost pod instead).
- Ledger vs API: the leader's live ledger against a rebuild from a fresh pod list with the worker's own
  rules (`workers.reconcile.rebuild` and `compare`) and the vendors the replicas run with (a mixed cluster's
  device-config); plus rows whose pod no longer exists at all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from app.core import codec, nodelock
from app.core.vendor import Vendor
from app.devices import build_vendors
from app.state.ledger import Ledger
from sim.kit import podutil
from sim.nodes.vendors import PARTS
from sim.workload.mix import KIND_LABEL
from sim.workload.report import LOCK, device_loads, inventory
from workers.reconcile import Rules, compare, rebuild

Obj = dict[str, Any]
TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
# the to-allocate lists a device plugin consumes (HAMi's protocol; the other plugins read their own keys)
TO_ALLOCATE_KEYS = tuple(
    sorted({TO_ALLOCATE} | {p.to_allocate for make in PARTS.values() if (p := make("n")).plugin == "hami"})
)
ALLOCATED_PHASES = ("Running", "Succeeded")


def allocated(pod: Mapping[str, Any]) -> bool:
    notes = podutil.annotations_of(pod)
    if podutil.phase(pod) not in ALLOCATED_PHASES:
        return False
    if any(_names_devices(notes.get(key, "")) for key in TO_ALLOCATE_KEYS):
        return False
    return not podutil.gpu_containers(pod) or notes.get(nodelock.BIND_PHASE) == nodelock.PHASE_SUCCESS


def _names_devices(value: str) -> bool:
    """A to-allocate annotation that still lists a device (an unreadable one counts as listing one)."""
    if not value:
        return False
    try:
        return any(codec.decode_pod_single_device(value))
    except codec.CodecError:
        return True


def outcome_of(pod: Mapping[str, Any]) -> str:
    """bound, unschedulable, or the reason the pod is lost."""
    rejected = podutil.annotations_of(pod).get(podutil.REJECTED)
    if podutil.node_name(pod):
        if podutil.phase(pod) == "Failed":
            return "failed"
        return "bound" if allocated(pod) else "not-allocated"
    if rejected is None:  # the real kube-scheduler never gives up: its condition says unschedulable
        return "unschedulable" if podutil.unschedulable_reason(pod) is not None else "pending"
    return "unschedulable" if rejected.startswith("unschedulable") else "rejected-after-errors"


def outcomes(pods: Iterable[Mapping[str, Any]], expected: Iterable[str]) -> Obj:
    """Counts per outcome over the pods of the storm; `expected` are the keys that must exist."""
    by_key = {podutil.key(p): p for p in pods}
    lost: dict[str, str] = {}
    counts: Counter[str] = Counter()
    by_kind: dict[str, Counter[str]] = {}
    for key in expected:
        pod = by_key.get(key)
        result = "missing" if pod is None else outcome_of(pod)
        counts[result] += 1
        if pod is not None:
            by_kind.setdefault(podutil.labels(pod).get(KIND_LABEL, "?"), Counter())[result] += 1
        if result not in ("bound", "unschedulable"):
            detail = "" if pod is None else _describe(pod)
            lost[key] = f"{result}{': ' + detail if detail else ''}"
    return {
        "pods_total": sum(1 for key in expected if key in by_key),
        "pods_bound": counts["bound"],
        "pods_unschedulable": counts["unschedulable"],
        "pods_lost": len(lost),
        "lost": dict(sorted(lost.items())),
        "lost_by_reason": dict(
            sorted((k, v) for k, v in counts.items() if k not in ("bound", "unschedulable"))
        ),
        "pods_by_kind": {k: dict(sorted(v.items())) for k, v in sorted(by_kind.items())},
    }


def _describe(pod: Mapping[str, Any]) -> str:
    notes = podutil.annotations_of(pod)
    parts = [f"phase={podutil.phase(pod) or '-'}", f"node={podutil.node_name(pod) or '-'}"]
    for key in (nodelock.BIND_PHASE, "hami.io/vgpu-node", podutil.REJECTED):
        if key in notes:
            parts.append(f"{key.split('/')[-1]}={notes[key][:120]}")
    status = pod.get("status") or {}
    if status.get("message"):
        parts.append(f"message={str(status['message'])[:160]}")
    return " ".join(parts)


def oversubscription(pods: list[Obj], nodes: list[Obj]) -> list[Obj]:
    """Devices over capacity in any dimension, with the pods on them."""
    loads, _, _ = device_loads(pods, inventory(nodes))
    return [
        {"node": load.node, "device": load.device.id, "over": load.over(), "pods": load.pods}
        for load in loads
        if load.over()
    ]


def utilisation(pods: list[Obj], nodes: list[Obj]) -> Obj:
    """How full the cluster ended: GPUs in use, memory and cores handed out."""
    loads, _, _ = device_loads(pods, inventory(nodes))
    memory = sum(load.device.devmem for load in loads) or 1
    cores = sum(load.device.devcore for load in loads) or 1
    return {
        "nodes": len(nodes),
        "gpus": len(loads),
        "gpus_in_use": sum(1 for load in loads if load.pods),
        "gpu_memory_allocated_pct": round(100.0 * sum(load.mem for load in loads) / memory, 1),
        "gpu_cores_allocated_pct": round(100.0 * sum(load.cores for load in loads) / cores, 1),
    }


def lock_owner_state(value: str, node: str, pods_by_key: Mapping[str, Mapping[str, Any]]) -> str:
    try:
        lock = nodelock.parse_lock(value)
    except nodelock.LockParseError:
        return "unparsable"
    pod = pods_by_key.get(f"{lock.namespace}/{lock.name}")
    if pod is None:
        return "gone"
    if podutil.phase(pod) in podutil.TERMINAL:
        return "terminal"
    bound_to = podutil.node_name(pod)
    if not bound_to:
        return "never-bound"
    if bound_to != node:
        return "bound-elsewhere"
    return "bound-allocated" if allocated(pod) else "waiting-for-allocate"


def locks(nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]) -> Obj:
    pods_by_key = {podutil.key(p): p for p in pods}
    held = {}
    for node in nodes:
        value = podutil.annotations_of(node).get(LOCK)
        if value is not None:
            name = podutil.name(node)
            held[name] = {"value": value, "owner": lock_owner_state(value, name, pods_by_key)}
    leaked = {n: v for n, v in held.items() if v["owner"] != "waiting-for-allocate"}
    return {
        "node_locks_held": len(held),
        "leaked_locks": len(leaked),
        "locked_nodes": dict(sorted(held.items())),
    }


def ledger_check(
    state_dir: Path,
    pods: list[Obj],
    scheduler_name: str,
    inflight_ttl: float,
    now: float,
    vendors: Sequence[Vendor] | None = None,
) -> Obj:
    """The leader's ledger vs a rebuild from `pods` (a fresh list) with the worker's rules and `vendors`
    (the replicas' vendors; default: the chart's, NVIDIA alone)."""
    enabled = tuple(vendors) if vendors is not None else build_vendors(None)
    rules = Rules(frozenset({scheduler_name}), enabled, inflight_ttl)
    rebuilt = rebuild(pods, rules, now)
    ledger = Ledger(state_dir)
    try:
        live = ledger.all_entries()
    finally:
        ledger.close()
    drift = compare(rebuilt.entries, live)
    uids = {podutil.uid(p) for p in pods}
    names = {podutil.uid(p): podutil.key(p) for p in pods}
    orphans = sorted(f"{e.namespace}/{e.name} ({e.uid}, {e.state})" for e in live if e.uid not in uids)
    return {
        "cache_rebuild_mismatches": len(drift.missing) + len(drift.extra) + len(drift.changed),
        "ledger_missing": [names.get(u, u) for u in drift.missing],
        "ledger_extra": list(drift.extra),
        "ledger_changed": [names.get(u, u) for u in drift.changed],
        "ledger_orphan_rows": orphans,
        "ledger_rows": dict(sorted(Counter(e.state for e in live).items())),
        "rebuild_problems": [f"{pod}: {why}" for pod, why in rebuilt.problems],
    }
