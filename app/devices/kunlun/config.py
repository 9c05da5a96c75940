"""The `kunlun:` section of HAMi's device-config.yaml (reference vendors §1.3, §2.8).

One section configures two HAMi backends: whole XPUs (`kunlun`, named by `resourceCountName`) and vXPU
shares (`XPU`, named by `resourceVCountName`). Each is built when the section names its count resource
(HAMi: an empty name matches nothing); names the section leaves out take the chart's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.devices.common.config import section_of, string


@dataclass(frozen=True, slots=True)
class KunlunConfig:
    resource_count_name: str = "kunlunxin.com/xpu"
    resource_vcount_name: str = "kunlunxin.com/vxpu"
    resource_vmemory_name: str = "kunlunxin.com/vxpu-memory"


def parse_kunlun_config(value: Any) -> KunlunConfig:
    section, path, default = section_of(value, "kunlun"), "kunlun", KunlunConfig()
    return KunlunConfig(
        string(section, "resourceCountName", default.resource_count_name, path),
        string(section, "resourceVCountName", default.resource_vcount_name, path),
        string(section, "resourceVMemoryName", default.resource_vmemory_name, path),
    )
