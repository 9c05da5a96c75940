"""AWS Neuron, AMD, Vastai and Biren in the chart (docs/install.md): `devices.<vendor>.enabled` renders the
vendor's device-config.yaml section with HAMi's chart names (reference vendors §1.3) and adds every one of
its names to kube-scheduler's managedResources, as HAMi's `customresources` lists do; HAMi has no
`--enable-*` flag for these four, so no switch reaches the processes; the settings loader builds the four
vendors from what the chart renders, and knows every name kube-scheduler will send."""

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

VENDORS = {
    "awsneuron": (
        ["aws.amazon.com/neuron", "aws.amazon.com/neuroncore"],
        {"resourceCountName": "aws.amazon.com/neuron", "resourceCoreName": "aws.amazon.com/neuroncore"},
    ),
    "amd": (
        ["amd.com/gpu", "amd.com/gpumem", "amd.com/gpucores"],
        {
            "resourceCountName": "amd.com/gpu",
            "resourceMemoryName": "amd.com/gpumem",
            "resourceCoreName": "amd.com/gpucores",
        },
    ),
    "vastai": (["vastaitech.com/va"], {"resourceCountName": "vastaitech.com/va"}),
    "biren": (["birentech.com/gpu"], {"resourceCountName": "birentech.com/gpu"}),
}


def managed(manifests: Any) -> list[str]:
    return [r["name"] for r in manifests.scheduler_config()["extenders"][0]["managedResources"]]


def device_config(manifests: Any) -> dict[str, Any]:
    text = manifests.one("ConfigMap", "hami-scheduler-device")["data"]["device-config.yaml"]
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def test_off_by_default(render: Any) -> None:
    manifests = render()
    assert not set(device_config(manifests)) & set(VENDORS)
    assert not set(managed(manifests)) & {n for names, _ in VENDORS.values() for n in names}


@pytest.mark.parametrize("vendor", sorted(VENDORS))
def test_an_enabled_vendor_gets_its_section_and_every_name(render: Any, vendor: str) -> None:
    names, section = VENDORS[vendor]
    manifests = render("default", {f"devices.{vendor}.enabled": True})
    assert managed(manifests) == NVIDIA + names
    assert device_config(manifests)[vendor] == section
    assert not any(k.startswith("HAMI_ENABLE_") and vendor.upper() in k for k in manifests.env("extender"))


def test_renamed_resources_are_managed_under_their_new_names(render: Any) -> None:
    manifests = render(
        "default", {"devices.amd.enabled": True, "devices.amd.resourceMemoryName": "example.com/amdmem"}
    )
    assert "example.com/amdmem" in managed(manifests) and "amd.com/gpumem" not in managed(manifests)
    assert device_config(manifests)["amd"]["resourceMemoryName"] == "example.com/amdmem"


def test_an_empty_count_name_is_refused(render_error: Any) -> None:
    assert "resourceCountName" in render_error("default", {"devices.biren.resourceCountName": ""})


def test_settings_build_the_four_vendors(render: Any, tmp_path: Path) -> None:
    manifests = render("default", {f"devices.{v}.enabled": True for v in VENDORS})
    path = tmp_path / "device-config.yaml"
    path.write_text(manifests.one("ConfigMap", "hami-scheduler-device")["data"]["device-config.yaml"])
    env = {k: v for k, v in manifests.env("worker").items() if isinstance(v, str)}
    env.update({"HAMI_DEVICE_CONFIG_FILE": str(path), "POD_NAME": "p", "POD_NAMESPACE": "hami-system"})
    settings = load_settings(env)
    # Enflame DRS is always on (HAMi's built-in names, no section needed)
    assert [v.key for v in settings.vendors] == ["NVIDIA", "Enflame", "AWSNeuron", "AMD", "Vastai", "Biren"]
    handled = {
        name
        for v in settings.vendors
        for name in (v.resources.count, v.resources.memory, v.resources.cores, v.resources.memory_percentage)
        if name
    } | {"nvidia.com/priority"}
    assert set(managed(manifests)) <= handled
