"""The `vnpus:` section of HAMi's device-config.yaml: one entry per Ascend chip (reference vendors §2.1.1).

HAMi builds one backend per `vnpus.configs[]` entry, keyed by its `commonWord`, and shares `hamiVnpuCore`
between them. The chart's seven chips are the defaults: without a section (Ascend switched on with
HAMI_ENABLE_ASCEND) those seven are used, and an entry whose `commonWord` is one of them takes that chip's
values for the keys it does not set (HAMi leaves them empty; docs/compatibility.md). An entry for another
chip gets `huawei.com/<commonWord>[-memory|-core]` as its resource names. Templates are sorted by memory,
as HAMi sorts them at start.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.devices.common.config import DeviceConfigError, boolean, integer, section_of, string


@dataclass(frozen=True, slots=True)
class Template:
    """A hard-split vNPU size: `name` (e.g. `vir04`) and its memory in MiB."""

    name: str
    memory: int
    ai_core: int = 0
    ai_cpu: int = 0


@dataclass(frozen=True, slots=True)
class Chip:
    """One `vnpus.configs[]` entry."""

    common_word: str
    chip_name: str = ""
    resource_name: str = ""
    resource_memory_name: str = ""
    resource_core_name: str = ""
    memory_allocatable: int = 0
    memory_capacity: int = 0
    memory_factor: int = 0
    ai_core: int = 0
    ai_cpu: int = 0
    runtime_class_name: str = ""
    overwrite_env: bool = False
    super_pod: bool = False
    templates: tuple[Template, ...] = ()


@dataclass(frozen=True, slots=True)
class AscendConfig:
    hami_vnpu_core: bool = False
    chips: tuple[Chip, ...] = ()


def _chip(
    cw: str, name: str, alloc: int, cap: int, core: int, cpu: int, factor: int, *templates: Any
) -> Chip:
    return Chip(
        cw,
        name,
        f"huawei.com/{cw}",
        f"huawei.com/{cw}-memory",
        f"huawei.com/{cw}-core",
        alloc,
        cap,
        factor,
        core,
        cpu,
        super_pod=cw == "Ascend910C",
        templates=tuple(Template(t, m) for t, m in templates),
    )


# The HAMi chart's chips (vendors §2.1.1, charts/hami values.yaml), in the chart's order.
CHART_CHIPS: tuple[Chip, ...] = (
    _chip(
        "Ascend910A",
        "910A",
        32768,
        32768,
        30,
        0,
        1,
        ("vir02", 2184),
        ("vir04", 4369),
        ("vir08", 8738),
        ("vir16", 17476),
    ),
    _chip(
        "Ascend910B2",
        "910B2",
        65536,
        65536,
        24,
        6,
        1,
        ("vir03_1c_8g", 8192),
        ("vir06_1c_16g", 16384),
        ("vir12_3c_32g", 32768),
    ),
    _chip("Ascend910B3", "910B3", 65536, 65536, 20, 7, 1, ("vir05_1c_16g", 16384), ("vir10_3c_32g", 32768)),
    _chip(
        "Ascend910B4-1", "910B4-1", 65536, 65536, 20, 7, 1, ("vir05_1c_16g", 16384), ("vir10_3c_32g", 32768)
    ),
    _chip("Ascend910B4", "910B4", 32768, 32768, 20, 7, 1, ("vir05_1c_8g", 8192), ("vir10_3c_16g", 16384)),
    _chip("Ascend310P", "310P3", 21527, 24576, 8, 7, 1, ("vir01", 3072), ("vir02", 6144), ("vir04", 12288)),
    _chip(
        "Ascend910C", "Ascend910", 65536, 65536, 20, 7, 0, ("vir05_1c_16g", 16384), ("vir10_3c_32g", 32768)
    ),
)
CHART = AscendConfig(False, CHART_CHIPS)
_BY_WORD = {chip.common_word: chip for chip in CHART_CHIPS}

_STRINGS = {
    "chipName": "chip_name",
    "resourceName": "resource_name",
    "resourceMemoryName": "resource_memory_name",
    "resourceCoreName": "resource_core_name",
    "runtimeClassName": "runtime_class_name",
}
_INTS = {
    "memoryAllocatable": "memory_allocatable",
    "memoryCapacity": "memory_capacity",
    "memoryFactor": "memory_factor",
    "aiCore": "ai_core",
    "aiCPU": "ai_cpu",
}
_BOOLS = {"overwriteEnv": "overwrite_env", "superPod": "super_pod"}


def _templates(value: Any, path: str) -> tuple[Template, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise DeviceConfigError(f"{path}: expected a list")
    parsed = []
    for position, item in enumerate(value):
        entry = section_of(item, f"{path}[{position}]")
        where = f"{path}[{position}]"
        name = string(entry, "name", "", where)
        if not name:
            raise DeviceConfigError(f"{where}.name: must be set")
        parsed.append(
            Template(
                name,
                integer(entry, "memory", 0, where),
                integer(entry, "aiCore", 0, where),
                integer(entry, "aiCPU", 0, where),
            )
        )
    return tuple(sorted(parsed, key=lambda t: t.memory))


def parse_chip(value: Any, path: str) -> Chip:
    entry = section_of(value, path)
    word = string(entry, "commonWord", "", path)
    if not word:
        raise DeviceConfigError(f"{path}.commonWord: must be set")
    if "," in word or ";" in word or ":" in word:
        raise DeviceConfigError(f"{path}.commonWord: {word!r} must not contain ',', ';' or ':'")
    base = _BY_WORD.get(word) or Chip(
        word,
        resource_name=f"huawei.com/{word}",
        resource_memory_name=f"huawei.com/{word}-memory",
        resource_core_name=f"huawei.com/{word}-core",
    )
    values: dict[str, Any] = {}
    for key, attr in _STRINGS.items():
        values[attr] = string(entry, key, getattr(base, attr), path)
    for key, attr in _INTS.items():
        values[attr] = integer(entry, key, getattr(base, attr), path)
    for key, attr in _BOOLS.items():
        values[attr] = boolean(entry, key, getattr(base, attr), path)
    templates = _templates(entry.get("templates"), f"{path}.templates")
    values["templates"] = base.templates if templates is None else templates
    return dataclasses.replace(base, **values)


def parse_ascend_config(value: Any) -> AscendConfig:
    """The `vnpus:` section (None: the chart's seven chips)."""
    if value is None:
        return CHART
    section: Mapping[str, Any] = section_of(value, "vnpus")
    configs = section.get("configs")
    if configs is None:
        chips = CHART_CHIPS
    elif not isinstance(configs, list):
        raise DeviceConfigError("vnpus.configs: expected a list")
    else:
        chips = tuple(parse_chip(item, f"vnpus.configs[{i}]") for i, item in enumerate(configs))
    return AscendConfig(boolean(section, "hamiVnpuCore", False, "vnpus"), chips)
