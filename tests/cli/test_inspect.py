"""`hami-scheduler inspect` on a `kubectl get -o json` dump, run as a subprocess as an operator runs it.

The cluster: two NVIDIA nodes, one with a held node lock, a device cordoned by the device plugin and an
unhealthy device, a cordoned node, a node whose registration does not decode, a CPU node (not shown), pods
bound, reserved (annotated, not bound) and finished (holding nothing), a pod of another scheduler (HAMi's
own name: it still holds its devices), and a pod whose allocation does not decode.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
A100 = "NVIDIA-A100-SXM4-40GB"
LOCKED_AT = datetime.now(UTC) - timedelta(seconds=42)


def inspect(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "inspect", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def register(*cards: tuple[str, int, bool]) -> str:
    devices = [
        {"id": uuid, "index": index, "count": 10, "devmem": 40960, "devcore": 100, "type": A100,
         "mode": "hami-core", "health": health}
        for uuid, index, health in cards
    ]  # fmt: skip
    return json.dumps(devices, separators=(",", ":"))


def node(name: str, annotations: dict[str, str] | None = None, unschedulable: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"unschedulable": True} if unschedulable else {},
    }


def pod(
    name: str,
    node_name: str,
    allocated: str,
    *,
    namespace: str = "team-a",
    bound: bool = True,
    phase: str = "Running",
    scheduler: str = "hami-scheduler",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [{"name": "main"}]}
    if bound:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "annotations": {"hami.io/vgpu-node": node_name, "hami.io/vgpu-devices-allocated": allocated},
        },
        "spec": spec,
        "status": {"phase": phase},
    }


LOCK = f"{LOCKED_AT.strftime('%Y-%m-%dT%H:%M:%SZ')},team-a,waiting"
CLUSTER = {
    "apiVersion": "v1",
    "kind": "List",
    "items": [
        node(
            "gpu-0",
            {
                "hami.io/node-nvidia-register": register(("GPU-0a", 0, True), ("GPU-0b", 1, True)),
                "hami.io/mutex.lock": LOCK,
            },
        ),
        node(
            "gpu-1",
            {
                "hami.io/node-nvidia-register": register(("GPU-1a", 0, True), ("GPU-1b", 1, False)),
                "hami.io/device-cordon": "GPU-1a",
            },
            unschedulable=True,
        ),
        node("broken", {"hami.io/node-nvidia-register": "[{oops"}),
        node("cpu-only"),
        pod("train", "gpu-0", "GPU-0a,NVIDIA,20480,50:;"),
        pod("infer", "gpu-0", "GPU-0a,NVIDIA,10240,0:;", namespace="team-b"),
        pod("waiting", "gpu-0", "GPU-0b,NVIDIA,4096,10:;", bound=False),
        pod("legacy", "gpu-1", "GPU-1a,NVIDIA,8192,0:;", scheduler="hami-scheduler-old"),
        pod("done", "gpu-0", "GPU-0b,NVIDIA,40960,100:;", phase="Succeeded"),
        pod("corrupt", "gpu-1", "not,an,allocation"),
    ],
}


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("inspect") / "cluster.json"
    path.write_text(json.dumps(CLUSTER), encoding="utf-8")
    return str(path)


def as_json(*args: str) -> dict[str, Any]:
    result = inspect(*args, "-o", "json")
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    output: dict[str, Any] = json.loads(result.stdout)
    return output


def devices_of(output: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {d["uuid"]: d for n in output["nodes"] for d in n["devices"]}


def test_json_allocations_are_the_pods_annotations(dump: str) -> None:
    output = as_json("--cluster", dump)
    assert [n["name"] for n in output["nodes"]] == ["gpu-0", "gpu-1", "broken"]  # no CPU node
    devices = devices_of(output)
    a, b = devices["GPU-0a"], devices["GPU-0b"]
    assert (a["memory_mib"], a["cores"], a["slots"]) == (
        {"used": 30720, "total": 40960},
        {"used": 50, "total": 100},
        {"used": 2, "total": 10},
    )
    assert [(p["namespace"], p["name"], p["state"]) for p in a["pods"]] == [
        ("team-a", "train", "bound"),
        ("team-b", "infer", "bound"),
    ]
    # the reserved pod holds its devices; the finished one holds nothing any more
    assert b["memory_mib"]["used"] == 4096 and [p["state"] for p in b["pods"]] == ["reserved"]
    legacy = devices["GPU-1a"]["pods"]
    assert [(p["name"], p["scheduler"]) for p in legacy] == [("legacy", "hami-scheduler-old")]
    assert devices["GPU-1a"]["problems"] == ["cordoned"] and devices["GPU-1b"]["problems"] == ["unhealthy"]
    gpu0, gpu1, broken = output["nodes"]
    (lock,) = gpu0["locks"]
    age = datetime.now(UTC).timestamp() - LOCKED_AT.replace(microsecond=0).timestamp()
    assert lock["holder"] == "team-a/waiting" and abs(lock["age_seconds"] - age) < 10
    assert gpu1["cordoned"] is True and gpu0["cordoned"] is False
    assert broken["unusable"].startswith("hami.io/node-nvidia-register:") and broken["devices"] == []
    (problem,) = output["problems"]
    assert problem.startswith("pod team-a/corrupt: allocation does not decode: pod annotation format error")
    summary = output["summary"]
    assert (
        summary["nodes"],
        summary["usable_nodes"],
        summary["cordoned_nodes"],
        summary["locked_nodes"],
    ) == (
        3,
        2,
        1,
        1,
    )
    assert (summary["unhealthy_devices"], summary["cordoned_devices"], summary["pods"]) == (1, 1, 4)
    assert summary["memory_mib"] == {"used": 20480 + 10240 + 4096 + 8192, "total": 4 * 40960}
    assert summary["by_vendor"]["NVIDIA"]["devices"] == 4


def test_text_table_bars_locks_and_summary(dump: str) -> None:
    result = inspect("--cluster", dump)
    assert (result.returncode, result.stderr) == (0, "")
    sections = result.stdout.split("\n\n")
    table = sections[0].splitlines()
    assert table[0].split() == [
        "NODE",
        "IDX",
        "DEVICE",
        "VENDOR",
        "TYPE",
        "MEMORY",
        "CORES",
        "SLOTS",
        "STATUS",
        "PODS",
    ]
    first = table[1]
    assert first.startswith("gpu-0") and "GPU-0a" in first
    assert "████████░░  75%  30Gi/40Gi" in first and "█████░░░░░  50%  50/100" in first
    assert first.rstrip().endswith("team-a/train team-b/infer")
    assert table[2].startswith(" ") and "team-a/waiting" in table[2]  # the node is named once
    assert any("GPU-1b" in row and "unhealthy" in row for row in table)
    assert any(row.startswith("broken") and "unusable (see NODES)" in row for row in table)
    locks = next(s for s in sections if s.startswith("LOCKS")).splitlines()
    assert locks[2].split()[:4] == ["gpu-0", "hami.io/mutex.lock", "team-a/waiting", locks[2].split()[3]]
    assert locks[2].split()[3].endswith("s")
    nodes = next(s for s in sections if s.startswith("NODES"))
    assert "gpu-1" in nodes and "cordoned" in nodes
    assert "broken  unusable: hami.io/node-nvidia-register: invalid register annotation" in nodes
    summary = next(s for s in sections if s.startswith("SUMMARY"))
    assert "nodes    3 (2 usable, 1 cordoned, 1 locked)" in summary
    assert "devices  4 (1 unhealthy, 1 cordoned)" in summary
    assert "PROBLEMS\npod team-a/corrupt: allocation does not decode" in result.stdout


def test_wide_shows_each_pods_share_state_and_scheduler(dump: str) -> None:
    result = inspect("--cluster", dump, "-o", "wide", "--ascii")
    assert result.returncode == 0
    assert "team-a/train(20Gi,50%,bound,hami-scheduler)" in result.stdout
    assert "team-a/legacy(8Gi,bound,hami-scheduler-old)" in result.stdout
    assert "########.." in result.stdout and "█" not in result.stdout


@pytest.mark.parametrize(
    ("args", "nodes", "pods"),
    [
        pytest.param(["--node", "gpu-1"], ["gpu-1"], {"legacy"}, id="node"),
        pytest.param(
            ["--node", "gpu-0,gpu-1"], ["gpu-0", "gpu-1"], {"train", "infer", "waiting", "legacy"}, id="nodes"
        ),
        pytest.param(["--namespace", "team-b"], ["gpu-0"], {"infer"}, id="namespace"),
        pytest.param(
            ["--vendor", "nvidia"], ["gpu-0", "gpu-1"], {"train", "infer", "waiting", "legacy"}, id="vendor"
        ),
        pytest.param(["--vendor", "Ascend"], [], set(), id="other-vendor"),
    ],
)
def test_filters(dump: str, args: list[str], nodes: list[str], pods: set[str]) -> None:
    output = as_json("--cluster", dump, *args)
    assert [n["name"] for n in output["nodes"]] == nodes
    assert {p["name"] for d in devices_of(output).values() for p in d["pods"]} == pods


def test_namespace_filter_keeps_the_devices_real_fill(dump: str) -> None:
    (device,) = devices_of(as_json("--cluster", dump, "-n", "team-b")).values()
    assert device["memory_mib"]["used"] == 30720 and [p["name"] for p in device["pods"]] == ["infer"]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        pytest.param(["--node", "gpu-9"], "no device node named gpu-9 in the dump", id="unknown-node"),
        pytest.param(["-o", "yaml"], "argument --output/-o: invalid choice: 'yaml'", id="output"),
        pytest.param(
            ["--url", "http://x"], "argument --url: not allowed with argument --cluster", id="two-sources"
        ),
    ],
)
def test_bad_arguments_are_one_line(dump: str, args: list[str], fragment: str) -> None:
    result = inspect("--cluster", dump, *args)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.count("\n") == 1 and fragment in result.stderr, result.stderr


def test_unreachable_replica_is_one_line() -> None:
    result = inspect("--url", "http://127.0.0.1:9")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert result.stderr.startswith("hami-scheduler inspect: error: http://127.0.0.1:9/debug/state?all=true:")


def test_a_plugin_key_without_its_counted_list_is_a_problem() -> None:
    """Issue 19: `AWS_NEURON_IDS` (or any key a plugin allocates from, as its vendor declares it) on a pod
    without `hami.io/aws-neuron-devices-allocated` names devices nobody counts: inspect says so."""
    from app.cli.sources import from_objects
    from app.devices.awsneuron import AwsNeuron

    stray = {
        "metadata": {
            "name": "stray",
            "namespace": "team-a",
            "uid": "u",
            "annotations": {"AWS_NEURON_IDS": "0,1"},
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
    }
    counted = {
        "metadata": {
            "name": "ok",
            "namespace": "team-a",
            "uid": "v",
            "annotations": {"hami.io/vgpu-node": "n1"},
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
    }
    loaded = from_objects([], [stray, counted], [AwsNeuron()])
    assert loaded.problems == ["pod team-a/stray: AWS_NEURON_IDS name devices no allocated list counts"]
