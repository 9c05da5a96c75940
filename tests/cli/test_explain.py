"""`python -m app.cli explain`, run as a subprocess exactly as an operator runs it (ARCHITECTURE.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
V100 = "NVIDIA-Tesla V100-PCIE-32GB"
WORKED = "GPU-B,NVIDIA,3000,30:;;GPU-B,NVIDIA,16384,0:GPU-A,NVIDIA,16384,0:;"


def explain(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "explain", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def ok_json(*args: str) -> dict[str, Any]:
    result = explain(*args, "--output", "json")
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    output: dict[str, Any] = json.loads(result.stdout)
    return output


def write(tmp_path: Path, name: str, content: Any) -> str:
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    elif name.endswith((".yaml", ".yml")):
        path.write_text(yaml.safe_dump(content), encoding="utf-8")
    else:
        path.write_text(json.dumps(content), encoding="utf-8")
    return str(path)


def register(*cards: tuple[str, int], type: str = V100, mem: int = 32768) -> str:
    devices = [
        {
            "id": uuid,
            "index": index,
            "count": 10,
            "devmem": mem,
            "devcore": 100,
            "type": type,
            "mode": "hami-core",
            "health": True,
        }
        for uuid, index in cards
    ]
    return json.dumps(devices, separators=(",", ":"))


def k8s_node(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": annotations or {}}}


def running(
    name: str, node: str, allocated: str, namespace: str = "default", scheduler: str = "hami-scheduler"
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "annotations": {"hami.io/vgpu-node": node, "hami.io/vgpu-devices-allocated": allocated},
        },
        "spec": {"schedulerName": scheduler, "containers": [{"name": "x"}]},
        "status": {"phase": "Running"},
    }


def cluster(*items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(items)}


def gpu_pod(*containers: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "uid-p", "annotations": annotations or {}},
        "spec": {"containers": list(containers)},
    }


def limits(name: str, **values: Any) -> dict[str, Any]:
    return {"name": name, "resources": {"limits": values}} if values else {"name": name}


WORKED_POD = gpu_pod(
    limits("c0", **{"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 30}),
    limits("c1"),
    limits("c2", **{"nvidia.com/gpu": 2, "nvidia.com/gpumem-percentage": 50}),
)
GPU_NODE = k8s_node("gpu-node-1", {"hami.io/node-nvidia-register": register(("GPU-A", 0), ("GPU-B", 1))})
EXISTING = running("existing", "gpu-node-1", "GPU-A,NVIDIA,8000,30:;")
CLUSTER = cluster(
    GPU_NODE,
    k8s_node("cpu-node"),
    k8s_node("broken", {"hami.io/node-nvidia-register": "[{oops"}),
    EXISTING,
)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    return {
        "cluster": write(tmp_path, "cluster.json", CLUSTER),
        "pod": write(tmp_path, "pod.yaml", WORKED_POD),
    }


def test_fit_json(files: dict[str, str]) -> None:
    output = ok_json("--cluster", files["cluster"], "--pod", files["pod"])
    assert output["NodeNames"] == ["gpu-node-1"]
    assert output["FailedNodes"] is None
    assert output["Error"] == ""
    annotations = output["Annotations"]
    assert annotations.pop("hami.io/vgpu-time").isdigit()
    assert annotations == {
        "hami.io/vgpu-node": "gpu-node-1",
        "hami.io/vgpu-devices-to-allocate": WORKED,
        "hami.io/vgpu-devices-allocated": WORKED,
    }
    assert output["Scores"]["gpu-node-1"] == pytest.approx(3.2207, abs=1e-4)
    # a corrupt node is excluded with its reason; the others are still considered
    assert output["Reasons"]["cpu-node"] == "node unregistered"
    assert output["Reasons"]["broken"].startswith(
        "node unregistered: hami.io/node-nvidia-register: invalid register"
    )


def test_fit_text(files: dict[str, str]) -> None:
    result = explain("--cluster", files["cluster"], "--pod", files["pod"], "--output", "text")
    assert (result.returncode, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NODE", "VERDICT", "SCORE", "DEVICES", "/", "REASON"]
    # the chosen node's devices, one line per container and device, instead of the annotation encoding
    assert " ".join(lines[1].split()) == "gpu-node-1 chosen 3.22 c0: GPU-B (NVIDIA) 2.9Gi 30% cores"
    assert [" ".join(line.split()) for line in lines[2:4]] == [
        "c2: GPU-B (NVIDIA) 16Gi",
        "c2: GPU-A (NVIDIA) 16Gi",
    ]
    assert any(line.startswith("broken") and "node unregistered: " in line for line in lines)
    assert lines[-1] == "placed on gpu-node-1"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        pytest.param(
            ["--gpu-policy", "fastest"],
            "argument --gpu-policy: unknown GPU policy 'fastest' "
            "(known: binpack, spread, mutex, numa, topology-aware)",
            id="gpu-policy",
        ),
        pytest.param(["--gpu-policy", "binpack,nope"], "unknown GPU policy 'nope'", id="gpu-policy-chain"),
        pytest.param(
            ["--node-policy", "random"], "argument --node-policy: invalid choice: 'random'", id="node"
        ),
    ],
)
def test_invalid_policies_are_one_line(files: dict[str, str], args: list[str], fragment: str) -> None:
    result = explain("--cluster", files["cluster"], "--pod", files["pod"], *args)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.count("\n") == 1 and fragment in result.stderr, result.stderr
    assert result.stderr.startswith("hami-scheduler explain: error: ")


def test_policy_chains_are_accepted(files: dict[str, str]) -> None:
    output = ok_json("--cluster", files["cluster"], "--pod", files["pod"], "--gpu-policy", "binpack,numa")
    assert output["NodeNames"] == ["gpu-node-1"]


def test_wide_shows_the_devices_of_every_fitting_node(tmp_path: Path) -> None:
    other = k8s_node("gpu-node-2", {"hami.io/node-nvidia-register": register(("GPU-C", 0))})
    the_cluster = write(tmp_path, "c.json", cluster(GPU_NODE, other, EXISTING))
    the_pod = write(
        tmp_path, "p.json", gpu_pod(limits("a", **{"nvidia.com/gpu": 1, "nvidia.com/gpumem": 100}))
    )
    wide = explain("--cluster", the_cluster, "--pod", the_pod, "-o", "wide").stdout.splitlines()
    assert any(" ".join(line.split()).startswith("gpu-node-2 fits") and "a: GPU-C (NVIDIA) 100Mi" in line
               for line in wide)  # fmt: skip
    text = explain("--cluster", the_cluster, "--pod", the_pod).stdout  # text: only the chosen node's devices
    assert "gpu-node-2" in text and "GPU-C" not in text


def test_no_fit(tmp_path: Path) -> None:
    the_cluster = write(tmp_path, "c.json", CLUSTER)
    the_pod = write(
        tmp_path, "p.json", gpu_pod(limits("big", **{"nvidia.com/gpu": 1, "nvidia.com/gpumem": 40000}))
    )
    output = ok_json("--cluster", the_cluster, "--pod", the_pod)
    assert output["NodeNames"] is None
    assert output["Error"] == ""
    assert output["Annotations"] == {}
    assert output["FailedNodes"]["gpu-node-1"] == "2/2 CardInsufficientMemory"
    assert output["FailedNodes"]["cpu-node"] == "node unregistered"
    assert set(output["FailedNodes"]) == {"gpu-node-1", "cpu-node", "broken"}

    text = explain("--cluster", the_cluster, "--pod", the_pod, "--output", "text")
    assert text.returncode == 0
    assert text.stdout.splitlines()[-1] == "no node fits this pod"
    assert "2/2 CardInsufficientMemory" in text.stdout


def test_nodes_subset(tmp_path: Path) -> None:
    other = k8s_node("gpu-node-2", {"hami.io/node-nvidia-register": register(("GPU-C", 0))})
    the_cluster = write(tmp_path, "c.json", cluster(GPU_NODE, other, EXISTING))
    the_pod = write(
        tmp_path, "p.json", gpu_pod(limits("a", **{"nvidia.com/gpu": 1, "nvidia.com/gpumem": 100}))
    )
    # binpack (default) would pick the busier gpu-node-1; restricted to gpu-node-2 and an unknown name:
    output = ok_json("--cluster", the_cluster, "--pod", the_pod, "--nodes", "gpu-node-2, ghost")
    assert output["NodeNames"] == ["gpu-node-2"]
    assert output["Reasons"] == {"ghost": "node unregistered"}
    assert set(output["Scores"]) == {"gpu-node-2"}
    assert ok_json("--cluster", the_cluster, "--pod", the_pod)["NodeNames"] == ["gpu-node-1"]


def test_policies(tmp_path: Path) -> None:
    other = k8s_node("gpu-node-2", {"hami.io/node-nvidia-register": register(("GPU-C", 0), ("GPU-D", 1))})
    the_cluster = write(tmp_path, "c.json", cluster(GPU_NODE, other, EXISTING))
    the_pod = write(
        tmp_path, "p.json", gpu_pod(limits("a", **{"nvidia.com/gpu": 1, "nvidia.com/gpumem": 100}))
    )
    default = ok_json("--cluster", the_cluster, "--pod", the_pod)
    assert default["NodeNames"] == ["gpu-node-1"]
    assert default["Annotations"]["hami.io/vgpu-devices-allocated"] == "GPU-B,NVIDIA,100,0:;"
    spread = ok_json("--cluster", the_cluster, "--pod", the_pod, "--node-policy", "spread")
    assert spread["NodeNames"] == ["gpu-node-2"]
    binpack = ok_json("--cluster", the_cluster, "--pod", the_pod, "--gpu-policy", "binpack")
    assert binpack["Annotations"]["hami.io/vgpu-devices-allocated"] == "GPU-A,NVIDIA,100,0:;"
    # the pod's own annotation wins over the flag
    annotated = write(
        tmp_path,
        "annotated.json",
        gpu_pod(
            limits("a", **{"nvidia.com/gpu": 1, "nvidia.com/gpumem": 100}),
            annotations={"hami.io/gpu-scheduler-policy": "spread"},
        ),
    )
    assert (
        ok_json("--cluster", the_cluster, "--pod", annotated, "--gpu-policy", "binpack")["Annotations"][
            "hami.io/vgpu-devices-allocated"
        ]
        == "GPU-B,NVIDIA,100,0:;"
    )


def test_device_config_with_custom_resource_names(tmp_path: Path) -> None:
    config = write(
        tmp_path,
        "device-config.yaml",
        {
            "nvidia": {
                "resourceCountName": "hami.io/gpu",
                "resourceMemoryName": "hami.io/gpumem",
                "memoryFactor": 2,
            }
        },
    )
    the_cluster = write(tmp_path, "c.json", cluster(GPU_NODE))
    custom = write(
        tmp_path, "custom.json", gpu_pod(limits("a", **{"hami.io/gpu": 1, "hami.io/gpumem": 1000}))
    )
    output = ok_json("--cluster", the_cluster, "--pod", custom, "--device-config", config)
    assert output["Annotations"]["hami.io/vgpu-devices-allocated"] == "GPU-B,NVIDIA,2000,0:;"
    # the chart's names mean nothing under this config: the pod passes through as a non-GPU pod
    chart_names = write(tmp_path, "chart.json", gpu_pod(limits("a", **{"nvidia.com/gpu": 1})))
    passthrough = ok_json("--cluster", the_cluster, "--pod", chart_names, "--device-config", config)
    assert passthrough["NodeNames"] == ["gpu-node-1"]
    assert passthrough["Annotations"] == {}
    text = explain(
        "--cluster", the_cluster, "--pod", chart_names, "--device-config", config, "--output", "text"
    )
    assert text.stdout.strip() == "pod requests no managed devices: every candidate node passes"


def test_quota_in_the_cluster_file(tmp_path: Path) -> None:
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu", "namespace": "default"},
        "spec": {"hard": {"limits.nvidia.com/gpumem": "10000"}},
    }
    the_cluster = write(tmp_path, "c.yaml", cluster(GPU_NODE, EXISTING, quota))
    the_pod = write(
        tmp_path, "p.json", gpu_pod(limits("a", **{"nvidia.com/gpu": 1, "nvidia.com/gpumem": 2001}))
    )
    output = ok_json("--cluster", the_cluster, "--pod", the_pod)
    assert output["FailedNodes"] == {"gpu-node-1": "2/2 ResourceQuotaNotFit"}
    fits = write(tmp_path, "q.json", gpu_pod(limits("a", **{"nvidia.com/gpu": 1, "nvidia.com/gpumem": 2000})))
    assert ok_json("--cluster", the_cluster, "--pod", fits)["NodeNames"] == ["gpu-node-1"]


def test_invalid_device_request_is_reported_in_error(tmp_path: Path) -> None:
    the_cluster = write(tmp_path, "c.json", CLUSTER)
    the_pod = write(
        tmp_path, "p.json", gpu_pod(limits("a", **{"nvidia.com/gpu": 1, "nvidia.com/gpumem": "16Gi"}))
    )
    output = ok_json("--cluster", the_cluster, "--pod", the_pod)
    assert output["NodeNames"] is None
    assert output["Error"].startswith("invalid nvidia.com/gpumem value 16Gi")


BAD_INPUTS = [
    ("unreadable-cluster", {"cluster": None}, "error: cannot read "),
    ("unreadable-pod", {"pod": None}, "error: cannot read "),
    ("directory-as-pod", {"pod": "."}, "error: cannot read "),
    ("invalid-json-pod", {"pod": '{"kind": "Pod", "spec": {'}, "is neither valid JSON nor valid YAML"),
    ("invalid-yaml-cluster", {"cluster": "a: [b\n"}, "is neither valid JSON nor valid YAML"),
    ("binary-pod", {"pod": b"\xff\xfe\x00"}, "error: cannot read "),
    (
        "pod-without-containers",
        {"pod": {"kind": "Pod", "spec": {"containers": []}}},
        "the pod has no containers",
    ),
    ("pod-without-spec", {"pod": {"kind": "Pod", "metadata": {"name": "p"}}}, "the pod has no containers"),
    (
        "wrong-kind",
        {"pod": {"kind": "Node", "spec": {"containers": [{"name": "a"}]}}},
        "expected kind Pod, got 'Node'",
    ),
    ("pod-is-a-list", {"pod": [1, 2]}, "expected a Pod object"),
    (
        "metadata-not-an-object",
        {"pod": {"kind": "Pod", "metadata": "x", "spec": {"containers": [{"name": "a"}]}}},
        "metadata must be an object",
    ),
    (
        "container-not-an-object",
        {"pod": {"kind": "Pod", "spec": {"containers": [1]}}},
        "spec.containers[0] must be an object",
    ),
    ("cluster-null", {"cluster": "null"}, "expected a Kubernetes List or object"),
    ("cluster-items-not-a-list", {"cluster": '{"kind": "List", "items": 5}'}, "items must be a list"),
    ("device-config-not-a-mapping", {"device-config": "- 1\n"}, "expected a mapping of vendor sections"),
    (
        "device-config-invalid-value",
        {"device-config": "nvidia: {defaultMemory: lots}\n"},
        "nvidia.defaultMemory: expected an integer",
    ),
    ("deeply-nested-json", {"cluster": "[" * 100000 + "]" * 100000}, "is neither valid JSON nor valid YAML"),
    ("unknown-output", {"output": "xml"}, "invalid choice: 'xml'"),
]


@pytest.mark.parametrize(
    ("overrides", "message"), [row[1:] for row in BAD_INPUTS], ids=[row[0] for row in BAD_INPUTS]
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, overrides: dict[str, Any], message: str) -> None:
    paths = {
        "cluster": write(tmp_path, "cluster.json", CLUSTER),
        "pod": write(tmp_path, "pod.json", WORKED_POD),
    }
    extra: list[str] = []
    for key, value in overrides.items():
        if key == "output":
            extra += ["--output", value]
            continue
        if value is None:
            path = str(tmp_path / "missing.json")
        elif value == ".":
            path = str(tmp_path)
        elif isinstance(value, bytes):
            (tmp_path / "binary").write_bytes(value)
            path = str(tmp_path / "binary")
        else:
            path = write(
                tmp_path, f"override-{key}.json" if not isinstance(value, str) else f"override-{key}", value
            )
        if key == "device-config":
            extra += ["--device-config", path]
        else:
            paths[key] = path
    result = explain("--cluster", paths["cluster"], "--pod", paths["pod"], *extra)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.endswith("\n")
    assert message in result.stderr


def test_missing_arguments_exit_2(tmp_path: Path) -> None:
    result = explain("--cluster", write(tmp_path, "c.json", CLUSTER))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.strip().endswith("the following arguments are required: --pod")
    assert result.stderr.count("\n") == 1


def test_junk_objects_in_the_cluster_file_are_tolerated(tmp_path: Path) -> None:
    junk_pod = {
        "kind": "Pod",
        "metadata": {
            "annotations": {"hami.io/vgpu-node": "gpu-node-1", "hami.io/vgpu-devices-allocated": "x,y"}
        },
        "spec": "bad",
    }
    corrupt_allocation = running("corrupt", "gpu-node-1", "GPU-A,NVIDIA,1:;")
    junk_node = {
        "kind": "Node",
        "metadata": {"name": "odd", "annotations": {"hami.io/node-nvidia-register": 5}},
    }
    the_cluster = write(
        tmp_path,
        "c.json",
        [
            1,
            "x",
            GPU_NODE,
            junk_pod,
            corrupt_allocation,
            junk_node,
            {"kind": "ResourceQuota", "metadata": "x"},
        ],
    )
    the_pod = write(
        tmp_path, "p.json", gpu_pod(limits("a", **{"nvidia.com/gpu": 1, "nvidia.com/gpumem": 100}))
    )
    output = ok_json("--cluster", the_cluster, "--pod", the_pod)
    assert output["NodeNames"] == ["gpu-node-1"]
    assert output["Reasons"] == {"odd": "node unregistered"}


# --- adopted scheduler names -------------------------------------------------------------------------------

WHOLE = "NVIDIA,32768,100:;"
ADOPTION_CLUSTER = cluster(
    k8s_node(
        "gpu-node-1", {"hami.io/node-nvidia-register": register(("GPU-A", 0), ("GPU-B", 1), ("GPU-C", 2))}
    ),
    running("ours", "gpu-node-1", f"GPU-A,{WHOLE}", scheduler="hami-py"),
    running("from-hami", "gpu-node-1", f"GPU-B,{WHOLE}", scheduler="hami-scheduler"),
    running("forged", "gpu-node-1", f"GPU-C,{WHOLE}", scheduler="default-scheduler"),
    running("corrupt", "gpu-node-1", "GPU-C,NVIDIA,lots,100:;", scheduler="hami-py"),
)
TWO_WHOLE_GPUS = gpu_pod(limits("c", **{"nvidia.com/gpu": 2, "nvidia.com/gpucores": 100}))


@pytest.mark.parametrize(
    ("adopt", "fits", "holders"),
    [
        (None, False, {"default/ours": False, "default/from-hami": True}),
        ("hami-scheduler,old", False, {"default/ours": False, "default/from-hami": True}),
        ("", True, {"default/ours": False}),
    ],
    ids=["default-adopts-hami", "explicit-list", "none"],
)
def test_adopted_pods_count_and_foreign_ones_do_not(
    tmp_path: Path, adopt: str | None, fits: bool, holders: dict[str, bool]
) -> None:
    """Two whole GPUs are free only when the pod HAMi placed on GPU-B is not counted; the forged and the
    corrupt allocations on GPU-C never count."""
    args = [
        "--cluster",
        write(tmp_path, "c.json", ADOPTION_CLUSTER),
        "--pod",
        write(tmp_path, "p.json", TWO_WHOLE_GPUS),
    ]
    args += ["--scheduler-name", "hami-py"]
    if adopt is not None:
        args += ["--adopt-scheduler-names", adopt]
    output = ok_json(*args)
    allocated = output["Annotations"].get("hami.io/vgpu-devices-allocated", "")
    assert (allocated.split(":")[:2], output["NodeNames"]) == (
        (["GPU-C,NVIDIA,32768,100", "GPU-B,NVIDIA,32768,100"], ["gpu-node-1"]) if fits else ([""], None)
    )
    assert {h["Pod"]: h["Adopted"] for h in output["Holders"]} == holders
    assert all(h["Node"] == "gpu-node-1" for h in output["Holders"])
    reasons = {n["Pod"]: n["Reason"] for n in output["NotCounted"]}
    assert (
        reasons["default/forged"] == "schedulerName 'default-scheduler' is neither ours (hami-py) nor adopted"
    )
    assert reasons["default/corrupt"].startswith("corrupt: ")
    if adopt == "":
        assert "default/from-hami" in reasons

    text = explain(*args, "--output", "text").stdout.splitlines()
    adopted = sum(holders.values())
    usage = next(line for line in text if line.startswith("usage: "))
    assert usage.startswith(f"usage: {len(holders)} pods hold devices: 1 ours (hami-py), {adopted} adopted")
    assert text[-1] == ("placed on gpu-node-1" if fits else "no node fits this pod")
    assert "not counted: default/forged: schedulerName 'default-scheduler' is neither ours" in "\n".join(text)


def test_adopting_default_scheduler_is_refused(tmp_path: Path) -> None:
    result = explain(
        "--cluster",
        write(tmp_path, "c.json", ADOPTION_CLUSTER),
        "--pod",
        write(tmp_path, "p.json", TWO_WHOLE_GPUS),
        "--adopt-scheduler-names",
        "default-scheduler",
    )
    assert result.returncode == 2
    prefix = "hami-scheduler explain: error: --adopt-scheduler-names: 'default-scheduler' cannot be adopted"
    assert result.stderr.startswith(prefix)
    assert len(result.stderr.splitlines()) == 1
