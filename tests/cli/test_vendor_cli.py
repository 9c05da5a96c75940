"""`explain` and `admit` with HAMi's full device-config.yaml: a vendor behind an `--enable-*` flag in HAMi
(Ascend) is enabled exactly when its section is present; FailedNodes carries the vendor's reason strings;
Annotations carries every key the vendor writes at filter time (reference vendors §1.2, §2.1, §2.3)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEVICE_CONFIG = {
    "nvidia": {"resourceCountName": "nvidia.com/gpu"},
    "cambricon": {"resourceCountName": "cambricon.com/vmlu"},
    "hygon": {"resourceCountName": "hygon.com/dcunum", "memoryFactor": 1},
    "vnpus": {
        "hamiVnpuCore": False,
        "configs": [
            {
                "commonWord": "Ascend910B3",
                "chipName": "910B3",
                "resourceName": "huawei.com/Ascend910B3",
                "resourceMemoryName": "huawei.com/Ascend910B3-memory",
                "memoryAllocatable": 65536,
                "memoryCapacity": 65536,
                "aiCore": 20,
                "templates": [
                    {"name": "vir05_1c_16g", "memory": 16384},
                    {"name": "vir10_3c_32g", "memory": 32768},
                ],
            }
        ],
    },
}


def run(command: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", command, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def write(tmp_path: Path, name: str, content: Any) -> str:
    path = tmp_path / name
    path.write_text(
        yaml.safe_dump(content) if name.endswith(".yaml") else json.dumps(content), encoding="utf-8"
    )
    return str(path)


def ascend_node(name: str, busy: tuple[int, ...] = ()) -> dict[str, Any]:
    chips = [
        {
            "id": f"{name}-npu-{i}",
            "index": i,
            "count": 4,
            "devmem": 65536,
            "devcore": 20,
            "type": "Ascend910B3",
            "health": True,
            "custominfo": {"NetworkID": 0 if i < 4 else 1},
        }
        for i in range(8)
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": {"hami.io/node-register-Ascend910B3": json.dumps(chips)}},
    }


def mlu_node(name: str) -> dict[str, Any]:
    capacity = {"cambricon.com/mlu.smlu.vcore": "200", "cambricon.com/mlu.smlu.vmemory": "186"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"capacity": capacity}}


def the_pod(limits: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "u1", "annotations": annotations or {}},
        "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]},
    }


def test_explain_places_an_ascend_pod_with_its_annotations(tmp_path: Path) -> None:
    cluster = {"kind": "List", "items": [ascend_node("npu-1"), mlu_node("mlu-1")]}
    pod = the_pod({"huawei.com/Ascend910B3": 2, "huawei.com/Ascend910B3-memory": 65536})
    result = run(
        "explain",
        "--cluster",
        write(tmp_path, "c.json", cluster),
        "--pod",
        write(tmp_path, "p.json", pod),
        "--device-config",
        write(tmp_path, "device-config.yaml", DEVICE_CONFIG),
        "--output",
        "json",
    )
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    out = json.loads(result.stdout)
    assert out["NodeNames"] == ["npu-1"]
    notes = out["Annotations"]
    assert (
        notes["hami.io/Ascend910B3-devices-allocated"]
        == "npu-1-npu-7,Ascend910B3,65536,0:npu-1-npu-6,Ascend910B3,65536,0:;"
    )
    assert notes["hami.io/Ascend910B3-devices-to-allocate"] == notes["hami.io/Ascend910B3-devices-allocated"]
    assert json.loads(notes["huawei.com/Ascend910B3"]) == [
        {"UUID": "npu-1-npu-7", "memory": 65536},
        {"UUID": "npu-1-npu-6", "memory": 65536},
    ]
    assert notes["predicate-time"].isdigit() and notes["hami.io/vgpu-node"] == "npu-1"
    assert out["Scores"]["npu-1"] == 10.0  # §2.1.6: both chips in one NetworkID
    assert out["Reasons"] == {"mlu-1": "NodeInsufficientDevice"}


def test_explain_reports_the_vendor_reason_strings(tmp_path: Path) -> None:
    cluster = {"kind": "List", "items": [mlu_node("mlu-1")]}
    pod = the_pod({"cambricon.com/vmlu": 1, "cambricon.com/mlu.smlu.vmemory": 1000})
    result = run(
        "explain",
        "--cluster",
        write(tmp_path, "c.json", cluster),
        "--pod",
        write(tmp_path, "p.json", pod),
        "--device-config",
        write(tmp_path, "device-config.yaml", DEVICE_CONFIG),
        "--output",
        "json",
    )
    out = json.loads(result.stdout)
    assert out["FailedNodes"] == {"mlu-1": "2/2 CardInsufficientMemory"}  # 256000 MiB > 23808 per card


def test_without_the_section_ascend_is_not_enabled(tmp_path: Path) -> None:
    config = {k: v for k, v in DEVICE_CONFIG.items() if k != "vnpus"}
    pod = the_pod({"huawei.com/Ascend910B3": 1})
    result = run(
        "explain",
        "--cluster",
        write(tmp_path, "c.json", {"kind": "List", "items": [ascend_node("npu-1")]}),
        "--pod",
        write(tmp_path, "p.json", pod),
        "--device-config",
        write(tmp_path, "d.yaml", config),
        "--output",
        "json",
    )
    out = json.loads(result.stdout)
    assert out["Error"] == (
        "container c asks for huawei.com/Ascend910B3: "
        "Huawei Ascend is not enabled (device config: the 'vnpus' section)"
    )


def test_admit_rounds_ascend_memory_to_a_template(tmp_path: Path) -> None:
    pod = the_pod({"huawei.com/Ascend910B3": 1, "huawei.com/Ascend910B3-memory": 10000})
    result = run(
        "admit",
        "--pod",
        write(tmp_path, "p.json", pod),
        "--device-config",
        write(tmp_path, "device-config.yaml", DEVICE_CONFIG),
        "--output",
        "json",
    )
    assert result.returncode == 0, result.stderr
    response = json.loads(result.stdout)
    assert response["allowed"] is True
    patch = json.loads(base64.b64decode(response["patch"]))
    assert {
        "op": "replace",
        "path": "/spec/containers/0/resources/limits/huawei.com~1Ascend910B3-memory",
        "value": "16384",
    } in patch
    assert {
        "op": "add",
        "path": "/spec/containers/0/resources/requests",
        "value": {"huawei.com/Ascend910B3-memory": "16384"},
    } in patch


def test_admit_warns_about_a_disabled_vendor(tmp_path: Path) -> None:
    pod = the_pod({"hygon.com/dcunum": 1})
    result = run("admit", "--pod", write(tmp_path, "p.json", pod), "--output", "text")
    assert result.returncode == 0, result.stderr
    assert "warning: container c asks for hygon.com/dcunum: Hygon DCU is not enabled" in result.stdout


def test_inspect_shows_every_vendor_and_its_node_lock(tmp_path: Path) -> None:
    """The inspect view is vendor-neutral: Ascend chips (annotation-registered) and Cambricon cards (from
    capacity) are counted per vendor, and Cambricon's own node lock (a bare RFC3339 time, vendors §1.5)
    is listed beside HAMi's shared one."""
    locked = mlu_node("mlu-1")
    locked["metadata"]["annotations"] = {"cambricon.com/dsmlu.lock": "2026-01-02T03:04:05Z"}
    dump = {"apiVersion": "v1", "kind": "List", "items": [ascend_node("npu-1"), locked]}
    config = write(tmp_path, "dc.yaml", DEVICE_CONFIG)
    result = run(
        "inspect", "--cluster", write(tmp_path, "c.json", dump), "--device-config", config, "-o", "json"
    )
    assert result.returncode == 0, result.stderr
    output = json.loads(result.stdout)
    by_vendor = {
        v: (t["devices"], t["memory_mib"]["total"]) for v, t in output["summary"]["by_vendor"].items()
    }
    assert by_vendor == {"Ascend910B3": (8, 8 * 65536), "MLU": (2, 186 * 256)}  # vmemory in 256 MiB units
    nodes = {n["name"]: n for n in output["nodes"]}
    assert [(lk["annotation"], lk["holder"]) for lk in nodes["mlu-1"]["locks"]] == [
        ("cambricon.com/dsmlu.lock", "")
    ]
    assert nodes["mlu-1"]["locks"][0]["age_seconds"] > 0 and nodes["npu-1"]["locks"] == []
