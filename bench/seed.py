"""What the end-to-end benchmark puts in the API emulator before anything of ours starts.

- **Nodes**: `sim.nodes.objects.build_cluster` + `node_object`, exactly what `python -m sim nodes` registers
  (HAMi's `hami.io/node-nvidia-register`, allocatable split slots, zone/region labels in contiguous blocks),
  so the simulated device plugin started later with `--no-register` and the same seed serves the same GPUs.
- **Running pods**: bound, Running pods in our scheduler's name with the annotations a completed HAMi
  allocation leaves (`hami.io/vgpu-node`, `hami.io/vgpu-devices-allocated`, an emptied
  `hami.io/vgpu-devices-to-allocate`, `hami.io/bind-phase: success`), packed onto random nodes without
  over-committing any device — the registration worker rebuilds its ledger from them, as after a restart.
- **Pods to schedule**: the demo's mix (`sim.workload.mix`) without its `unfit` kind — every measured pod can
  be bound, so "every measured pod bound" is a correctness check — created through the API (not bulk) after
  our webhook mutated them, so the scheduler stand-in sends exactly the objects kube-scheduler would see.

Everything is seeded: one seed, one cluster. Bulk seeding uses the emulator's `POST /_sim/bulk` (storage
level).
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import urllib3

from app.core.codec import encode_pod_single_device
from app.core.decision import allocation_annotations
from app.core.model import ContainerDevice
from app.core.nodelock import BIND_PHASE, BIND_TIME, PHASE_SUCCESS
from app.core.vendor import Vendor
from app.devices.nvidia import keys
from sim.kit import podutil
from sim.kubescheduler.cache import NodeTree, zone_key
from sim.nodes.objects import ClusterSpec, build_cluster
from sim.workload.mix import demo_pods

SCHEDULER_NAME = "hami-scheduler"
RUNNING_NAMESPACES = ("default", "ml-team", "research", "batch")
BENCH_LABEL = "bench.hami.io/measured"
BULK_CHUNK = 2000
Obj = dict[str, Any]


@dataclass(frozen=True)
class Scenario:
    nodes: int
    gpus_per_node: int
    running: int
    pods: int
    seed: int = 0
    zones: int = 3


def cluster_of(scenario: Scenario) -> ClusterSpec:
    return build_cluster(
        scenario.nodes, seed=scenario.seed, gpus_per_node=scenario.gpus_per_node, zones=scenario.zones
    )


def node_order(nodes: Sequence[Obj]) -> list[str]:
    """kube-scheduler's nodeTree order (zone round robin) for nodes added in this order."""
    tree = NodeTree()
    for node in nodes:
        tree.add(podutil.name(node), zone_key(node))
    return tree.list()


def running_pod_shape(rng: random.Random, memory: int) -> tuple[int, int, int]:
    """(GPUs, MiB per GPU, cores per GPU) of one running pod: a mix like the demo's fitting kinds."""
    kind = rng.random()
    if kind < 0.45:
        return 1, rng.choice([2048, 4096, 8192, 12288, 16384, 24576]), rng.choice([0, 0, 10, 20, 30])
    if kind < 0.70:
        return 1, memory * rng.choice([10, 20, 25]) // 100, rng.choice([0, 10, 25])
    if kind < 0.85:
        return rng.choice([2, 2, 4]), rng.choice([8192, 16384, 20480]), rng.choice([0, 20])
    return 1, memory, 100  # a whole card


def running_pods(cluster: ClusterSpec, count: int, seed: int, vendors: Sequence[Vendor]) -> list[Obj]:
    """`count` bound Running pods packed onto random nodes, no device over its slots, memory or cores."""
    rng = random.Random(seed + 1)
    used: dict[str, tuple[int, int, int]] = {}  # uuid -> slots, mem, cores
    stamp, now = podutil.now_rfc3339(), int(time.time())
    pods: list[Obj] = []
    attempts = 0
    while len(pods) < count and attempts < count * 20:
        attempts += 1
        node = cluster.nodes[rng.randrange(len(cluster.nodes))]
        gpus, mem, cores = running_pod_shape(rng, node.model.memory)
        free = []
        for device in node.devices:
            slots, m, c = used.get(device.id, (0, 0, 0))
            fits = slots < device.count and device.devmem - m >= mem and device.devcore - c >= cores
            if fits and not (cores == 100 and slots > 0):
                free.append(device)
        if len(free) < gpus:
            continue
        chosen = rng.sample(free, gpus)
        for device in chosen:
            slots, m, c = used.get(device.id, (0, 0, 0))
            used[device.id] = (slots + 1, m + mem, c + cores)
        index = len(pods)
        devices = tuple(ContainerDevice(d.id, "NVIDIA", mem, cores) for d in chosen)
        notes = allocation_annotations(node.name, {"NVIDIA": (devices,)}, vendors, now)
        notes[keys.TO_ALLOCATE] = encode_pod_single_device(((),))  # what Allocate leaves behind
        notes.update({BIND_PHASE: PHASE_SUCCESS, BIND_TIME: str(now)})
        limits = {"nvidia.com/gpu": str(gpus), "nvidia.com/gpumem": str(mem)}
        if cores:
            limits["nvidia.com/gpucores"] = str(cores)
        name = f"running-{index:06d}"
        container = {
            "name": "main",
            "image": "registry.local/cuda-app:12.4",
            "resources": {"requests": {"cpu": "1", "memory": "4Gi"}, "limits": limits},
        }
        pod: Obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": RUNNING_NAMESPACES[index % len(RUNNING_NAMESPACES)],
                "uid": f"bench-running-{seed}-{index:06d}",
                "creationTimestamp": stamp,
                "labels": {"app": "running"},
                "annotations": notes,
            },
            "spec": {
                "schedulerName": SCHEDULER_NAME,
                "nodeName": node.name,
                "restartPolicy": "Always",
                "containers": [container],
            },
        }
        pod["status"] = podutil.running_status(pod, "10.0.0.1", f"10.{index // 65536 % 256}.0.1")
        pods.append(pod)
    return pods


def measured_manifests(count: int, seed: int) -> list[Obj]:
    """`count` pods of the demo mix, fitting kinds only, that run until deleted (label BENCH_LABEL)."""
    result: list[Obj] = []
    total = count + count // 8 + 16
    while len(result) < count:
        result = []
        for demo in demo_pods(total, seed, finishing=0.0):
            if demo.kind == "unfit":
                continue
            manifest = demo.manifest
            manifest["metadata"]["name"] = f"bench-{manifest['metadata']['name']}"
            manifest["metadata"]["labels"][BENCH_LABEL] = "true"
            result.append(manifest)
        total *= 2
    return result[:count]


def bulk_seed(
    http: urllib3.PoolManager, server: str, objects: Sequence[Obj], chunk: int = BULK_CHUNK
) -> None:
    """Storage-level inserts through `POST /_sim/bulk`, `chunk` objects per request."""
    for start in range(0, len(objects), chunk):
        body = orjson.dumps({"objects": list(objects[start : start + chunk])})
        response = http.request(
            "POST", f"{server}/_sim/bulk", body=body, headers={"Content-Type": "application/json"}
        )
        if response.status != 201:
            raise RuntimeError(f"bulk seeding failed: HTTP {response.status}: {response.data[:200]!r}")
