"""`hami-scheduler inspect` shows each node's capacity per vendor (the figures of the leader's
`hami.io/device-capacity` annotation, app/core/capacity.py) and whether the node's annotation agrees.

The cluster: gpu-0 has two healthy GPUs of 40960 MiB, one holding 30720 MiB and 50 cores (two pods), the
other 4096 MiB and 10 cores; gpu-1's two are one cordoned and one unhealthy, so nothing on it is free.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

KEY = "hami.io/device-capacity"
GPU0 = {"devices": 2, "devicesFree": 2, "memory": 81920, "memoryFree": 47104, "cores": 200, "coresFree": 140}
GPU1 = {"devices": 2, "devicesFree": 0, "memory": 81920, "memoryFree": 0, "cores": 200, "coresFree": 0}
GPU2 = {"devices": 1, "devicesFree": 1, "memory": 40960, "memoryFree": 40960, "cores": 100, "coresFree": 100}


ROOT = Path(__file__).resolve().parents[2]


def inspect(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "app.cli", "inspect", *args]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)


def gpu_node(name: str, cards: list[tuple[str, bool]], **annotations: str) -> dict[str, Any]:
    card = {"count": 10, "devmem": 40960, "devcore": 100, "type": "NVIDIA-A100", "mode": "hami-core"}
    devices = [{"id": uuid, "index": i, "health": health, **card} for i, (uuid, health) in enumerate(cards)]
    register = {"hami.io/node-nvidia-register": json.dumps(devices)}
    return {"kind": "Node", "metadata": {"name": name, "annotations": {**register, **annotations}}}


def bound(name: str, node: str, allocated: str) -> dict[str, Any]:
    annotations = {"hami.io/vgpu-node": node, "hami.io/vgpu-devices-allocated": allocated}
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "annotations": annotations},
        "spec": {"schedulerName": "hami-scheduler", "nodeName": node, "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }


def published(figures: dict[str, int]) -> str:
    return json.dumps({"version": 1, "vendors": {"NVIDIA": figures}}, separators=(",", ":"), sort_keys=True)


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> str:
    """gpu-0 carries the right annotation, gpu-1 gpu-0's (stale), gpu-2 none."""
    items = [
        gpu_node("gpu-0", [("GPU-0a", True), ("GPU-0b", True)], **{KEY: published(GPU0)}),
        gpu_node("gpu-1", [("GPU-1a", True), ("GPU-1b", False)], **{KEY: published(GPU0)}),
        gpu_node("gpu-2", [("GPU-2a", True)]),
        bound("train", "gpu-0", "GPU-0a,NVIDIA,20480,50:;"),
        bound("infer", "gpu-0", "GPU-0a,NVIDIA,10240,0:;"),
        bound("small", "gpu-0", "GPU-0b,NVIDIA,4096,10:;"),
        bound("legacy", "gpu-1", "GPU-1a,NVIDIA,8192,0:;"),
    ]
    items[1]["metadata"]["annotations"]["hami.io/device-cordon"] = "GPU-1a"
    cluster = {"apiVersion": "v1", "kind": "List", "items": items}
    path: Path = tmp_path_factory.mktemp("inspect-capacity") / "cluster.json"
    path.write_text(json.dumps(cluster), encoding="utf-8")
    return str(path)


def test_json_capacity_per_node_and_vendor(dump: str) -> None:
    result = inspect("--cluster", dump, "-o", "json")
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    nodes = {n["name"]: n["capacity"] for n in json.loads(result.stdout)["nodes"]}
    assert nodes == {
        "gpu-0": {"NVIDIA": {**GPU0, "annotation": "same"}},
        "gpu-1": {"NVIDIA": {**GPU1, "annotation": "differs"}},
        "gpu-2": {"NVIDIA": {**GPU2, "annotation": "absent"}},
    }


def test_wide_has_a_capacity_section(dump: str) -> None:
    result = inspect("--cluster", dump, "-o", "wide", "--ascii")
    assert result.returncode == 0, result.stderr
    section = next(s for s in result.stdout.split("\n\n") if s.startswith("CAPACITY"))
    rows = [line.split() for line in section.splitlines()[2:]]
    assert rows == [
        ["gpu-0", "NVIDIA", "2/2", "46Gi/80Gi", "140/200", "same"],
        ["gpu-1", "NVIDIA", "0/2", "0/80Gi", "0/200", "differs"],
        ["gpu-2", "NVIDIA", "1/1", "40Gi/40Gi", "100/100", "absent"],
    ]
    plain = inspect("--cluster", dump, "--ascii")
    assert "CAPACITY" not in plain.stdout  # the default table stays as it was
