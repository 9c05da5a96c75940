"""Reading one section of HAMi's device-config.yaml, validated once with readable errors.

Users keep the ConfigMap they already have for HAMi, so keys and meanings are HAMi's (vendors §1.3). Keys a
section does not set take the HAMi chart's default (HAMi leaves them empty and the vendor silently matches
nothing; docs/compatibility.md); unknown keys are ignored, as Go's yaml.v2 ignores them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

INT32_MAX = 2**31 - 1


class DeviceConfigError(ValueError):
    """The device configuration is invalid; the message names the key."""


def section_of(value: Any, path: str) -> Mapping[str, Any]:
    """A section as a mapping (None: empty, i.e. every default)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DeviceConfigError(f"{path}: expected a mapping")
    return value


def string(section: Mapping[str, Any], key: str, default: str, path: str) -> str:
    value = section.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise DeviceConfigError(f"{path}.{key}: expected a string, got {value!r}")
    return value


def integer(section: Mapping[str, Any], key: str, default: int, path: str) -> int:
    value = section.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise DeviceConfigError(f"{path}.{key}: expected an integer, got {value!r}")
    if not 0 <= value <= INT32_MAX:
        raise DeviceConfigError(f"{path}.{key}: must be between 0 and {INT32_MAX}, got {value}")
    return value


def boolean(section: Mapping[str, Any], key: str, default: bool, path: str) -> bool:
    """A YAML boolean; the strings `"true"`/`"false"` too (HAMi's chart renders some booleans quoted)."""
    value = section.get(key)
    if value is None:
        return default
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if not isinstance(value, bool):
        raise DeviceConfigError(f"{path}.{key}: expected true or false, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class SectionNames:
    """The three resource names most vendor sections carry (`resourceCountName`, `resourceMemoryName`,
    `resourceCoreName`); a vendor's config extends it with its defaults and other keys."""

    resource_count_name: str = ""
    resource_memory_name: str = ""
    resource_core_name: str = ""


_Names = TypeVar("_Names", bound=SectionNames)
_NAME_KEYS = {
    "resourceCountName": "resource_count_name",
    "resourceMemoryName": "resource_memory_name",
    "resourceCoreName": "resource_core_name",
}


def parse_names(value: Any, path: str, default: _Names) -> _Names:
    """`default` with the names the section `path` sets (missing ones keep the chart's default)."""
    section = section_of(value, path)
    names = {attr: string(section, key, getattr(default, attr), path) for key, attr in _NAME_KEYS.items()}
    return dataclasses.replace(default, **names)
