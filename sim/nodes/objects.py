"""Simulated GPU nodes: the Node objects HAMi's device plugin and the kubelet would publish.

Each node carries what the real ones carry for the scheduler: `hami.io/node-nvidia-register` (JSON written
with app.core.codec.encode_register_json, exactly like the device plugin: split count 10, memory in MiB,
devcore 100, the NVML model name, NUMA, mode hami-core, health true), `status.allocatable["nvidia.com/gpu"]`
= GPUs x split count (the plugin advertises split slots), cpu/memory/pods capacity, the Ready condition and
the `kubernetes.io/hostname`, `topology.kubernetes.io/zone` and `topology.kubernetes.io/region` labels.

Other vendors' devices (Ascend, Hygon, Cambricon, Moore Threads) are added to nodes by sim.nodes.vendors.

Nodes are assigned to zones in contiguous blocks (node-01..07 in zone a, ...), so kube-scheduler's zone round
robin visibly differs from name order. GPU UUIDs derive from the seed: the same seed, the same cluster.

Asked for MIG nodes (`mig_nodes`), the first that many nodes of a MIG-capable model register their GPUs as
HAMi's device plugin does in MIG mode: mode `mig`, `count` = the largest instance count of a profile,
devcore 100 and `migProfiles` with the memory, compute share, slice count and NVML placements of each
profile (values of the real cards, rounded).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.core.codec import encode_register_json
from app.core.model import DeviceInfo, MigPlacement, MigProfile
from sim.kit.kube import Kube, KubeError, node_path
from sim.nodes.part import VendorPart
from sim.nodes.vendors import PARTS

REGISTER_ANNOTATION = "hami.io/node-nvidia-register"
GPU_RESOURCE = "nvidia.com/gpu"
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
HOSTNAME_LABEL = "kubernetes.io/hostname"
SIM_LABEL = "sim.hami.io/node"


@dataclass(frozen=True)
class GpuModel:
    key: str
    name: str  # the NVML name as the device plugin registers it
    memory: int  # MiB
    mig: tuple[MigProfile, ...] = ()  # the profiles NVML reports in MIG mode (none: not MIG-capable)


def _profile(name: str, memory: int, core: int, slices: int, starts: Sequence[int], size: int) -> MigProfile:
    return MigProfile(name, memory, core, slices, tuple(MigPlacement(s, size) for s in starts))


def _mig_profiles(gb: int, memory: int) -> tuple[MigProfile, ...]:
    """The A100/H100 layout: 1g x7, 2g x3, 3g x2 (4 memory slices each), 4g and 7g x1; `gb`/`memory`: the
    nominal and the real memory of a 1g slice."""
    return (
        _profile(f"1g.{gb}gb", memory, 14, 1, range(7), 1),
        _profile(f"2g.{2 * gb}gb", 2 * memory + 256, 28, 2, (0, 2, 4), 2),
        _profile(f"3g.{4 * gb}gb", 4 * memory + 640, 42, 3, (0, 4), 4),
        _profile(f"4g.{4 * gb}gb", 4 * memory + 640, 57, 4, (0,), 4),
        _profile(f"7g.{8 * gb}gb", 8 * memory + 1280, 100, 7, (0,), 8),
    )


CATALOG: dict[str, GpuModel] = {
    m.key: m
    for m in (
        GpuModel("a100-80", "NVIDIA A100-SXM4-80GB", 81920, _mig_profiles(10, 9856)),
        GpuModel("a100-40", "NVIDIA A100-SXM4-40GB", 40960, _mig_profiles(5, 4864)),
        GpuModel("h100", "NVIDIA H100 80GB HBM3", 81559, _mig_profiles(10, 9856)),
        GpuModel("l40s", "NVIDIA L40S", 46068),
        GpuModel("v100", "NVIDIA-Tesla V100-PCIE-32GB", 32768),
        GpuModel("t4", "NVIDIA-Tesla T4", 15360),
    )
}
DEFAULT_MODELS = ("a100-80", "h100", "a100-40", "l40s")


@dataclass(frozen=True)
class NodeSpec:
    name: str
    zone: str
    region: str
    model: GpuModel
    devices: tuple[DeviceInfo, ...]
    cpu: str = "96"
    memory: str = "1024Gi"
    pods: str = "110"
    split_count: int = 10
    labels: dict[str, str] = field(default_factory=dict)
    mig: bool = False  # GPUs registered in MIG mode
    parts: tuple[VendorPart, ...] = ()  # other vendors' devices on the node (sim.nodes.vendors)

    @property
    def gpu_slots(self) -> int:
        return sum(d.count for d in self.devices)

    @property
    def all_devices(self) -> tuple[DeviceInfo, ...]:
        """Every device the scheduler will discover on the node, NVIDIA's first."""
        return self.devices + tuple(d for part in self.parts for d in part.devices)


@dataclass(frozen=True)
class ClusterSpec:
    nodes: tuple[NodeSpec, ...]

    def node(self, name: str) -> NodeSpec | None:
        return next((n for n in self.nodes if n.name == name), None)


def parse_models(text: str) -> list[tuple[GpuModel, int | None]]:
    """`a100-80:8,t4:4` or `a100-80,h100` (count from --gpus-per-node) -> models cycled over the nodes."""
    result: list[tuple[GpuModel, int | None]] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, _, count = part.partition(":")
        if key not in CATALOG:
            raise ValueError(f"unknown GPU model {key!r}; known: {', '.join(CATALOG)}")
        result.append((CATALOG[key], int(count) if count else None))
    if not result:
        raise ValueError("no GPU model given")
    return result


def build_cluster(
    nodes: int,
    *,
    seed: int = 0,
    models: Sequence[tuple[GpuModel, int | None]] | None = None,
    gpus_per_node: int = 8,
    zones: int = 3,
    split_count: int = 10,
    prefix: str = "gpu-node",
    region: str = "region-1",
    mig_nodes: int = 0,
    vendors: Sequence[tuple[str, ...]] | None = None,
) -> ClusterSpec:
    """`nodes` nodes in `zones` zones (contiguous blocks), GPU models cycled over the nodes; the first
    `mig_nodes` nodes of a MIG-capable model in MIG mode; `vendors` (sim.nodes.vendors.parse_vendors) cycles
    node kinds: NVIDIA GPUs only where a kind names `nvidia`, plus the other vendors' parts."""
    if nodes < 1 or zones < 1 or gpus_per_node < 0 or split_count < 1 or mig_nodes < 0:
        raise ValueError("nodes, zones and split count must be positive")
    rng = random.Random(seed)
    chosen = list(models or [(CATALOG[k], None) for k in DEFAULT_MODELS])
    width = max(2, len(str(nodes)))
    zone_count = min(zones, nodes)
    specs: list[NodeSpec] = []
    for i in range(nodes):
        name = f"{prefix}-{i + 1:0{width}d}"
        zone = f"{region}{chr(ord('a') + (i * zone_count) // nodes)}"
        model, count = chosen[i % len(chosen)]
        count = gpus_per_node if count is None else count
        kind = vendors[i % len(vendors)] if vendors else ("nvidia",)
        if "nvidia" not in kind:
            count = 0
        parts = tuple(PARTS[p](name) for p in kind if p != "nvidia")
        mig = bool(model.mig) and sum(s.mig for s in specs) < mig_nodes
        devices = tuple(
            DeviceInfo(
                id=f"GPU-{uuid.UUID(int=rng.getrandbits(128), version=4)}",
                index=index,
                count=max(len(p.placements) for p in model.mig) if mig else split_count,
                devmem=model.memory,
                devcore=100,
                type=model.name,
                numa=0 if index < (count + 1) // 2 else 1,
                mode="mig" if mig else "hami-core",
                health=True,
                mig_profiles=model.mig if mig else (),
            )
            for index in range(count)
        )
        specs.append(
            NodeSpec(name, zone, region, model, devices, split_count=split_count, mig=mig, parts=parts)
        )
    if sum(s.mig for s in specs) < mig_nodes:
        raise ValueError(f"{mig_nodes} MIG nodes asked, but only {sum(s.mig for s in specs)} are MIG-capable")
    return ClusterSpec(tuple(specs))


def node_object(spec: NodeSpec) -> dict[str, Any]:
    """The Node as the kubelet and the device plugin leave it once both have registered."""
    allocatable = {"cpu": spec.cpu, "memory": spec.memory, "pods": spec.pods, "ephemeral-storage": "1000Gi"}
    capacity: dict[str, str] = {}
    annotations: dict[str, str] = {}
    labels: dict[str, str] = {}
    if spec.devices:
        allocatable[GPU_RESOURCE] = str(spec.gpu_slots)
        annotations[REGISTER_ANNOTATION] = encode_register_json(spec.devices)
        labels["nvidia.com/gpu.product"] = spec.model.name.replace(" ", "-")
    for part in spec.parts:
        allocatable.update(part.allocatable)
        capacity.update(part.capacity)
        annotations.update(part.annotations)
        labels.update(part.labels)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": spec.name,
            "labels": {
                HOSTNAME_LABEL: spec.name,
                ZONE_LABEL: spec.zone,
                REGION_LABEL: spec.region,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                **labels,
                SIM_LABEL: "true",
                **spec.labels,
            },
            "annotations": annotations,
        },
        "spec": {},
        "status": {
            "capacity": {**allocatable, **capacity},
            "allocatable": allocatable,
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is ready"}
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.33.0-sim",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def register_nodes(kube: Kube, cluster: ClusterSpec) -> int:
    """Create the nodes (status through /status, as a kubelet does); existing nodes get their
    registration annotation and status refreshed. Returns how many were created."""
    created = 0
    for spec in cluster.nodes:
        obj = node_object(spec)
        try:
            kube.create(node_path(), {k: v for k, v in obj.items() if k != "status"})
            created += 1
        except KubeError as exc:
            if exc.status != 409:
                raise
            kube.patch(node_path(spec.name), {"metadata": {"annotations": obj["metadata"]["annotations"]}})
        kube.patch(node_path(spec.name, "status"), {"status": obj["status"]})
    return created
