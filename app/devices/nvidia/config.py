"""The `nvidia:` section of HAMi's device-config.yaml, parsed and validated once (reference §1.4, §10.2).

Users keep the ConfigMap they already have for HAMi, so the keys and their meaning are HAMi's. Where a key
is missing we use the HAMi chart's default instead of HAMi's empty value (an empty resource name silently
matches nothing; docs/compatibility.md). Keys the scheduler does not use (device-plugin node settings) are
accepted and kept so the same file serves both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.devices.common.config import INT32_MAX, DeviceConfigError


@dataclass(frozen=True, slots=True)
class MigAllowlistEntry:
    models: tuple[str, ...]
    profiles: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NvidiaConfig:
    resource_count_name: str = "nvidia.com/gpu"
    resource_memory_name: str = "nvidia.com/gpumem"
    resource_memory_percentage_name: str = "nvidia.com/gpumem-percentage"
    resource_core_name: str = "nvidia.com/gpucores"
    resource_priority_name: str = "nvidia.com/priority"
    overwrite_env: bool = False
    default_memory: int = 0
    default_cores: int = 0
    default_gpu_num: int = 1
    memory_factor: int = 1
    disable_core_limit: bool = False
    gpu_core_policy: str = "default"
    runtime_class_name: str = ""
    device_split_count: int = 10
    device_memory_scaling: float = 1.0
    device_core_scaling: float = 1.0
    mig_profile_allowlist: tuple[MigAllowlistEntry, ...] = ()


_STRINGS = {
    "resourceCountName": "resource_count_name",
    "resourceMemoryName": "resource_memory_name",
    "resourceMemoryPercentageName": "resource_memory_percentage_name",
    "resourceCoreName": "resource_core_name",
    "resourcePriorityName": "resource_priority_name",
    "runtimeClassName": "runtime_class_name",
}
_INTS = {
    "defaultMemory": "default_memory",
    "defaultCores": "default_cores",
    "defaultGPUNum": "default_gpu_num",
    "memoryFactor": "memory_factor",
    "deviceSplitCount": "device_split_count",
}
_BOOLS = {"overwriteEnv": "overwrite_env", "disableCoreLimit": "disable_core_limit"}
_FLOATS = {"deviceMemoryScaling": "device_memory_scaling", "deviceCoreScaling": "device_core_scaling"}
_CORE_POLICIES = ("default", "force", "disable")
_MIG_PROFILE = re.compile(r"^\d+g\..+$")


def _int(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DeviceConfigError(f"nvidia.{key}: expected an integer, got {value!r}")
    if not 0 <= value <= INT32_MAX:
        raise DeviceConfigError(f"nvidia.{key}: must be between 0 and {INT32_MAX}, got {value}")
    return value


def _mig_allowlist(value: Any) -> tuple[MigAllowlistEntry, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise DeviceConfigError("nvidia.migProfileAllowlist: expected a list")
    entries = []
    for position, item in enumerate(value):
        if not isinstance(item, dict):
            raise DeviceConfigError(f"nvidia.migProfileAllowlist[{position}]: expected a mapping")
        models, profiles = item.get("models", []), item.get("profiles", [])
        if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
            raise DeviceConfigError(f"nvidia.migProfileAllowlist[{position}].models: expected strings")
        if not isinstance(profiles, list) or not all(isinstance(p, str) for p in profiles):
            raise DeviceConfigError(f"nvidia.migProfileAllowlist[{position}].profiles: expected strings")
        if not models or not profiles:
            raise DeviceConfigError(
                f"nvidia.migProfileAllowlist[{position}]: must define models and profiles (both non-empty)"
            )
        for profile in profiles:
            if not _MIG_PROFILE.match(profile):
                raise DeviceConfigError(
                    f"nvidia.migProfileAllowlist[{position}]: invalid profile {profile!r} (want <N>g.<...>)"
                )
        entries.append(MigAllowlistEntry(tuple(models), tuple(profiles)))
    return tuple(entries)


def parse_nvidia_config(section: Mapping[str, Any] | None) -> NvidiaConfig:
    """Build an NvidiaConfig from the `nvidia:` mapping of device-config.yaml (None: chart defaults)."""
    if section is None:
        return NvidiaConfig()
    if not isinstance(section, Mapping):
        raise DeviceConfigError("nvidia: expected a mapping")
    values: dict[str, Any] = {}
    for key, value in section.items():
        if value is None:
            continue
        if key in _STRINGS:
            if not isinstance(value, str):
                raise DeviceConfigError(f"nvidia.{key}: expected a string, got {value!r}")
            values[_STRINGS[key]] = value
        elif key in _INTS:
            values[_INTS[key]] = _int(key, value)
        elif key in _BOOLS:
            if not isinstance(value, bool):
                raise DeviceConfigError(f"nvidia.{key}: expected true or false, got {value!r}")
            values[_BOOLS[key]] = value
        elif key in _FLOATS:
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise DeviceConfigError(f"nvidia.{key}: expected a positive number, got {value!r}")
            values[_FLOATS[key]] = float(value)
        elif key == "gpuCorePolicy":
            if value not in _CORE_POLICIES:
                raise DeviceConfigError(f"nvidia.gpuCorePolicy: must be one of {', '.join(_CORE_POLICIES)}")
            values["gpu_core_policy"] = value
        elif key == "migProfileAllowlist":
            values["mig_profile_allowlist"] = _mig_allowlist(value)
    return NvidiaConfig(**values)
