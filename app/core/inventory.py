"""A Node object (plain JSON) -> the devices it registered, or the reason it cannot be used (§2.2, §4.9).

Both the registration worker and the simulation path of /filter (Nodes given) decode nodes here, so a
corrupt annotation yields the same reason everywhere and never more than that one node is affected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.core.codec import CodecError, decode_cordon
from app.core.model import DeviceInfo, NodeDevices
from app.core.vendor import NodeView, Vendor

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


def _strings(raw: Any) -> dict[str, str]:
    if not isinstance(raw, Mapping):
        return {}
    return {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, str)}


def _section(node: Mapping[str, Any], part: str, key: str) -> Mapping[str, Any]:
    outer = node.get(part)
    inner = outer.get(key) if isinstance(outer, Mapping) else None
    return inner if isinstance(inner, Mapping) else {}


def node_view(node: Mapping[str, Any]) -> NodeView:
    """The parts of a Node object vendors read to discover devices."""
    return NodeView(
        name=node_name(node),
        annotations=node_annotations(node),
        labels=_strings(_section(node, "metadata", "labels")),
        capacity=dict(_section(node, "status", "capacity")),
        allocatable=dict(_section(node, "status", "allocatable")),
    )


def decode_node(node: Mapping[str, Any] | NodeView, vendors: Sequence[Vendor]) -> NodeDevices:
    """All vendors' devices of one node; raises NodeUnregistered with the reason.

    A vendor the node does not carry (no register annotation, no capacity) contributes nothing (a CPU node
    has none); one whose registration is present but corrupt makes the whole node unusable, so a half-read
    node never hands out capacity that does not exist.
    """
    view = node if isinstance(node, NodeView) else node_view(node)
    devices: list[DeviceInfo] = []
    info: dict[str, Mapping[str, Any]] = {}
    for vendor in vendors:
        if not vendor.registered(view):
            continue
        try:
            found = vendor.discover(view)
        except CodecError as exc:
            raise NodeUnregistered(f"{vendor.source}: {exc}") from None
        devices.extend(found.devices)
        if found.info:
            info[vendor.key] = found.info
    if not devices:
        raise NodeUnregistered("no device registration")
    seen: set[str] = set()
    for device in devices:
        if device.id in seen:
            raise NodeUnregistered(f"duplicate device id {device.id}")
        seen.add(device.id)
    cordoned = decode_cordon(view.annotations.get(CORDON_ANNOTATION))
    return NodeDevices(view.name, tuple(devices), cordoned, info)
