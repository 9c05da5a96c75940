"""Device vendors behind the `app.core.vendor.Vendor` protocol, registered in one explicit table.

HAMi registers vendors by side effects of init functions and global maps; here `build_vendors` turns the
parsed device configuration into the tuple of vendors the core receives as an argument.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from app.core.vendor import Vendor
from app.devices.nvidia import Nvidia, parse_nvidia_config
from app.devices.nvidia.config import DeviceConfigError

# device-config.yaml section -> factory building the vendor from that section (None: chart defaults).
REGISTRY: Mapping[str, Callable[[Any], Vendor]] = {
    "nvidia": lambda section: Nvidia(parse_nvidia_config(section)),
}


def build_vendors(device_config: Mapping[str, Any] | None) -> tuple[Vendor, ...]:
    """Vendors for a parsed device-config.yaml (a mapping of sections); NVIDIA is always enabled."""
    sections = device_config or {}
    if not isinstance(sections, Mapping):
        raise DeviceConfigError("device config: expected a mapping of vendor sections")
    return tuple(factory(sections.get(name)) for name, factory in REGISTRY.items())


__all__ = ["REGISTRY", "DeviceConfigError", "build_vendors"]
