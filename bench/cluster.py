"""A large synthetic cluster for benchmarks: GPU nodes registered the way HAMi's device plugin registers
them, running reservations already in a ledger, and the pods to schedule.

Nodes go through the real decoding path (`hami.io/node-nvidia-register` JSON -> `decode_node`), are written
with the real snapshot writer, and reservations are packed onto devices without over-committing them, so a
benchmark exercises the same data a Gunicorn worker reads in production. Everything is seeded: one seed,
one cluster.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.core.codec import encode_pod_single_device, encode_register_json
from app.core.inventory import decode_node
from app.core.model import ContainerDevice, DeviceInfo, DeviceUse, NodeDevices
from app.core.vendor import Vendor
from app.state import snapshot
from app.state.ledger import BOUND, CONFIRMED, Entry, Ledger
from app.state.snapshot import NodeRecord, Snapshot
from bench.seed import running_pod_shape
from sim.workload.mix import demo_pods

ZONES = ("zone-a", "zone-b", "zone-c")
# (model, MiB) per zone: an A100 zone, an H100 zone and an L40S zone
MODELS = {
    "zone-a": ("NVIDIA A100-SXM4-80GB", 81920),
    "zone-b": ("NVIDIA H100 80GB HBM3", 81920),
    "zone-c": ("NVIDIA L40S", 46068),
}
NAMESPACES = ("default", "ml-team", "research", "batch")
QUOTA_NAMESPACE = "ml-team"  # has GPU memory/core limits, so the quota path is exercised
SPLIT = 10


@dataclass(frozen=True)
class Cluster:
    records: dict[str, NodeRecord]
    entries: list[Entry]

    @property
    def node_names(self) -> list[str]:
        return list(self.records)


def _devices(name: str, zone: str, gpus: int, rng: random.Random) -> list[DeviceInfo]:
    model, memory = MODELS[zone]
    return [
        DeviceInfo(
            id=f"GPU-{name}-{index}",
            index=index,
            count=SPLIT,
            devmem=memory,
            devcore=100,
            type=model,
            numa=index * 2 // gpus,
            mode="hami-core",
            health=rng.random() > 0.002,
        )
        for index in range(gpus)
    ]


def build_nodes(
    count: int, gpus: int, vendors: Sequence[Vendor], rng: random.Random
) -> dict[str, NodeRecord]:
    """`count` nodes of `gpus` GPUs each, decoded from their register annotation like the registrar does."""
    records = {}
    for n in range(count):
        name, zone = f"gpu-node-{n:05d}", ZONES[n % len(ZONES)]
        devices = _devices(name, zone, gpus, rng)
        annotations = {"hami.io/node-nvidia-register": encode_register_json(devices)}
        if rng.random() < 0.01:
            annotations["hami.io/device-cordon"] = devices[rng.randrange(gpus)].id
        decoded: NodeDevices = decode_node({"metadata": {"name": name, "annotations": annotations}}, vendors)
        records[name] = NodeRecord(decoded, 1, zone, "region-1")
    return records


def build_reservations(records: dict[str, NodeRecord], count: int, rng: random.Random) -> list[Entry]:
    """`count` running pods packed onto random nodes without over-committing any device."""
    names = list(records)
    use: dict[str, DeviceUse] = {}
    entries: list[Entry] = []
    attempts = 0
    while len(entries) < count and attempts < count * 20:
        attempts += 1
        node = records[rng.choice(names)].devices
        gpus, mem, cores = running_pod_shape(rng, node.devices[0].devmem)
        free = [
            d
            for d in node.devices
            if d.health
            and d.id not in node.cordoned
            and (u := use.get(d.id, DeviceUse())).slots < d.count
            and d.devmem - u.mem >= mem
            and d.devcore - u.cores >= cores
            and not (cores == 100 and u.slots > 0)
        ]
        if len(free) < gpus:
            continue
        chosen = rng.sample(free, gpus)
        uses = {d.id: DeviceUse(1, mem, cores) for d in chosen}
        for uuid, taken in uses.items():
            use[uuid] = use.get(uuid, DeviceUse()).plus(taken)
        index = len(entries)
        namespace = NAMESPACES[index % len(NAMESPACES)]
        devices = tuple(ContainerDevice(d.id, "NVIDIA", mem, cores) for d in chosen)
        entries.append(
            Entry(
                uid=f"running-{index:06d}",
                namespace=namespace,
                name=f"running-{index:06d}",
                node=node.name,
                state=BOUND if index % 5 else CONFIRMED,
                uses=uses,
                quota={"nvidia.com/gpumem": mem * gpus, "nvidia.com/gpucores": cores * gpus},
                allocation=f"NVIDIA={encode_pod_single_device((devices,))}",
                updated_at=1.0,
            )
        )
    return entries


def build(nodes: int, gpus: int, running: int, vendors: Sequence[Vendor], seed: int) -> Cluster:
    rng = random.Random(seed)
    records = build_nodes(nodes, gpus, vendors, rng)
    return Cluster(records, build_reservations(records, running, rng))


def write_state(state_dir: Path, cluster: Cluster) -> None:
    """The inventory snapshot and the ledger, as the registration worker would have left them."""
    limits = {QUOTA_NAMESPACE: {"nvidia.com/gpumem": 10**12, "nvidia.com/gpucores": 10**9}}
    snapshot.write(state_dir, Snapshot(1, cluster.records, {}, limits, 1.0))
    ledger = Ledger(state_dir)
    try:
        ledger.upsert(cluster.entries)
    finally:
        ledger.close()


def pods_to_schedule(count: int, vendors: Sequence[Vendor], seed: int) -> list[dict[str, Any]]:
    """The demo's pod mix (including its unschedulable share), mutated as the webhook would, with UIDs."""
    result = []
    for index, demo in enumerate(demo_pods(count, seed)):
        pod = demo.manifest
        pod["metadata"]["uid"] = f"bench-{seed}-{index:06d}"
        pod["spec"]["schedulerName"] = "hami-scheduler"
        for container in [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]:
            for vendor in vendors:
                vendor.mutate_container(container, pod)
        result.append(pod)
    return result
