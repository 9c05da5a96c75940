"""`explain` gives the amounts behind each HAMi reason (app/core/why.py), while the reasons stay HAMi's bytes.

Run as an operator runs it (a subprocess on a `kubectl get nodes,pods,resourcequotas -A -o json` file),
with nodes exactly as the simulated device plugins register them (A100 80GB: 81559 MiB per card).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from sim.nodes.objects import CATALOG, build_cluster, node_object

ROOT = Path(__file__).resolve().parents[2]


def cluster_file(tmp_path: Path, *extra: dict[str, Any]) -> tuple[str, list[str]]:
    spec = build_cluster(2, seed=5, gpus_per_node=8, zones=1, models=[(CATALOG["h100"], None)])
    path = tmp_path / "cluster.json"
    items = [node_object(n) for n in spec.nodes] + list(extra)
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return str(path), [n.name for n in spec.nodes]


def gpu_pod(tmp_path: Path, limits: dict[str, str], namespace: str = "default") -> str:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": namespace, "uid": "uid-p"},
        "spec": {
            "schedulerName": "hami-scheduler",
            "containers": [{"name": "main", "resources": {"limits": limits}}],
        },
    }
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(pod))
    return str(path)


def explain(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "explain", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    return done


def test_memory_numbers_follow_hamis_reason(tmp_path: Path) -> None:
    cluster, names = cluster_file(tmp_path)
    pod = gpu_pod(tmp_path, {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "200000"})
    result = json.loads(explain("--cluster", cluster, "--pod", pod, "-o", "json").stdout)
    assert result["FailedNodes"] == {name: "8/8 CardInsufficientMemory" for name in names}  # HAMi's bytes
    sentence = (
        "CardInsufficientMemory: asks 200000 MiB on one device; the most free on any of its 8 devices is "
    )
    sentence += "81559 MiB"
    assert result["Numbers"] == {name: [sentence] for name in names}
    text = explain("--cluster", cluster, "--pod", pod).stdout
    assert "8/8 CardInsufficientMemory" in text and f"  {sentence}" in text


def test_core_numbers_count_what_others_hold(tmp_path: Path) -> None:
    spec = build_cluster(1, seed=5, gpus_per_node=1, zones=1, models=[(CATALOG["h100"], None)])
    node = node_object(spec.nodes[0])
    uuid = spec.nodes[0].devices[0].id
    holder = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "holder",
            "namespace": "default",
            "uid": "uid-holder",
            "annotations": {
                "hami.io/vgpu-node": node["metadata"]["name"],
                "hami.io/vgpu-devices-allocated": f"{uuid},NVIDIA,1000,80:;",
            },
        },
        "spec": {
            "schedulerName": "hami-scheduler",
            "nodeName": node["metadata"]["name"],
            "containers": [{"name": "c"}],
        },
        "status": {"phase": "Running"},
    }
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node, holder]}))
    pod = gpu_pod(tmp_path, {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000", "nvidia.com/gpucores": "30"})
    result = json.loads(explain("--cluster", str(path), "--pod", pod, "-o", "json").stdout)
    name = node["metadata"]["name"]
    assert result["FailedNodes"] == {name: "1/1 CardInsufficientCore"}
    assert result["Numbers"][name] == [
        "CardInsufficientCore: asks 30% on one device; the most free on any of its 1 devices is 20% of 100%"
    ]


def test_quota_numbers_name_the_resource_usage_limit_and_request(tmp_path: Path) -> None:
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu", "namespace": "team"},
        "spec": {"hard": {"limits.nvidia.com/gpumem": "4000"}},
    }
    cluster, names = cluster_file(tmp_path, quota)
    pod = gpu_pod(tmp_path, {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "6000"}, namespace="team")
    result = json.loads(explain("--cluster", cluster, "--pod", pod, "-o", "json").stdout)
    assert result["FailedNodes"][names[0]] == "8/8 ResourceQuotaNotFit"
    assert result["Numbers"][names[0]] == [
        "ResourceQuotaNotFit: namespace quota: limits.nvidia.com/gpumem in namespace team: used 0, "
        "limit 4000, requested 6000"
    ]


def test_too_many_devices_says_how_many_the_node_has(tmp_path: Path) -> None:
    cluster, names = cluster_file(tmp_path)
    pod = gpu_pod(tmp_path, {"nvidia.com/gpu": "9"})
    result = json.loads(explain("--cluster", cluster, "--pod", pod, "-o", "json").stdout)
    assert result["FailedNodes"][names[0]] == "NodeInsufficientDevice"
    assert result["Numbers"][names[0]] == ["NodeInsufficientDevice: asks 9 NVIDIA devices; the node has 8"]
