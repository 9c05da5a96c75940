"""A cluster exactly as HAMi's scheduler leaves it when it is stopped mid-flight, and the checks a migration
to ours must pass (tests/integration/test_migration.py; docs/install.md "Migrating").

Every object is written in HAMi's own format, independently of our encoders: allocations
`<uuid>,NVIDIA,<MiB>,<cores>:` per device and `;` per container group, the to-allocate annotation as HAMi's
device plugin leaves it after Allocate (one more `;` per decode/encode cycle, reference §12 #43), the node
lock `<RFC3339>,<namespace>,<pod>`, bind phases, `hami.io/vgpu-time`/`bind-time` in Unix seconds, and the
`hami.io/vgpu-node` label. One pod carries HAMi's padding quirk (§12 #1): an Istio-style pod (a GPU-less init
container and sidecar, then the GPU container) whose only group sits at index 0.

Five nodes with two 32 GiB V100s each (split count 10). HAMi's scheduler ran as `hami-scheduler` (our name
too) and, earlier, as `hami-vgpu` (adopted; nobody serves it any more):

| node | GPU 0 | GPU 1 | lock |
|---|---|---|---|
| 01 | `train-a` whole, Running | `istio-a` 16000/50 (quirk #1, init done) + `small-a` 8000/25, Running | — |
| 02 | `legacy-a` whole, Running, hami-vgpu | `legacy-b` whole, bound, allocating, hami-vgpu | legacy-b |
| 03 | `infer-a` 16000/50, bound, allocating | — | infer-a |
| 04 | `midbind` whole, allocating, NOT bound (HAMi stopped between its patch and the binding) | — | midbind |
| 05 | `abandoned` whole, allocating, never bound, 90 s old, hami-vgpu | — | abandoned |

With the right accounting exactly eleven 16000 MiB / 50-core halves are free (03: 1 + 2; 04: 2 + 2; 05:
2 + 2), `midbind` (ours, Pending) takes a whole GPU again, so a stream of sixteen half-GPU pods can bind
exactly nine. Ignoring the hami-vgpu pods frees four more halves on 02, ignoring quirk #1 one more on 01:
both oversubscribe a GPU.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sim.kit.kube import Kube, KubeError, node_path, pod_path
from sim.nodes.objects import CATALOG, ClusterSpec, build_cluster, register_nodes

OURS = "hami-scheduler"  # HAMi's default name, kept by the migration
OLD = "hami-vgpu"  # a name a HAMi scheduler ran under before: adopted, served by nobody now
ADOPT = f"{OURS},{OLD}"
NAMESPACE = "ml"
SEED = 15
NODES = 5
HALF = (16000, 50)
STREAM = 16
EXPECTED_BOUND = 9

TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
ALLOCATED = "hami.io/vgpu-devices-allocated"
LOCK = "hami.io/mutex.lock"


def cluster_spec() -> ClusterSpec:
    return build_cluster(NODES, seed=SEED, models=[(CATALOG["v100"], 2)], zones=1)


@dataclass(frozen=True)
class Placed:
    """A pod HAMi placed: where, how much of which GPUs, and how far its bind got."""

    name: str
    scheduler: str
    node: int  # index into the cluster spec's nodes
    devices: tuple[tuple[int, int, int], ...]  # (GPU index, MiB, cores)
    state: str  # running | allocating (bound, lock held) | midbind | abandoned (neither bound, lock held)
    istio: bool = False  # HAMi's padding quirk #1 shape
    age: int = 30  # seconds since HAMi's filter decided

    @property
    def bound(self) -> bool:
        return self.state in ("running", "allocating")

    @property
    def holds_lock(self) -> bool:
        return self.state != "running"


WHOLE = (32768, 100)
PLACED: tuple[Placed, ...] = (
    Placed("train-a", OURS, 0, ((0, *WHOLE),), "running"),
    Placed("istio-a", OURS, 0, ((1, 16000, 50),), "running", istio=True),
    Placed("small-a", OURS, 0, ((1, 8000, 25),), "running"),
    Placed("legacy-a", OLD, 1, ((0, *WHOLE),), "running"),
    Placed("legacy-b", OLD, 1, ((1, *WHOLE),), "allocating"),
    Placed("infer-a", OURS, 2, ((0, 16000, 50),), "allocating"),
    Placed("midbind", OURS, 3, ((0, *WHOLE),), "midbind", age=5),
    Placed("abandoned", OLD, 4, ((0, *WHOLE),), "abandoned", age=90),
)


def hami_allocation(uuids: Sequence[str], placed: Placed) -> str:
    """HAMi's encodeContainerDevices for the one GPU container group (padding quirk included: no group for
    the GPU-less containers of the Istio shape)."""
    return "".join(f"{uuids[gpu]},NVIDIA,{mem},{cores}:" for gpu, mem, cores in placed.devices) + ";"


def lock_value(moment: float, name: str) -> str:
    return f"{datetime.fromtimestamp(moment, UTC).strftime('%Y-%m-%dT%H:%M:%SZ')},{NAMESPACE},{name}"


def _limits(placed: Placed) -> dict[str, str]:
    mem, cores = placed.devices[0][1:]
    limits = {"nvidia.com/gpu": str(len(placed.devices)), "nvidia.com/gpucores": str(cores)}
    if mem != WHOLE[0]:
        limits["nvidia.com/gpumem"] = str(mem)
    return limits


def pod_object(spec: ClusterSpec, placed: Placed, now: float) -> dict[str, Any]:
    node = spec.nodes[placed.node]
    uuids = [d.id for d in node.devices]
    allocation = hami_allocation(uuids, placed)
    decided = int(now - placed.age)
    annotations = {
        "hami.io/vgpu-node": node.name,
        "hami.io/vgpu-time": str(decided),
        ALLOCATED: allocation,
        TO_ALLOCATE: ";;" if placed.state == "running" else allocation,
        "hami.io/bind-phase": "success" if placed.state == "running" else "allocating",
        "hami.io/bind-time": str(decided + 1),
    }
    gpu = {"name": "app", "image": "cuda", "resources": {"limits": _limits(placed)}}
    spec_: dict[str, Any] = {"schedulerName": placed.scheduler, "containers": [gpu]}
    if placed.istio:
        spec_["initContainers"] = [{"name": "istio-init", "image": "proxyv2"}]
        spec_["containers"] = [{"name": "istio-proxy", "image": "proxyv2"}, gpu]
    if placed.bound:
        spec_["nodeName"] = node.name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": placed.name,
            "namespace": NAMESPACE,
            "labels": {"hami.io/vgpu-node": node.name, "app": "from-hami"},
            "annotations": annotations,
        },
        "spec": spec_,
    }


def pod_status(placed: Placed) -> dict[str, Any]:
    if placed.state != "running":
        return {"phase": "Pending"}
    status: dict[str, Any] = {"phase": "Running"}
    if placed.istio:
        done = {"terminated": {"exitCode": 0, "reason": "Completed"}}
        status["initContainerStatuses"] = [{"name": "istio-init", "state": done, "ready": True}]
    return status


@dataclass
class Seeded:
    """What the test remembers of the HAMi state it created."""

    spec: ClusterSpec
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> the pod as created
    locks: dict[str, str] = field(default_factory=dict)  # node -> lock value


def seed(kube: Kube, now: float | None = None) -> Seeded:
    """Nodes (as the kubelet and HAMi's device plugin publish them), HAMi's pods (created, then their status
    written through /status as a kubelet does) and the node locks HAMi's binds held. Works against the
    emulator and a real API server alike."""
    now = time.time() if now is None else now
    spec = cluster_spec()
    register_nodes(kube, spec)
    try:
        kube.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    except KubeError as exc:
        if exc.status != 409:
            raise
    seeded = Seeded(spec)
    for placed in PLACED:
        created = kube.create(pod_path(NAMESPACE), pod_object(spec, placed, now))
        if placed.bound:
            created = kube.patch(pod_path(NAMESPACE, placed.name, "status"), {"status": pod_status(placed)})
        seeded.pods[placed.name] = created
        if placed.holds_lock:
            node = spec.nodes[placed.node].name
            seeded.locks[node] = lock_value(now - placed.age + 1, placed.name)
            kube.patch(node_path(node), {"metadata": {"annotations": {LOCK: seeded.locks[node]}}})
    return seeded


def new_pod(index: int) -> dict[str, Any]:
    mem, cores = HALF
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(mem), "nvidia.com/gpucores": str(cores)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"new-{index:02d}", "namespace": NAMESPACE, "labels": {"app": "stream"}},
        "spec": {
            "schedulerName": OURS,
            "containers": [{"name": "c", "image": "cuda", "resources": {"limits": limits}}],
        },
    }


class LeaseHolder:
    """Plays a kube-scheduler's part of a Lease (HAMi's before it stops, ours on the emulator): `hold`
    writes it with renewTime now and renews it every second from a thread until `stop`, which returns the
    last renewTime. Works against the emulator and a real API server alike (admin client)."""

    def __init__(self, kube: Kube, name: str, namespace: str, duration: int) -> None:
        self.kube, self.name, self.namespace, self.duration = kube, name, namespace, duration
        self.renewed = 0.0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _write(self, holder: str) -> None:
        now = time.time()
        stamp = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        spec = {"holderIdentity": holder, "leaseDurationSeconds": self.duration, "renewTime": stamp}
        path = f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"
        try:
            self.kube.patch(f"{path}/{self.name}", {"spec": spec})
        except KubeError as exc:
            if exc.status != 404:
                raise
            lease = {
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {**spec, "acquireTime": stamp},
            }
            self.kube.create(path, lease)
        self.renewed = now

    def hold(self, holder: str) -> None:
        self._write(holder)
        self._stop.clear()

        def renew() -> None:
            while not self._stop.wait(1.0):
                try:
                    self._write(holder)
                except KubeError as exc:
                    self.errors.append(str(exc))

        self._thread = threading.Thread(target=renew, name=f"lease-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> float:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        return self.renewed


# --- the checks --------------------------------------------------------------------------------------------


def _decode(value: str) -> list[list[tuple[str, int, int]]]:
    """HAMi's container groups, decoded here without our codec."""
    groups = []
    for group in value.split(";"):
        devices = []
        for item in filter(None, group.split(":")):
            uuid, _vendor, mem, cores = item.split(",")
            devices.append((uuid, int(mem), int(cores)))
        groups.append(devices)
    return groups


def oversubscribed(spec: ClusterSpec, pods: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """GPU UUID -> how it is oversubscribed, from the pods' own annotations alone: every pod with
    `hami.io/vgpu-node` and an allocation that is not Succeeded/Failed holds it, whatever its scheduler
    name (that is what HAMi's device plugin honours). Containers are summed (no pod here has GPU init
    containers), each device entry takes one slot. Checked once nothing is in flight any more."""
    capacity = {d.id: (d.count, d.devmem, d.devcore) for node in spec.nodes for d in node.devices}
    used: dict[str, list[int]] = {}
    for pod in pods:
        annotations = pod["metadata"].get("annotations") or {}
        phase = (pod.get("status") or {}).get("phase")
        if not annotations.get("hami.io/vgpu-node") or ALLOCATED not in annotations:
            continue
        if phase in ("Succeeded", "Failed") or not pod["spec"].get("nodeName"):
            continue  # finished, or never bound: the device plugin serves only pods bound to its node
        for group in _decode(annotations[ALLOCATED]):
            for uuid, mem, cores in group:
                total = used.setdefault(uuid, [0, 0, 0])
                total[0], total[1], total[2] = total[0] + 1, total[1] + mem, total[2] + cores
    problems = {}
    for uuid, (slots, mem, cores) in used.items():
        count, devmem, devcore = capacity[uuid]
        if slots > count or mem > devmem or cores > devcore:
            problems[uuid] = f"{slots}/{count} slots, {mem}/{devmem} MiB, {cores}/{devcore} cores"
    return problems
