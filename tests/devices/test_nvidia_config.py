"""The `nvidia:` section of HAMi's device-config.yaml (reference §1.4, §10.2)."""

from __future__ import annotations

from typing import Any

import pytest

from app.devices import DeviceConfigError, build_vendors
from app.devices.nvidia import Nvidia, NvidiaConfig, parse_nvidia_config
from app.devices.nvidia.config import MigAllowlistEntry

CHART = {
    "resourceCountName": "nvidia.com/gpu",
    "resourceMemoryName": "nvidia.com/gpumem",
    "resourceMemoryPercentageName": "nvidia.com/gpumem-percentage",
    "resourceCoreName": "nvidia.com/gpucores",
    "resourcePriorityName": "nvidia.com/priority",
    "overwriteEnv": False,
    "defaultMemory": 0,
    "defaultCores": 0,
    "defaultGPUNum": 1,
    "memoryFactor": 1,
    "deviceSplitCount": 10,
    "deviceMemoryScaling": 1,
    "deviceCoreScaling": 1,
    "gpuCorePolicy": "default",
    "libCudaLogLevel": 1,
    "runtimeClassName": "",
    "migProfileAllowlist": [{"models": ["NVIDIA A100-SXM4-40GB"], "profiles": ["1g.5gb", "2g.10gb"]}],
}


def test_chart_defaults() -> None:
    config = parse_nvidia_config(CHART)
    assert config == NvidiaConfig(
        mig_profile_allowlist=(MigAllowlistEntry(("NVIDIA A100-SXM4-40GB",), ("1g.5gb", "2g.10gb")),)
    )
    assert parse_nvidia_config(None) == NvidiaConfig()
    assert parse_nvidia_config({}) == NvidiaConfig()


def test_values_are_read() -> None:
    config = parse_nvidia_config(
        {
            "resourceCountName": "hami.io/gpu",
            "defaultMemory": 512,
            "defaultCores": 20,
            "defaultGPUNum": 0,
            "memoryFactor": 4,
            "overwriteEnv": True,
            "disableCoreLimit": True,
            "gpuCorePolicy": "force",
            "runtimeClassName": "nvidia",
            "deviceMemoryScaling": 1.5,
            "enableNumaTopology": True,
            "preConfiguredDeviceMemory": 1000,
            "resourceMemoryName": None,
        }
    )
    assert config.resource_count_name == "hami.io/gpu"
    assert config.resource_memory_name == "nvidia.com/gpumem"
    assert (config.default_memory, config.default_cores, config.default_gpu_num, config.memory_factor) == (
        512,
        20,
        0,
        4,
    )
    assert config.overwrite_env and config.disable_core_limit
    assert (config.gpu_core_policy, config.runtime_class_name, config.device_memory_scaling) == (
        "force",
        "nvidia",
        1.5,
    )


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ([], "nvidia: expected a mapping"),
        ({"resourceCountName": 5}, "nvidia.resourceCountName: expected a string"),
        ({"defaultMemory": "512"}, "nvidia.defaultMemory: expected an integer"),
        ({"defaultMemory": True}, "nvidia.defaultMemory: expected an integer"),
        ({"memoryFactor": -1}, "nvidia.memoryFactor: must be between 0 and 2147483647"),
        ({"defaultGPUNum": 2**31}, "nvidia.defaultGPUNum: must be between 0 and 2147483647"),
        ({"overwriteEnv": "yes"}, "nvidia.overwriteEnv: expected true or false"),
        ({"deviceMemoryScaling": 0}, "nvidia.deviceMemoryScaling: expected a positive number"),
        ({"gpuCorePolicy": "strict"}, "nvidia.gpuCorePolicy: must be one of default, force, disable"),
        ({"migProfileAllowlist": {}}, "nvidia.migProfileAllowlist: expected a list"),
        ({"migProfileAllowlist": [1]}, r"nvidia.migProfileAllowlist\[0\]: expected a mapping"),
        ({"migProfileAllowlist": [{"models": "A100"}]}, r"migProfileAllowlist\[0\].models: expected strings"),
        (
            {"migProfileAllowlist": [{"profiles": [1]}]},
            r"migProfileAllowlist\[0\].profiles: expected strings",
        ),
        (
            {"migProfileAllowlist": [{"models": ["A100"], "profiles": ["5gb"]}]},
            r"invalid profile '5gb' \(want <N>g.<...>\)",
        ),
    ],
    ids=[
        "not-a-mapping",
        "name-not-string",
        "int-as-string",
        "bool-as-int",
        "negative",
        "over-int32",
        "bool-as-string",
        "scaling-zero",
        "unknown-core-policy",
        "allowlist-not-list",
        "allowlist-entry",
        "models",
        "profiles",
        "profile-shape",
    ],
)
def test_invalid_config(section: Any, message: str) -> None:
    with pytest.raises(DeviceConfigError, match=message):
        parse_nvidia_config(section)


def test_build_vendors() -> None:
    vendor = build_vendors(None)[0]  # then Enflame DRS, which HAMi always serves (vendors §1.2)
    assert isinstance(vendor, Nvidia) and vendor.config == NvidiaConfig()
    custom = build_vendors({"nvidia": {"resourceCountName": "hami.io/gpu"}, "cambricon": {"x": 1}})[0]
    assert isinstance(custom, Nvidia) and custom.resources.count == "hami.io/gpu"
    with pytest.raises(DeviceConfigError, match="expected a mapping of vendor sections"):
        build_vendors(["nvidia"])  # type: ignore[arg-type]
