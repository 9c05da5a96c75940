"""Metax GPUs: whole cards (`Metax-GPU`) and sGPU shares (`Metax-SGPU`) (HAMi `pkg/device/metax`, vendors
§2.4, §2.5), both configured by the `metax:` section."""

from typing import Any

from app.core.vendor import Vendor
from app.devices.common.config import section_of
from app.devices.metax.config import MetaxConfig, parse_metax_config
from app.devices.metax.gpu import MetaxGpu
from app.devices.metax.sgpu import MetaxSgpu


def metax_vendors(value: Any) -> tuple[Vendor, ...]:
    """Each backend whose count resource the section names (HAMi: an empty name matches nothing)."""
    section, config = section_of(value, "metax"), parse_metax_config(value)
    vendors: list[Vendor] = []
    if section.get("resourceCountName"):
        vendors.append(MetaxGpu(config))
    if section.get("resourceVCountName"):
        vendors.append(MetaxSgpu(config))
    return tuple(vendors)


__all__ = ["MetaxConfig", "MetaxGpu", "MetaxSgpu", "metax_vendors", "parse_metax_config"]
