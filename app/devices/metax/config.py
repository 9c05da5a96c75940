"""The `metax:` section of HAMi's device-config.yaml (reference vendors §1.3, §2.4, §2.5).

One section configures two HAMi backends: whole cards (`Metax-GPU`, named by `resourceCountName`) and sGPU
shares (`Metax-SGPU`, named by `resourceVCountName`). HAMi registers both whatever the section says; a
backend whose count name is empty matches nothing. So here each backend is built when the section names its
count resource; the other names a section leaves out take the HAMi chart's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.devices.common.config import boolean, section_of, string


@dataclass(frozen=True, slots=True)
class MetaxConfig:
    """The chart's defaults (`charts/hami/values.yaml`, V§1.3)."""

    resource_count_name: str = "metax-tech.com/gpu"
    resource_vcount_name: str = "metax-tech.com/sgpu"
    resource_vmemory_name: str = "metax-tech.com/vmemory"
    resource_vcore_name: str = "metax-tech.com/vcore"
    sgpu_topology_aware: bool = False


def parse_metax_config(value: Any) -> MetaxConfig:
    section, path, default = section_of(value, "metax"), "metax", MetaxConfig()
    return MetaxConfig(
        string(section, "resourceCountName", default.resource_count_name, path),
        string(section, "resourceVCountName", default.resource_vcount_name, path),
        string(section, "resourceVMemoryName", default.resource_vmemory_name, path),
        string(section, "resourceVCoreName", default.resource_vcore_name, path),
        boolean(section, "sgpuTopologyAware", default.sgpu_topology_aware, path),
    )
