"""`explain` and `admit` with HAMi's device-config.yaml for Metax, Iluvatar, Kunlunxin and Enflame (reference
vendors §1.2-§1.3, §2.4-§2.9): Iluvatar (behind --enable-iluvatar in HAMi) is enabled exactly when its
`iluvatars` section is present, Metax and Kunlunxin per backend their section names, Enflame DRS always;
FailedNodes carries the vendor's reason strings, Annotations every key it writes at filter time, and `admit`
its webhook mutation."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from app.cli.migrate import convert

ROOT = Path(__file__).resolve().parents[2]

DEVICE_CONFIG = {
    "nvidia": {"resourceCountName": "nvidia.com/gpu"},
    "metax": {
        "resourceCountName": "metax-tech.com/gpu",
        "resourceVCountName": "metax-tech.com/sgpu",
        "resourceVMemoryName": "metax-tech.com/vmemory",
        "resourceVCoreName": "metax-tech.com/vcore",
        "sgpuTopologyAware": "false",
    },
    "kunlun": {"resourceCountName": "kunlunxin.com/xpu", "resourceVCountName": "kunlunxin.com/vxpu"},
    "enflame": {"resourceNameGCU": "enflame.com/gcu", "resourceNameDRSGCU": "enflame.com/drs-gcu"},
    "iluvatars": [{"commonWord": "BI-V150", "chipName": "BI-V150"}],
}


def node(name: str, annotations: dict[str, str] | None = None, capacity: dict[str, str] | None = None) -> Any:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": annotations or {}},
        "status": {"capacity": capacity or {}, "allocatable": capacity or {}},
    }


CLUSTER = {
    "kind": "List",
    "items": [
        node(
            "metax-1", {"metax-tech.com/gpu.topology.losses": '{"1":0,"2":10}'}, {"metax-tech.com/gpu": "2"}
        ),
        node("kunlun-1", capacity={"kunlunxin.com/xpu": "8"}),
        node(
            "drs-1",
            {
                "enflame.com/gcu-drs-capacity": (
                    '{"devices":[{"index":"0","minor":"0","capacity":6}],'
                    '"profiles":{"1g.6gb":"0","3g.20gb":"1","6g.40gb":"2"}}'
                )
            },
        ),
        node("bi-1", {"hami.io/node-BI-V150-register": "BI-0,4,32768,100,BI-V150,0,true:"}),
    ],
}


def the_pod(limits: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    container = {"name": "c", "resources": {"limits": limits}}
    metadata = {"name": "p", "namespace": "default", "uid": "u1", "annotations": annotations or {}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": [container]}}


def cli(command: str, tmp_path: Path, pod: dict[str, Any], config: dict[str, Any] = DEVICE_CONFIG) -> Any:
    """Run `python -m app.cli <command>` on these files (the cluster for `explain`); the JSON output."""
    (tmp_path / "c.json").write_text(json.dumps(CLUSTER), encoding="utf-8")
    (tmp_path / "p.json").write_text(json.dumps(pod), encoding="utf-8")
    (tmp_path / "d.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    args = [
        "--pod",
        str(tmp_path / "p.json"),
        "--device-config",
        str(tmp_path / "d.yaml"),
        "--output",
        "json",
    ]
    if command == "explain":
        args += ["--cluster", str(tmp_path / "c.json")]
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", command, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return json.loads(done.stdout)


def explain(tmp_path: Path, pod: dict[str, Any], config: dict[str, Any] = DEVICE_CONFIG) -> Any:
    return cli("explain", tmp_path, pod, config)


def test_explain_places_enflame_drs_with_its_annotations(tmp_path: Path) -> None:
    """§2.9 example: 3 slices -> `3g.20gb`, 20480 MiB, 50 cores; Enflame's own keys at filter time."""
    out = explain(tmp_path, the_pod({"enflame.com/drs-gcu": 3}))
    assert out["NodeNames"] == ["drs-1"]
    notes = out["Annotations"]
    assert notes["hami.io/enflame-vgpu-devices-allocated"] == "drs-1-enflame-drs-0,Enflame,20480,50:;"
    assert notes["enflame.com/gcu-assigned"] == "false" and notes["enflame.com/gcu-request-size"] == "3"
    assert json.loads(notes["assigned-containers"]) == {
        "c": {"allocated": False, "request": 3, "profileID": "1", "profileName": "3g.20gb"}
    }
    assert notes["enflame.com/gcu-assigned-time"].isdigit()
    assert out["Reasons"]["metax-1"] == "NodeInsufficientDevice"


def test_explain_kunlun_interconnect_and_metax_topology(tmp_path: Path) -> None:
    kunlun = explain(tmp_path, the_pod({"kunlunxin.com/xpu": 2}))
    assert kunlun["Annotations"]["BAIDU_COM_DEVICE_IDX"] == "0,1"
    assert kunlun["Scores"]["kunlun-1"] == 1000.0  # §2.8: one wing split (+1), base score 0
    metax = explain(tmp_path, the_pod({"metax-tech.com/gpu": 2}))
    assert metax["Annotations"]["hami.io/metax-gpu-devices-allocated"] == (
        "metax-1-metax-1,Metax-GPU,65536,100:metax-1-metax-0,Metax-GPU,65536,100:;"
    )
    assert metax["Scores"]["metax-1"] == 1990.0  # §2.4: 2000 - losses[2]


def test_explain_reports_the_vendor_reason_strings(tmp_path: Path) -> None:
    out = explain(tmp_path, the_pod({"enflame.com/drs-gcu": 4}))
    assert out["FailedNodes"]["drs-1"] == "1/1 ModeNotFit"  # §2.9: no 4-slice profile
    out = explain(tmp_path, the_pod({"kunlunxin.com/xpu": 3}))
    assert out["FailedNodes"]["kunlun-1"] == "1/8 NumaNotFit"  # §2.8: 3 cards never fit


def test_iluvatar_needs_its_section_in_the_cli(tmp_path: Path) -> None:
    """§2.6 / V§1.2: HAMi registers Iluvatar only with --enable-iluvatar; the CLI: when the section exists."""
    pod = the_pod({"iluvatar.ai/BI-V150-vgpu": 1, "iluvatar.ai/BI-V150.vMem": 16})
    placed = explain(tmp_path, pod)
    assert placed["NodeNames"] == ["bi-1"]
    assert placed["Annotations"]["hami.io/BI-V150-devices-allocated"] == "BI-0,BI-V150,4096,0:;"
    config = {k: v for k, v in DEVICE_CONFIG.items() if k != "iluvatars"}
    refused = explain(tmp_path, pod, config)
    assert refused["Error"] == (
        "container c asks for iluvatar.ai/BI-V150-vgpu: Iluvatar is not enabled (device config: the "
        "'iluvatars' section)"
    )


def test_admit_metax_sgpu_qos_and_kunlun_template(tmp_path: Path) -> None:
    pod = the_pod({"metax-tech.com/sgpu": 1, "kunlunxin.com/vxpu": 1, "kunlunxin.com/vxpu-memory": 20000})
    response = cli("admit", tmp_path, pod)
    assert response["allowed"] is True
    patch = json.loads(base64.b64decode(response["patch"]))
    assert {
        "op": "add",
        "path": "/metadata/annotations/metax-tech.com~1sgpu-qos-policy",
        "value": "best-effort",
    } in patch
    assert {
        "op": "replace",
        "path": "/spec/containers/0/resources/limits/kunlunxin.com~1vxpu-memory",
        "value": "24576",
    } in patch


def test_admit_denies_a_bad_app_class(tmp_path: Path) -> None:
    pod = the_pod({"metax-tech.com/sgpu": 2}, {"metax-tech.com/sgpu-app-class": "online"})
    response = cli("admit", tmp_path, pod)
    assert (
        response["allowed"] is False
        and "app-class pod must request single device" in response["status"]["message"]
    )


def test_migrate_values_maps_their_hami_values() -> None:
    """HAMi's chart values of these vendors (chart 2.10.0: `metaxResource*`, `metaxsGPUTopologyAware`,
    `kunlunResourceName`, `devices.<vendor>.enabled/customresources`)."""
    hami = {
        "metaxResourceName": "metax-tech.com/sgpu",
        "metaxsGPUTopologyAware": "true",
        "kunlunResourceName": "kunlunxin.com/xpu",
        "devices": {
            "kunlun": {"enabled": True, "customresources": ["kunlunxin.com/xpu"]},
            "enflame": {"enabled": "true", "customresources": ["enflame.com/gcu"]},
            "iluvatar": {"enabled": True, "customresources": ["iluvatar.ai/BI-V150-vgpu"]},
        },
    }
    out = convert(hami)
    assert out.values["devices"] == {
        "metax": {"sgpuTopologyAware": True},
        "kunlun": {"enabled": True},
        "enflame": {"enabled": True},
        "iluvatar": {"enabled": True},
    }
    reasons = {path: why for path, _value, why in out.unmapped}
    assert (
        reasons["metaxResourceName"].startswith("not converted")
        and "devices.metax.enabled" in reasons["metaxResourceName"]
    )
    assert reasons["kunlunResourceName"].startswith("not converted")
    assert reasons["devices.enflame.customresources"].startswith("not converted")
    assert "devices.iluvatar.configs" in reasons["devices.iluvatar.customresources"]
