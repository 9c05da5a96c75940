"""Reading the files the commands take (JSON or YAML) and the settings they share.

Every problem with the input becomes a `CliError` whose message is printed as one line; the command exits
with status 2 and never shows a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from app.core.inventory import NodeUnregistered, decode_node, node_name
from app.core.model import NodeDevices
from app.core.vendor import Vendor
from app.devices import DeviceConfigError, build_vendors, disabled_resources


class CliError(Exception):
    """A one-line message for the user; the command exits with status 2."""


def load_document(path: str) -> Any:
    """Parse a JSON or YAML file (one document)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    try:
        return yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CliError(f"{path} is neither valid JSON nor valid YAML: {reason}") from None


def load_pod(path: str) -> dict[str, Any]:
    pod = load_document(path)
    if not isinstance(pod, dict):
        raise CliError(f"{path}: expected a Pod object")
    kind = pod.get("kind", "Pod")
    if kind != "Pod":
        raise CliError(f"{path}: expected kind Pod, got {kind!r}")
    spec = pod.get("spec")
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not isinstance(containers, list) or not containers:
        raise CliError(f"{path}: the pod has no containers")
    return pod


def _device_config(device_config: str | None) -> dict[str, Any] | None:
    if not device_config:
        return None
    data = load_document(device_config)
    if data is not None and not isinstance(data, dict):
        raise CliError(f"{device_config}: expected a mapping of vendor sections")
    return data


def load_vendors(device_config: str | None) -> tuple[Vendor, ...]:
    """The vendors HAMi would enable with this device-config.yaml (a flag-gated vendor such as Ascend is
    enabled when its section is present: `app.devices`)."""
    try:
        return build_vendors(_device_config(device_config))
    except DeviceConfigError as exc:
        raise CliError(f"{device_config}: {exc}") from None


def load_disabled(device_config: str | None) -> dict[str, str]:
    """Resource name -> why no enabled vendor serves it, under this device-config.yaml."""
    try:
        return disabled_resources(_device_config(device_config))
    except DeviceConfigError as exc:
        raise CliError(f"{device_config}: {exc}") from None


TYPE = "<type>"  # a family's vendors that differ only by their type word (Ascend chips, Iluvatar chips)
_LIST_KINDS = {"NodeList": "Node", "PodList": "Pod", "ResourceQuotaList": "ResourceQuota"}


@dataclass
class Cluster:
    """The objects of a `kubectl get nodes,pods,resourcequotas -A -o json` dump, by kind, in file order."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    quotas: list[dict[str, Any]] = field(default_factory=list)


def _items(document: Any, path: str) -> list[tuple[str, dict[str, Any]]]:
    if isinstance(document, list):
        return [(str(item.get("kind", "")), item) for item in document if isinstance(item, dict)]
    if not isinstance(document, dict):
        raise CliError(f"{path}: expected a Kubernetes List or object")
    kind = str(document.get("kind", ""))
    if "items" in document:
        items = document["items"]
        if not isinstance(items, list):
            raise CliError(f"{path}: items must be a list")
        implied = _LIST_KINDS.get(kind, "")
        return [(str(item.get("kind") or implied), item) for item in items if isinstance(item, dict)]
    return [(kind, document)]


def load_cluster(path: str | None) -> Cluster:
    cluster = Cluster()
    if path is None:
        return cluster
    for kind, item in _items(load_document(path), path):
        if kind == "Node":
            cluster.nodes.append(item)
        elif kind == "Pod":
            cluster.pods.append(item)
        elif kind == "ResourceQuota":
            cluster.quotas.append(item)
    return cluster


def decode_nodes(
    nodes: Sequence[Mapping[str, Any]], vendors: Sequence[Vendor]
) -> tuple[dict[str, NodeDevices], dict[str, str]]:
    """Registered nodes by name, and the reason for each node that is not usable."""
    registered: dict[str, NodeDevices] = {}
    broken: dict[str, str] = {}
    for node in nodes:
        name = node_name(node)
        try:
            registered[name] = decode_node(node, vendors)
        except NodeUnregistered as exc:
            if str(exc) != "no device registration":
                broken[name] = str(exc)
    return registered, broken


def dump_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=False, ensure_ascii=False)
