"""NVIDIA `MutateAdmission`: what the webhook changes in one container (reference §6.2).

Mutations are applied in place to a deep copy of the pod owned by the caller; the JSON Patch is the diff.
Env entries are appended, not de-duplicated, as HAMi does (quirk #31).
"""

from __future__ import annotations

from typing import Any

from app.core import quantity
from app.core.pods import container_name
from app.core.vendor import AdmissionError
from app.devices.nvidia.config import NvidiaConfig
from app.devices.nvidia.keys import CORE_POLICY_ENV, TASK_PRIORITY_ENV


def _section(container: dict[str, Any], name: str) -> dict[str, Any]:
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return {}
    section = resources.get(name)
    return section if isinstance(section, dict) else {}


def _present(container: dict[str, Any], name: str) -> bool:
    return bool(name) and (name in _section(container, "limits") or name in _section(container, "requests"))


def _lookup(container: dict[str, Any], name: str) -> Any | None:
    for section in ("limits", "requests"):
        values = _section(container, section)
        if name in values:
            return values[name]
    return None


def _set_limit(container: dict[str, Any], name: str, value: str) -> None:
    resources = container.get("resources")
    if not isinstance(resources, dict):
        resources = container["resources"] = {}
    limits = resources.get("limits")
    if not isinstance(limits, dict):
        limits = resources["limits"] = {}
    limits[name] = value


def _append_env(container: dict[str, Any], name: str, value: str) -> None:
    env = container.get("env")
    if not isinstance(env, list):
        env = container["env"] = []
    env.append({"name": name, "value": value})


def mutate_container(config: NvidiaConfig, container: dict[str, Any], pod: dict[str, Any]) -> bool:
    pct_name = config.resource_memory_percentage_name
    raw_pct = _lookup(container, pct_name) if pct_name else None
    if raw_pct is not None:
        pct = quantity.ceil_value(raw_pct)
        if pct is None or not 0 <= pct <= 100:
            raise AdmissionError(
                f"invalid {pct_name} value {raw_pct} in container {container_name(container)}: "
                "must be an integer between 0 and 100"
            )

    limits = _section(container, "limits")
    if config.resource_priority_name and config.resource_priority_name in limits:
        priority = quantity.ceil_value(limits[config.resource_priority_name])
        _append_env(container, TASK_PRIORITY_ENV, str(priority if priority is not None else 0))

    if config.gpu_core_policy and config.gpu_core_policy != "default":
        _append_env(container, CORE_POLICY_ENV, config.gpu_core_policy)

    has_resource = _mutate_count(config, container)
    if _default_exclusive_cores(config, container):
        has_resource = True

    spec = pod.get("spec")
    if (
        has_resource
        and isinstance(spec, dict)
        and config.runtime_class_name
        and spec.get("runtimeClassName") is None
    ):
        spec["runtimeClassName"] = config.runtime_class_name

    if not has_resource and config.overwrite_env:
        _append_env(container, "NVIDIA_VISIBLE_DEVICES", "none")
    return has_resource


def _mutate_count(config: NvidiaConfig, container: dict[str, Any]) -> bool:
    """Only `limits` are inspected (quirk #33); a memory/core limit alone implies defaultGPUNum GPUs."""
    limits = _section(container, "limits")
    if config.resource_count_name and config.resource_count_name in limits:
        return True
    named = (config.resource_core_name, config.resource_memory_name, config.resource_memory_percentage_name)
    if any(name and name in limits for name in named) and config.default_gpu_num > 0:
        _set_limit(container, config.resource_count_name, str(config.default_gpu_num))
        return True
    return False


def _default_exclusive_cores(config: NvidiaConfig, container: dict[str, Any]) -> bool:
    """A GPU request without cores and without memory means the whole card: gpucores = 100."""
    if not config.resource_count_name or not _present(container, config.resource_count_name):
        return False
    if not config.resource_core_name or _present(container, config.resource_core_name):
        return False
    pct_name = config.resource_memory_percentage_name
    raw_pct = _lookup(container, pct_name) if pct_name else None
    if raw_pct is not None:
        exclusive = quantity.ceil_value(raw_pct) == 100
    elif not config.resource_memory_name:
        exclusive = True
    else:
        exclusive = _lookup(container, config.resource_memory_name) is None
    if exclusive:
        _set_limit(container, config.resource_core_name, "100")
    return exclusive
