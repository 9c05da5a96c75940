"""The devices part of the HAMi values table (app/cli/hamivalues.py): HAMi's device and vendor values -> ours.

Why it exists: the table is long, and its devices part (NVIDIA's device plugin values, the device-config
text and every vendor's section) changes with the vendors, apart from the scheduler part.
"""

from __future__ import annotations

from typing import Any

from app.cli.valueconv import (
    DEVICES,
    OTHER,
    PLUGIN,
    Merged,
    Row,
    Unconvertible,
    boolean,
    choice,
    integer,
    number,
    nvidia_name,
    same,
)


def device_config(value: Any, _merged: Merged) -> dict[str, Any]:
    """HAMi's whole device-config.yaml text becomes ours as it is."""
    if value in (None, ""):
        return {}
    if not isinstance(value, str):
        raise Unconvertible("expected the device-config.yaml text")
    return {"deviceConfig.content": value}


_UNLISTED = (
    "not converted: no row names this value; every vendor's settings here are under `devices.<vendor>` "
    "(docs/vendors.md)"
)


def _vendor(section: str) -> str:
    return (
        f"not converted: HAMi's chart always renders this vendor; here set `devices.{section}.enabled` "
        f"and its `devices.{section}.resource*Name` (docs/install.md, enabling device vendors)"
    )


_NAMES = (
    "not converted: `managedResources` follow the vendor's resource names here (HAMi's `customresources` "
    "list them again)"
)

DEVICE_ROWS: tuple[Row, ...] = (
    Row(
        "resourceName",
        "`deviceConfig.nvidia.resourceCountName`",
        "and `kubeScheduler.managedResources`",
        DEVICES,
        nvidia_name("resourceCountName"),
    ),
    Row(
        "resourceMem",
        "`deviceConfig.nvidia.resourceMemoryName`",
        "and `kubeScheduler.managedResources`",
        DEVICES,
        nvidia_name("resourceMemoryName"),
    ),
    Row(
        "resourceMemPercentage",
        "`deviceConfig.nvidia.resourceMemoryPercentageName`",
        "and `kubeScheduler.managedResources`",
        DEVICES,
        nvidia_name("resourceMemoryPercentageName"),
    ),
    Row(
        "resourceCores",
        "`deviceConfig.nvidia.resourceCoreName`",
        "and `kubeScheduler.managedResources`",
        DEVICES,
        nvidia_name("resourceCoreName"),
    ),
    Row(
        "resourcePriority",
        "`deviceConfig.nvidia.resourcePriorityName`",
        "and `kubeScheduler.managedResources`",
        DEVICES,
        nvidia_name("resourcePriorityName"),
    ),
    Row(
        "scheduler.overwriteEnv",
        "`deviceConfig.nvidia.overwriteEnv`",
        "a string in HAMi's values, a boolean here",
        DEVICES,
        boolean("deviceConfig.nvidia.overwriteEnv"),
    ),
    Row(
        "devicePlugin.deviceSplitCount",
        "`deviceConfig.nvidia.deviceSplitCount`",
        "also stays in HAMi's release: the device plugin reads it there",
        DEVICES,
        integer("deviceConfig.nvidia.deviceSplitCount", 1),
    ),
    Row(
        "devicePlugin.deviceMemoryScaling",
        "`deviceConfig.nvidia.deviceMemoryScaling`",
        "also stays in HAMi's release: the device plugin reads it there",
        DEVICES,
        number("deviceConfig.nvidia.deviceMemoryScaling"),
    ),
    Row(
        "devicePlugin.deviceCoreScaling",
        "`deviceConfig.nvidia.deviceCoreScaling`",
        "also stays in HAMi's release: the device plugin reads it there",
        DEVICES,
        number("deviceConfig.nvidia.deviceCoreScaling"),
    ),
    Row(
        "devicePlugin.runtimeClassName",
        "`deviceConfig.nvidia.runtimeClassName`",
        "the webhook sets it on GPU pods without one",
        DEVICES,
        same("deviceConfig.nvidia.runtimeClassName"),
    ),
    Row(
        "devices.nvidia.gpuCorePolicy",
        "`deviceConfig.nvidia.gpuCorePolicy`",
        "",
        DEVICES,
        choice("deviceConfig.nvidia.gpuCorePolicy", "default", "force", "disable"),
    ),
    Row(
        "devices.nvidia.libCudaLogLevel",
        "`deviceConfig.nvidia.libCudaLogLevel`",
        "",
        DEVICES,
        integer("deviceConfig.nvidia.libCudaLogLevel"),
    ),
    Row(
        "device-config.content",
        "`deviceConfig.content`",
        "the whole device-config.yaml, as HAMi's; its nvidia names also go to "
        "`kubeScheduler.managedResources`",
        DEVICES,
        device_config,
    ),
    Row("mluResource*", "`devices.cambricon.*`", _vendor("cambricon"), DEVICES),
    Row("dcuResource*", "`devices.hygon.*`", _vendor("hygon"), DEVICES),
    Row(
        "devices.ascend.enabled",
        "`devices.ascend.enabled`",
        "HAMi's `--enable-ascend` (→ `HAMI_ENABLE_ASCEND`); the chips: `devices.ascend.configs`",
        DEVICES,
        boolean("devices.ascend.enabled"),
    ),
    Row(
        "devices.ascend.hamiVnpuCore",
        "`devices.ascend.hamiVnpuCore`",
        "soft split (hami-core) unless a node's `hami-vnpu-core` annotation says otherwise",
        DEVICES,
        boolean("devices.ascend.hamiVnpuCore"),
    ),
    Row(
        "devices.ascend.*",
        "`devices.ascend.configs`",
        "not converted: managed resources follow the chips (`devices.ascend.configs`, HAMi's chart chips "
        "when empty), a runtime class is per chip (`configs[].runtimeClassName`); the Ascend device plugin "
        "stays as it is",
        DEVICES,
    ),
    Row(
        "devices.mthreads.enabled",
        "`devices.mthreads.enabled`",
        "its device-config section and `mthreads.com/vgpu` in `managedResources`",
        DEVICES,
        boolean("devices.mthreads.enabled"),
    ),
    Row("devices.awsneuron.*", "`devices.awsneuron.*`", _vendor("awsneuron"), DEVICES),
    Row("devices.amd.*", "`devices.amd.*`", _vendor("amd"), DEVICES),
    Row(
        "devices.vastai.enabled",
        "`devices.vastai.enabled`",
        "its device-config section and `vastaitech.com/va` in `managedResources`",
        DEVICES,
        boolean("devices.vastai.enabled"),
    ),
    Row(
        "devices.biren.enabled",
        "`devices.biren.enabled`",
        "its device-config section and `birentech.com/gpu` in `managedResources`",
        DEVICES,
        boolean("devices.biren.enabled"),
    ),
    Row("devices.mthreads.*", "`devices.mthreads.resource*Name`", _NAMES, DEVICES),
    Row("devices.vastai.*", "`devices.vastai.resourceCountName`", _NAMES, DEVICES),
    Row("devices.biren.*", "`devices.biren.resourceCountName`", _NAMES, DEVICES),
    Row("metaxResource*", "`devices.metax.*`", _vendor("metax"), DEVICES),
    Row(
        "metaxsGPUTopologyAware",
        "`devices.metax.sgpuTopologyAware`",
        "exclusive sGPU pods prefer one MetaLink zone (a pod's `metax-tech.com/sgpu-topology-aware` wins)",
        DEVICES,
        boolean("devices.metax.sgpuTopologyAware"),
    ),
    Row("kunlunResourceName", "`devices.kunlun.*`", _vendor("kunlun"), DEVICES),
    Row(
        "devices.kunlun.enabled",
        "`devices.kunlun.enabled`",
        "its device-config section and the XPU and vXPU names in `managedResources`",
        DEVICES,
        boolean("devices.kunlun.enabled"),
    ),
    Row(
        "devices.enflame.enabled",
        "`devices.enflame.enabled`",
        "its device-config section and the GCU and DRS names in `managedResources`",
        DEVICES,
        boolean("devices.enflame.enabled"),
    ),
    Row(
        "devices.iluvatar.enabled",
        "`devices.iluvatar.enabled`",
        "HAMi's `--enable-iluvatar` (→ `HAMI_ENABLE_ILUVATAR`); the chips: `devices.iluvatar.configs`",
        DEVICES,
        boolean("devices.iluvatar.enabled"),
    ),
    Row("devices.kunlun.*", "`devices.kunlun.resource*Name`", _NAMES, DEVICES),
    Row("devices.enflame.*", "`devices.enflame.resourceName*`", _NAMES, DEVICES),
    Row(
        "devices.iluvatar.*",
        "`devices.iluvatar.configs`",
        "not converted: managed resources follow the chips (`devices.iluvatar.configs`, HAMi's four chart "
        "chips when empty)",
        DEVICES,
    ),
    Row("devices.*", "—", _UNLISTED, DEVICES),
    Row("devicePlugin.*", "—", PLUGIN, OTHER),
)
