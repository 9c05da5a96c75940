"""Enabling device vendors in the chart (devices.*, docs/install.md): each enabled vendor gets its
device-config.yaml section and its resources in kube-scheduler's managedResources, as HAMi's chart lists
them (reference vendors §1.3); Ascend's switch reaches both processes (HAMi --enable-ascend), and the
settings loader builds the vendors from what the chart renders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from config.settings import load_settings

NVIDIA = [
    "nvidia.com/gpu",
    "nvidia.com/gpumem",
    "nvidia.com/gpumem-percentage",
    "nvidia.com/gpucores",
    "nvidia.com/priority",
]
CHIPS = [
    "Ascend910A",
    "Ascend910B2",
    "Ascend910B3",
    "Ascend910B4-1",
    "Ascend910B4",
    "Ascend310P",
    "Ascend910C",
]


def managed(manifests: Any) -> list[str]:
    return [r["name"] for r in manifests.scheduler_config()["extenders"][0]["managedResources"]]


def device_config(manifests: Any) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(
        manifests.one("ConfigMap", "hami-scheduler-device")["data"]["device-config.yaml"]
    )
    return loaded


def test_by_default_only_nvidia(render: Any) -> None:
    manifests = render()
    assert managed(manifests) == NVIDIA
    assert set(device_config(manifests)) == {"nvidia"}
    assert manifests.env("extender")["HAMI_ENABLE_ASCEND"] == "false"


@pytest.mark.parametrize(
    ("vendor", "names", "section"),
    [
        (
            "hygon",
            ["hygon.com/dcunum", "hygon.com/dcumem", "hygon.com/dcucores"],
            {
                "resourceCountName": "hygon.com/dcunum",
                "resourceMemoryName": "hygon.com/dcumem",
                "resourceCoreName": "hygon.com/dcucores",
                "memoryFactor": 1,
            },
        ),
        (
            "cambricon",
            ["cambricon.com/vmlu"],  # HAMi's chart manages only the count (§3.3 #6)
            {
                "resourceCountName": "cambricon.com/vmlu",
                "resourceMemoryName": "cambricon.com/mlu.smlu.vmemory",
                "resourceCoreName": "cambricon.com/mlu.smlu.vcore",
            },
        ),
        (
            "mthreads",
            ["mthreads.com/vgpu"],
            {
                "resourceCountName": "mthreads.com/vgpu",
                "resourceMemoryName": "mthreads.com/sgpu-memory",
                "resourceCoreName": "mthreads.com/sgpu-core",
            },
        ),
        # Metax, Enflame, Kunlunxin (V§1.3: HAMi's chart lists every name of Metax, Enflame and Kunlunxin)
        (
            "metax",
            ["metax-tech.com/gpu", "metax-tech.com/sgpu", "metax-tech.com/vcore", "metax-tech.com/vmemory"],
            {
                "resourceCountName": "metax-tech.com/gpu",
                "resourceVCountName": "metax-tech.com/sgpu",
                "resourceVMemoryName": "metax-tech.com/vmemory",
                "resourceVCoreName": "metax-tech.com/vcore",
                "sgpuTopologyAware": False,
            },
        ),
        (
            "kunlun",
            ["kunlunxin.com/xpu", "kunlunxin.com/vxpu", "kunlunxin.com/vxpu-memory"],
            {
                "resourceCountName": "kunlunxin.com/xpu",
                "resourceVCountName": "kunlunxin.com/vxpu",
                "resourceVMemoryName": "kunlunxin.com/vxpu-memory",
            },
        ),
        (
            "enflame",
            ["enflame.com/drs-gcu", "enflame.com/gcu-memory", "enflame.com/gcu-core", "enflame.com/gcu"],
            {
                "resourceNameGCU": "enflame.com/gcu",
                "resourceNameDRSGCU": "enflame.com/drs-gcu",
                "resourceNameGCUMemory": "enflame.com/gcu-memory",
                "resourceNameGCUCore": "enflame.com/gcu-core",
            },
        ),
    ],
)
def test_an_enabled_vendor_gets_its_section_and_resources(
    render: Any, vendor: str, names: list[str], section: dict[str, Any]
) -> None:
    manifests = render("default", {f"devices.{vendor}.enabled": True})
    assert managed(manifests) == NVIDIA + names
    assert device_config(manifests)[vendor] == section


def test_ascend_with_the_chart_chips(render: Any) -> None:
    manifests = render("default", {"devices.ascend.enabled": True})
    expected = [f"huawei.com/{c}{s}" for c in CHIPS for s in ("", "-memory", "-core")]
    assert managed(manifests) == NVIDIA + expected
    assert device_config(manifests)["vnpus"] == {"hamiVnpuCore": False}
    for container in ("extender", "worker"):
        assert manifests.env(container)["HAMI_ENABLE_ASCEND"] == "true"


def test_ascend_with_own_chips(render: Any) -> None:
    chip = {"commonWord": "Ascend910B3", "memoryAllocatable": 65536, "memoryCapacity": 65536}
    manifests = render("default", {"devices.ascend.enabled": True, "devices.ascend.configs": [chip]})
    assert managed(manifests)[len(NVIDIA) :] == [
        "huawei.com/Ascend910B3",
        "huawei.com/Ascend910B3-memory",
        "huawei.com/Ascend910B3-core",
    ]
    assert device_config(manifests)["vnpus"] == {"hamiVnpuCore": False, "configs": [chip]}


ILUVATAR = ["MR-V100", "MR-V50", "BI-V150", "BI-V100"]


def test_iluvatar_with_the_chart_chips(render: Any) -> None:
    """V§1.3: HAMi's chart passes --enable-iluvatar and manages the four chips' 12 names."""
    manifests = render("default", {"devices.iluvatar.enabled": True})
    expected = [f"iluvatar.ai/{c}{s}" for c in ILUVATAR for s in ("-vgpu", ".vMem", ".vCore")]
    assert managed(manifests) == NVIDIA + expected
    assert "iluvatars" not in device_config(manifests)  # the chart chips are the scheduler's defaults
    for container in ("extender", "worker"):
        assert manifests.env(container)["HAMI_ENABLE_ILUVATAR"] == "true"


def test_iluvatar_with_own_chips(render: Any) -> None:
    chip = {"commonWord": "BI-V150", "resourceCountName": "iluvatar.ai/vgpu"}
    manifests = render("default", {"devices.iluvatar.enabled": True, "devices.iluvatar.configs": [chip]})
    assert managed(manifests)[len(NVIDIA) :] == [
        "iluvatar.ai/vgpu",
        "iluvatar.ai/BI-V150.vMem",
        "iluvatar.ai/BI-V150.vCore",
    ]
    assert device_config(manifests)["iluvatars"] == [chip]


def test_an_iluvatar_chip_without_a_common_word_is_refused(render_error: Any) -> None:
    assert "commonWord" in render_error("default", {"devices.iluvatar.configs": [{"chipName": "x"}]})


def test_settings_build_every_enabled_vendor(render: Any, tmp_path: Path) -> None:
    families = ("ascend", "hygon", "cambricon", "mthreads", "metax", "kunlun", "enflame", "iluvatar")
    overrides = {f"devices.{v}.enabled": True for v in families}
    manifests = render("default", overrides)
    path = tmp_path / "device-config.yaml"
    path.write_text(manifests.one("ConfigMap", "hami-scheduler-device")["data"]["device-config.yaml"])
    env = {k: v for k, v in manifests.env("worker").items() if isinstance(v, str)}
    env.update({"HAMI_DEVICE_CONFIG_FILE": str(path), "POD_NAME": "p", "POD_NAMESPACE": "hami-system"})
    settings = load_settings(env)
    assert [v.key for v in settings.vendors] == [
        "NVIDIA",
        "MLU",
        "DCU",
        "GCU",
        "Enflame",
        "Mthreads",
        "Metax-GPU",
        "Metax-SGPU",
        "kunlun",
        "XPU",
        *CHIPS,
        *ILUVATAR,
    ]
    handled = {
        name
        for v in settings.vendors
        for name in (
            v.resources.count,
            v.resources.memory,
            v.resources.cores,
            v.resources.memory_percentage,
            v.resources.priority,
        )
        if name
    }
    assert set(managed(manifests)) <= handled  # kube-scheduler sends nothing the extender does not know
