"""Ascend `MutateAdmission` (reference vendors §2.1.4, quirks §3.1 #2, #3, #10), in HAMi's order:

1. no count in `limits`: with `overwriteEnv`, `ASCEND_VISIBLE_DEVICES=""` is added; not an Ascend container;
2. 910C with `superPod`: a count of 1 becomes 2 (one card = two NPUs); another odd count is an error;
3. cores outside hami-core (soft split) mode are an error;
4. memory: hami-core keeps the value; hard split rounds it up to the smallest template that holds it, else
   the whole chip (up to `memoryCapacity`), else it is invalid; no memory means the whole chip;
5. several chips only as whole chips in hard split mode;
6. the memory is written into limits and requests; 7. the runtime class.
Differences (docs/compatibility.md): a memory given only in `requests` is used (HAMi reads limits only and
overwrites it with the whole chip, #2), and `ASCEND_VISIBLE_DEVICES` is added once per container, not once
per chip configuration (#10).
"""

from __future__ import annotations

from typing import Any

from app.core import quantity
from app.core.vendor import AdmissionError
from app.devices.ascend.config import Chip, Template

VISIBLE_DEVICES_ENV = "ASCEND_VISIBLE_DEVICES"
VNPU_MODE = "huawei.com/vnpu-mode"
HAMI_CORE = "hami-core"


def _section(container: dict[str, Any], name: str, *, create: bool = False) -> dict[str, Any]:
    resources = container.get("resources")
    if not isinstance(resources, dict):
        if not create:
            return {}
        resources = container["resources"] = {}
    section = resources.get(name)
    if not isinstance(section, dict):
        if not create:
            return {}
        section = resources[name] = {}
    return section


def hami_core(pod: dict[str, Any]) -> bool:
    metadata = pod.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    return isinstance(annotations, dict) and annotations.get(VNPU_MODE) == HAMI_CORE


def trim_memory(chip: Chip, value: int) -> tuple[int, Template | None]:
    """HAMi `trimMemory`: the smallest template holding `value`, else the whole chip, else 0 (invalid)."""
    for entry in chip.templates:
        if value <= entry.memory:
            return entry.memory, entry
    if value <= chip.memory_capacity:
        return chip.memory_allocatable, None
    return 0, None


def _add_visible_devices_env(container: dict[str, Any]) -> None:
    env = container.get("env")
    if not isinstance(env, list):
        env = container["env"] = []
    if not any(isinstance(e, dict) and e.get("name") == VISIBLE_DEVICES_ENV for e in env):
        env.append({"name": VISIBLE_DEVICES_ENV})  # Go omits the empty value


def mutate_container(chip: Chip, container: dict[str, Any], pod: dict[str, Any]) -> bool:
    limits = _section(container, "limits")
    if chip.resource_name not in limits:
        if chip.overwrite_env:
            _add_visible_devices_env(container)
        return False
    count = quantity.as_int64(limits[chip.resource_name]) or 0
    soft = hami_core(pod)
    if chip.common_word == "Ascend910C" and chip.super_pod:
        if count == 1:
            limits[chip.resource_name] = "2"
            requests = _section(container, "requests")
            if chip.resource_name in requests:
                requests[chip.resource_name] = "2"
        elif count % 2 == 1:
            raise AdmissionError(f"Ascend910C device request must be 1 or 2*n, got {count}")
    if not soft and chip.resource_core_name:
        raw = limits.get(chip.resource_core_name)
        if raw is None:
            raw = _section(container, "requests").get(chip.resource_core_name)
        if raw is not None and (quantity.ceil_value(raw) or 0) > 0:
            raise AdmissionError(
                f"{chip.resource_core_name} is only supported in hami-core (soft split) mode"
            )
    memory = chip.memory_allocatable
    if chip.resource_memory_name:
        raw = limits.get(chip.resource_memory_name)
        if raw is None:
            raw = _section(container, "requests").get(chip.resource_memory_name)
        if raw is not None:
            value = quantity.ceil_value(raw)
            if value is None:
                raise AdmissionError(f"{chip.resource_memory_name} {raw} is invalid: must be a number of MiB")
            memory = value if soft else trim_memory(chip, value)[0]
            if memory <= 0 and not soft:
                raise AdmissionError(
                    f"{chip.resource_memory_name} {value} is invalid: "
                    f"must be at most {chip.memory_capacity} MiB"
                )
        if count > 1 and not soft and memory != chip.memory_allocatable:
            raise AdmissionError("vNPU not supported for multiple devices")
        limits[chip.resource_memory_name] = str(memory)
        _section(container, "requests", create=True)[chip.resource_memory_name] = str(memory)
    spec = pod.get("spec")
    if isinstance(spec, dict) and chip.runtime_class_name and spec.get("runtimeClassName") is None:
        spec["runtimeClassName"] = chip.runtime_class_name
    return True
