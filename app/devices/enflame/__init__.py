"""Enflame GCUs: whole cards (`GCU`) and DRS partitions (`Enflame`) (HAMi `pkg/device/enflame`, vendors
§2.9), both configured by the `enflame:` section."""

from typing import Any

from app.core.vendor import Vendor
from app.devices.common.config import section_of
from app.devices.enflame.config import EnflameConfig, parse_enflame_config
from app.devices.enflame.drs import EnflameDrs
from app.devices.enflame.gcu import EnflameGcu


def enflame_vendors(value: Any) -> tuple[Vendor, ...]:
    """Whole GCUs when the section names them; DRS partitions always (HAMi's built-in names)."""
    config = parse_enflame_config(value)
    gcu: tuple[Vendor, ...] = (
        (EnflameGcu(config),) if section_of(value, "enflame").get("resourceNameGCU") else ()
    )
    return (*gcu, EnflameDrs(config))


__all__ = ["EnflameConfig", "EnflameDrs", "EnflameGcu", "enflame_vendors", "parse_enflame_config"]
