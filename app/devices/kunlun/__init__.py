"""Kunlunxin XPUs: whole cards (`kunlun`) and vXPU shares (`XPU`) (HAMi `pkg/device/kunlun`, vendors §2.8),
both configured by the `kunlun:` section."""

from typing import Any

from app.core.vendor import Vendor
from app.devices.common.config import section_of
from app.devices.kunlun.config import KunlunConfig, parse_kunlun_config
from app.devices.kunlun.vxpu import KunlunVxpu
from app.devices.kunlun.xpu import KunlunXpu


def kunlun_vendors(value: Any) -> tuple[Vendor, ...]:
    """Each backend whose count resource the section names (HAMi: an empty name matches nothing)."""
    section, config = section_of(value, "kunlun"), parse_kunlun_config(value)
    vendors: list[Vendor] = []
    if section.get("resourceCountName"):
        vendors.append(KunlunXpu(config))
    if section.get("resourceVCountName"):
        vendors.append(KunlunVxpu(config))
    return tuple(vendors)


__all__ = ["KunlunConfig", "KunlunVxpu", "KunlunXpu", "kunlun_vendors", "parse_kunlun_config"]
