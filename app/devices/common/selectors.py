"""HAMi's pod selector annotations, shared by every vendor (`CheckUUID`, `CheckType`: vendors §1.7).

Each vendor has its own annotation keys (e.g. `hygon.com/use-gpuuuid`, `hami.io/use-Ascend910B-uuid`); the
rules are the same: comma lists, entries trimmed, empty entries ignored, an empty value means no constraint.
A UUID must match exactly; a type matches as a case-insensitive substring (`Z100` also selects `Z100L`).
"""

from __future__ import annotations

from collections.abc import Mapping


def entries(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def uuid_allowed(annotations: Mapping[str, str], use_key: str, nouse_key: str, uuid: str) -> bool:
    """HAMi `CheckUUID`: the allow-list (if any) must name the device, the deny-list must not."""
    use = entries(annotations.get(use_key, "")) if use_key else []
    if use and uuid not in use:
        return False
    return not (nouse_key and uuid in entries(annotations.get(nouse_key, "")))


def type_allowed(annotations: Mapping[str, str], use_key: str, nouse_key: str, device_type: str) -> bool:
    """HAMi `CheckType`: case-insensitive substring match of the device type against both lists."""
    card = device_type.upper()
    use = entries(annotations.get(use_key, "")) if use_key else []
    if use and not any(entry.upper() in card for entry in use):
        return False
    nouse = entries(annotations.get(nouse_key, "")) if nouse_key else []
    return not any(entry.upper() in card for entry in nouse)
