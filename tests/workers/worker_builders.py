"""Builders for the registration worker's tests: GPU nodes with HAMi annotations, pods with allocations.

Uniquely named (test folders have no `__init__.py`; pytest puts each folder on sys.path).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from app.core.vendor import Vendor
from app.devices.nvidia import Nvidia

VENDORS: tuple[Vendor, ...] = (Nvidia(),)
SCHEDULER = "hami-scheduler"
REGISTER = "hami.io/node-nvidia-register"
HANDSHAKE = "hami.io/node-handshake"
ALLOCATED = "hami.io/vgpu-devices-allocated"
ASSIGNED = "hami.io/vgpu-node"
ASSIGNED_TIME = "hami.io/vgpu-time"


def device(uuid: str, index: int = 0, *, mem: int = 32768, health: bool = True) -> dict[str, Any]:
    return {
        "id": uuid,
        "index": index,
        "count": 10,
        "devmem": mem,
        "devcore": 100,
        "type": "NVIDIA-Tesla V100-PCIE-32GB",
        "mode": "hami-core",
        "health": health,
    }


def register(node: str, gpus: int = 2, **kwargs: Any) -> str:
    return json.dumps([device(f"GPU-{node}-{i}", i, **kwargs) for i in range(gpus)])


def gpu_node(
    name: str,
    gpus: int = 2,
    *,
    annotations: Mapping[str, str] | None = None,
    allocatable: int | None = None,
    labels: Mapping[str, str] | None = None,
    register_value: str | None = None,
) -> dict[str, Any]:
    """A Node as the API returns it, with the device plugin's register annotation."""
    merged = {REGISTER: register_value if register_value is not None else register(name, gpus)}
    merged.update(annotations or {})
    count = gpus if allocatable is None else allocatable
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {}), "annotations": merged},
        "status": {"allocatable": {"nvidia.com/gpu": str(count), "cpu": "8"}},
    }


def cpu_node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "8"}},
    }


def allocation(*devices: tuple[str, int, int], containers: int = 1) -> str:
    """`uuid,NVIDIA,mem,cores:` for each device in the first container, `;` per container."""
    first = "".join(f"{uuid},NVIDIA,{mem},{cores}:" for uuid, mem, cores in devices)
    return first + ";" + ";" * (containers - 1)


def gpu_pod(
    name: str,
    *,
    uid: str | None = None,
    namespace: str = "default",
    node: str | None = "n1",
    assigned: str | None = "n1",
    alloc: str | None = None,
    scheduler: str = SCHEDULER,
    phase: str = "Running",
    vgpu_time: int | None = None,
    init_containers: Sequence[str] = (),
    init_done: bool = False,
    deleting: bool = False,
    extra: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    annotations: dict[str, str] = dict(extra or {})
    if assigned is not None:
        annotations[ASSIGNED] = assigned
    if alloc is not None:
        annotations[ALLOCATED] = alloc
    if vgpu_time is not None:
        annotations[ASSIGNED_TIME] = str(vgpu_time)
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or f"uid-{name}",
        "annotations": annotations,
    }
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "image": "cuda"}],
        "initContainers": [{"name": n, "image": "busybox"} for n in init_containers],
    }
    if node:
        spec["nodeName"] = node
    status: dict[str, Any] = {"phase": phase}
    if init_containers:
        state = {"terminated": {"exitCode": 0}} if init_done else {"running": {}}
        status["initContainerStatuses"] = [{"name": n, "state": state} for n in init_containers]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}
