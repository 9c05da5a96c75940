"""`python -m app.cli admit`, run as a subprocess exactly as an operator runs it."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLACEHOLDER_UID = "00000000-0000-0000-0000-000000000000"


def admit(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the command; JSON output unless the test asks for another format."""
    if "--output" not in args and "-o" not in args:
        args = (*args, "--output", "json")
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "admit", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def write(tmp_path: Path, name: str, content: Any) -> str:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return str(path)


def gpu_pod(limits: dict[str, str] | None = None, namespace: str = "team", **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train", "namespace": namespace, **metadata},
        "spec": {
            "schedulerName": "default-scheduler",
            "containers": [{"name": "cuda", "resources": {"limits": limits or {"nvidia.com/gpu": "1"}}}],
        },
    }


def patch_of(response: dict[str, Any]) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return sorted(ops, key=lambda op: op["path"])


EXCLUSIVE = [
    {"op": "add", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpucores", "value": "100"},
    {"op": "replace", "path": "/spec/schedulerName", "value": "hami-scheduler"},
]


def test_json_response_for_the_worked_example(tmp_path: Path) -> None:
    result = admit("--pod", write(tmp_path, "pod.json", gpu_pod(uid="abc-123")))
    assert (result.returncode, result.stderr) == (0, "")
    response = json.loads(result.stdout)
    assert set(response) == {"uid", "allowed", "status", "patchType", "patch"}
    assert (response["uid"], response["allowed"], response["status"]) == ("abc-123", True, {"code": 200})
    assert response["patchType"] == "JSONPatch"
    assert patch_of(response) == EXCLUSIVE


def test_yaml_pod_custom_scheduler_name_and_placeholder_uid(tmp_path: Path) -> None:
    pod = """
apiVersion: v1
kind: Pod
metadata: {name: train}
spec:
  schedulerName: default-scheduler
  containers:
  - name: cuda
    resources: {limits: {nvidia.com/gpumem: "4000"}}
"""
    result = admit("--pod", write(tmp_path, "pod.yaml", pod), "--scheduler-name", "gpu-sched")
    response = json.loads(result.stdout)
    assert response["uid"] == PLACEHOLDER_UID
    assert patch_of(response) == [
        {"op": "add", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpu", "value": "1"},
        {"op": "replace", "path": "/spec/schedulerName", "value": "gpu-sched"},
    ]


def test_text_output(tmp_path: Path) -> None:
    pod = gpu_pod(annotations={"hami.io/vgpu-node": "forged"})
    result = admit("--pod", write(tmp_path, "pod.json", pod), "-o", "text")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "allowed"
    assert "warning: annotation hami.io/vgpu-node removed: only the GPU scheduler may set it" in lines
    table = lines[lines.index("") + 1 :]
    assert table[0].split() == ["WHERE", "FIELD", "CHANGE"]
    assert sorted(" ".join(row.split()) for row in table[1:]) == [
        'cuda resources.limits[nvidia.com/gpucores] add: "100"',
        "pod metadata.annotations[hami.io/vgpu-node] remove",
        'pod spec.schedulerName replace: "hami-scheduler"',
    ]


def test_wide_output_adds_the_json_patch(tmp_path: Path) -> None:
    result = admit("--pod", write(tmp_path, "pod.json", gpu_pod()), "-o", "wide")
    lines = result.stdout.splitlines()
    assert lines[lines.index("") + 1].split() == ["WHERE", "FIELD", "CHANGE", "JSON", "PATCH"]
    assert any(row.endswith('{"op": "replace", "path": "/spec/schedulerName", "value": "hami-scheduler"}')
               for row in lines)  # fmt: skip


def test_text_output_for_a_denial(tmp_path: Path) -> None:
    pod = gpu_pod()
    pod["spec"]["nodeName"] = "node-1"
    result = admit("--pod", write(tmp_path, "pod.json", pod), "--output", "text")
    assert result.stdout.splitlines() == ["denied (403 Forbidden)", "message: pod has node assigned"]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        pytest.param(
            ["--scheduler-name", "Not_A_Name"], "'Not_A_Name' is not a valid scheduler name", id="name"
        ),
        pytest.param(["--output", "yaml"], "argument --output/-o: invalid choice: 'yaml'", id="output"),
    ],
)
def test_invalid_arguments_are_one_line(tmp_path: Path, args: list[str], fragment: str) -> None:
    result = admit("--pod", write(tmp_path, "pod.json", gpu_pod()), *args)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and fragment in result.stderr, result.stderr


def test_pod_without_containers_gets_hamis_denial(tmp_path: Path) -> None:
    pod = {"kind": "Pod", "metadata": {"name": "empty", "uid": "u1"}, "spec": {"containers": []}}
    result = admit("--pod", write(tmp_path, "pod.json", pod))
    assert result.returncode == 0
    assert json.loads(result.stdout) == {
        "uid": "u1",
        "allowed": False,
        "status": {"code": 403, "reason": "Forbidden", "message": "pod has no containers"},
    }


def test_device_config_is_honoured(tmp_path: Path) -> None:
    config = write(tmp_path, "device-config.yaml", "nvidia:\n  gpuCorePolicy: force\n")
    result = admit("--pod", write(tmp_path, "pod.json", gpu_pod()), "--device-config", config)
    ops = patch_of(json.loads(result.stdout))
    env = {"op": "add", "path": "/spec/containers/0/env"}
    assert {**env, "value": [{"name": "GPU_CORE_UTILIZATION_POLICY", "value": "force"}]} in ops


def cluster(*running_cores: int) -> dict[str, Any]:
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu", "namespace": "team"},
        "spec": {"hard": {"limits.nvidia.com/gpucores": "150"}},
    }
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"running-{i}",
                "namespace": "team",
                "uid": f"r{i}",
                "annotations": {
                    "hami.io/vgpu-node": "node-1",
                    "hami.io/vgpu-devices-allocated": f"GPU-{i},NVIDIA,1000,{cores}:;",
                },
            },
            "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": "Running"},
        }
        for i, cores in enumerate(running_cores)
    ]
    return {"apiVersion": "v1", "kind": "List", "items": [quota, *pods]}


@pytest.mark.parametrize(
    ("running", "allowed"),
    [
        pytest.param((), True, id="no-usage"),
        pytest.param((50,), True, id="fits-exactly"),
        pytest.param((30, 30), False, id="over"),
    ],
)
def test_quota_from_cluster_file(tmp_path: Path, running: tuple[int, ...], allowed: bool) -> None:
    result = admit(
        "--pod",
        write(tmp_path, "pod.json", gpu_pod()),
        "--cluster",
        write(tmp_path, "c.json", cluster(*running)),
    )
    response = json.loads(result.stdout)
    assert response["allowed"] is allowed
    if not allowed:
        assert response["status"] == {
            "code": 403,
            "reason": "Forbidden",
            "message": "exceeding resource quota: limits.nvidia.com/gpucores in namespace team: used 60, "
            "limit 150, requested 100",
        }
        assert "patch" not in response


@pytest.mark.parametrize(
    ("files", "fragment"),
    [
        pytest.param({}, "cannot read", id="missing-file"),
        pytest.param({"pod.json": "{not: [valid"}, "neither valid JSON nor valid YAML", id="invalid-syntax"),
        pytest.param({"pod.json": "[1, 2]"}, "expected a Pod object", id="list"),
        pytest.param(
            {"pod.json": '{"kind": "Deployment"}'}, "expected kind Pod, got 'Deployment'", id="not-a-pod"
        ),
        pytest.param(
            {"pod.json": json.dumps(gpu_pod()), "dc.yaml": "nvidia:\n  defaultGPUNum: lots\n"},
            "nvidia.defaultGPUNum",
            id="bad-device-config",
        ),
        pytest.param(
            {"pod.json": json.dumps(gpu_pod()), "c.json": '"just a string"'},
            "expected a Kubernetes List or object",
            id="bad-cluster",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, files: dict[str, str], fragment: str) -> None:
    for name, content in files.items():
        write(tmp_path, name, content)
    args = ["--pod", str(tmp_path / "pod.json")]
    if "dc.yaml" in files:
        args += ["--device-config", str(tmp_path / "dc.yaml")]
    if "c.json" in files:
        args += ["--cluster", str(tmp_path / "c.json")]
    result = admit(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("hami-scheduler admit: error: ") and fragment in result.stderr
