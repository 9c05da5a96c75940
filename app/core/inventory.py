"""A Node object (plain JSON) -> the devices it registered, or the reason it cannot be used (§2.2, §4.9).

Both the registration worker and the simulation path of /filter (Nodes given) decode nodes here, so a
corrupt annotation yields the same reason everywhere and never more than that one node is affected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.core.codec import CodecError, decode_cordon
from app.core.model import DeviceInfo, NodeDevices
from app.core.vendor import Vendor

CORDON_ANNOTATION = "hami.io/device-cordon"


class NodeUnregistered(ValueError):
    """The node has no usable device registration; the message is the reason."""


def node_name(node: Mapping[str, Any]) -> str:
    metadata = node.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return name if isinstance(name, str) else ""


def node_annotations(node: Mapping[str, Any]) -> dict[str, str]:
    metadata = node.get("metadata")
    raw = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if not isinstance(raw, Mapping):
        return {}
    return {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, str)}


def decode_node(node: Mapping[str, Any], vendors: Sequence[Vendor]) -> NodeDevices:
    """All vendors' devices of one node; raises NodeUnregistered with the reason.

    A vendor whose register annotation is absent contributes nothing (a CPU node has none); one whose
    annotation is present but corrupt makes the whole node unusable, so a half-read node never hands out
    capacity that does not exist.
    """
    annotations = node_annotations(node)
    devices: list[DeviceInfo] = []
    for vendor in vendors:
        if vendor.register_annotation not in annotations:
            continue
        try:
            devices.extend(vendor.node_devices(annotations))
        except CodecError as exc:
            raise NodeUnregistered(f"{vendor.register_annotation}: {exc}") from None
    if not devices:
        raise NodeUnregistered("no device registration")
    seen: set[str] = set()
    for device in devices:
        if device.id in seen:
            raise NodeUnregistered(f"duplicate device id {device.id}")
        seen.add(device.id)
    return NodeDevices(node_name(node), tuple(devices), decode_cordon(annotations.get(CORDON_ANNOTATION)))
