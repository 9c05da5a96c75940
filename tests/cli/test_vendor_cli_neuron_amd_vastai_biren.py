"""`explain` and `admit` with AWS Neuron, AMD, Vastai and Biren in HAMi's device-config.yaml: each is
enabled when its section names its count resource (HAMi has no --enable-* flag for them, vendors §1.2);
FailedNodes carries their reason strings; Annotations carries every key they write at filter time
(§2.10-2.13); admit answers their webhook refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEVICE_CONFIG = {
    "nvidia": {"resourceCountName": "nvidia.com/gpu"},
    "awsneuron": {
        "resourceCountName": "aws.amazon.com/neuron",
        "resourceCoreName": "aws.amazon.com/neuroncore",
    },
    "amd": {
        "resourceCountName": "amd.com/gpu",
        "resourceMemoryName": "amd.com/gpumem",
        "resourceCoreName": "amd.com/gpucores",
    },
    "vastai": {"resourceCountName": "vastaitech.com/va"},
    "biren": {"resourceCountName": "birentech.com/gpu"},
}


def run(command: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The command with JSON output (text is the default)."""
    return subprocess.run(
        [sys.executable, "-m", "app.cli", command, *args, "--output", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def write(tmp_path: Path, name: str, content: Any) -> str:
    path = tmp_path / name
    path.write_text(
        yaml.safe_dump(content) if name.endswith(".yaml") else json.dumps(content), encoding="utf-8"
    )
    return str(path)


def node(name: str, annotations: dict[str, str] | None = None, **status: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": annotations or {}, "labels": status.pop("labels", {})},
        "status": status,
    }


def pod(*limits: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "u-1", "annotations": annotations or {}},
        "spec": {
            "containers": [{"name": f"c{i}", "resources": {"limits": lim}} for i, lim in enumerate(limits)]
        },
    }


def inf2(name: str, devices: int = 4, kind: str = "inf2.xlarge") -> dict[str, Any]:
    counts = {"aws.amazon.com/neuron": str(devices), "aws.amazon.com/neuroncore": str(2 * devices)}
    return node(name, capacity=counts, allocatable=counts, labels={"node.kubernetes.io/instance-type": kind})


AMD_REGISTER = json.dumps(
    [
        {
            "id": "mi-0",
            "count": 4,
            "devmem": 196608,
            "devcore": 304,
            "type": "AMD Instinct MI300X VF",
            "health": True,
        }
    ]
)
VASTAI_REGISTER = json.dumps(
    [
        {"id": f"va-{i}", "index": i, "count": 1, "devmem": 16384, "type": "Vastai", "health": True,
         "custominfo": {"DeviceStrategy": "die", "AIC": str(i // 2)}}
        for i in range(4)
    ]
)  # fmt: skip


def explain(tmp_path: Path, nodes: list[dict[str, Any]], the_pod: dict[str, Any]) -> dict[str, Any]:
    cluster = write(tmp_path, "cluster.json", {"apiVersion": "v1", "kind": "List", "items": nodes})
    done = run(
        "explain",
        "--cluster",
        cluster,
        "--pod",
        write(tmp_path, "pod.json", the_pod),
        "--device-config",
        write(tmp_path, "dc.yaml", DEVICE_CONFIG),
    )
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def test_neuron_and_amd_annotations_of_one_pod(tmp_path: Path) -> None:
    amd_node = inf2("n1")
    amd_node["metadata"]["annotations"]["hami.io/node-amd-register"] = AMD_REGISTER
    amd_node["status"]["capacity"]["amd.com/gpu"] = "4"
    answer = explain(
        tmp_path,
        [amd_node],
        pod(
            {"aws.amazon.com/neuroncore": "1"},
            {"amd.com/gpu": 1, "amd.com/gpumem": 16384, "amd.com/gpucores": 25},
        ),
    )
    notes = answer["Annotations"]
    assert answer["NodeNames"] == ["n1"]
    assert notes["hami.io/aws-neuron-devices-allocated"] == "n1-AWSNeuron-3,AWSNeuron,0,1:;;"  # §2.10
    assert notes["AWS_NEURON_IDS"] == "6"  # core 0 of device 3: 2 x 3 + 0
    assert notes["NEURON_RESOURCE_TYPE"] == "aws.amazon.com/neuroncore"
    assert notes["NEURON_ALLOCATED"] == "false" and notes["aws.amazon.com/predicate-node"] == "n1"
    assert notes["NEURON_ALLOC_TIME"].isdigit()
    amd = ";mi-0,AMD Instinct MI300X VF,16384,76:;"  # §2.11 example, container 1
    assert notes["hami.io/amd-devices-allocated"] == notes["hami.io/amd-devices-to-allocate"] == amd


@pytest.mark.parametrize(
    ("nodes", "limits", "reason"),
    [
        pytest.param(
            [inf2("n1", kind="trn1.2xlarge")],
            {"aws.amazon.com/neuron": 2},
            "1/4 NumaNotFit",
            id="V§3.10 #3 trn 2",
        ),
        pytest.param(
            [node("n1", {"hami.io/node-amd-register": AMD_REGISTER}, capacity={"amd.com/gpu": "1"})],
            {"amd.com/gpu": 1, "amd.com/gpumem": 200000},
            "1/1 CardInsufficientMemory",
            id="V§2.11 memory",
        ),
        pytest.param(
            [node("n1", {"hami.io/node-va-register": VASTAI_REGISTER})],
            {"vastaitech.com/va": 5},
            "NodeInsufficientDevice",
            id="V§1.1 more dies than the node has",
        ),
        pytest.param(
            [
                node(
                    "n1",
                    {"hami.io/node-biren-register": '[{"id":"b","count":1,"type":"Biren","health":false}]'},
                )
            ],
            {"birentech.com/gpu": 1},
            "1/1 CardNotHealth",
            id="V§2.13 health",
        ),
    ],
)
def test_failed_nodes_carry_the_vendors_reasons(
    tmp_path: Path, nodes: list[dict[str, Any]], limits: dict[str, Any], reason: str
) -> None:
    answer = explain(tmp_path, nodes, pod(limits))
    assert answer["NodeNames"] is None
    assert answer["Reasons"]["n1"] == reason


def test_vastai_dies_score_their_card(tmp_path: Path) -> None:
    answer = explain(
        tmp_path, [node("n1", {"hami.io/node-va-register": VASTAI_REGISTER})], pod({"vastaitech.com/va": 2})
    )
    assert answer["Annotations"]["hami.io/Vastai-devices-allocated"] == "va-3,Vastai,0,0:va-2,Vastai,0,0:;"
    assert answer["Scores"]["n1"] == 1.0  # §2.12 ScoreNode: both dies on AIC 1


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        pytest.param({"aws.amazon.com/neuroncore": 3}, "must be 1 or a multiple of 2, got 3", id="V§2.10"),
        pytest.param(
            {"amd.com/gpu": 1, "amd.com/gpucores": 0}, "integer percentage between 1 and 100", id="V§2.11"
        ),
    ],
)
def test_admit_answers_the_webhook_refusals(tmp_path: Path, limits: dict[str, Any], message: str) -> None:
    done = run(
        "admit",
        "--pod",
        write(tmp_path, "pod.json", pod(limits)),
        "--device-config",
        write(tmp_path, "dc.yaml", DEVICE_CONFIG),
    )
    answer = json.loads(done.stdout)
    assert answer["allowed"] is False and message in answer["status"]["message"]


def test_admit_tells_amd_memory_without_a_count_is_ignored(tmp_path: Path) -> None:
    """HAMi admits it and runs the pod with no AMD device (V§3.11 #4): admitted, routed, and told."""
    done = run(
        "admit",
        "--pod",
        write(tmp_path, "pod.json", pod({"amd.com/gpumem": 1024})),
        "--device-config",
        write(tmp_path, "dc.yaml", DEVICE_CONFIG),
    )
    answer = json.loads(done.stdout)
    assert answer["allowed"] is True
    assert answer["warnings"] == [
        "container c0: amd.com/gpumem is ignored without amd.com/gpu: the container gets no AMD device "
        "(as HAMi does)"
    ]


def test_a_section_without_its_count_name_leaves_the_vendor_off(tmp_path: Path) -> None:
    config = {**DEVICE_CONFIG, "biren": {}}
    done = run(
        "explain",
        "--cluster",
        write(tmp_path, "c.json", {"apiVersion": "v1", "kind": "List", "items": []}),
        "--pod",
        write(tmp_path, "pod.json", pod({"birentech.com/gpu": 1})),
        "--device-config",
        write(tmp_path, "dc.yaml", config),
    )
    assert "Biren is not enabled (device config: the 'biren' section)" in json.loads(done.stdout)["Error"]
