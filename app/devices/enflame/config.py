"""The `enflame:` section of HAMi's device-config.yaml (reference vendors §1.3, §2.9).

Two HAMi backends: whole GCUs (`GCU`, `resourceNameGCU`) and DRS partitions (`Enflame`). HAMi gives the DRS
names built-in defaults (`enflame/device.go:85-99`; the count also falls back to the legacy
`resourceNameVGCU`), so DRS pods are scheduled even without a section, and whole GCUs only when the section
names them (an empty name matches nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.devices.common.config import section_of, string


@dataclass(frozen=True, slots=True)
class EnflameConfig:
    resource_name_gcu: str = "enflame.com/gcu"
    resource_name_drs: str = "enflame.com/drs-gcu"
    resource_name_memory: str = "enflame.com/gcu-memory"
    resource_name_core: str = "enflame.com/gcu-core"


def parse_enflame_config(value: Any) -> EnflameConfig:
    section, path, default = section_of(value, "enflame"), "enflame", EnflameConfig()
    legacy = string(section, "resourceNameVGCU", "", path)
    return EnflameConfig(
        string(section, "resourceNameGCU", default.resource_name_gcu, path),
        string(section, "resourceNameDRSGCU", "", path) or legacy or default.resource_name_drs,
        string(section, "resourceNameGCUMemory", "", path) or default.resource_name_memory,
        string(section, "resourceNameGCUCore", "", path) or default.resource_name_core,
    )
