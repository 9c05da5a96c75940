"""Safe, typed reads of a Pod given as plain JSON (a dict), and the per-pod request list (reference §3.2).

Everything the core learns about a pod comes through here, so malformed input (a pod from a fuzzer, a file
typed by hand) is turned into one readable `PodError` instead of a KeyError or TypeError deep inside a
decision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.core.model import ContainerRequests, DeviceRequest, PodRequests
from app.core.vendor import InvalidRequest, Vendor


class PodError(ValueError):
    """The pod object is not a usable Pod."""


def _mapping(value: Any, what: str) -> Mapping[str, Any]:
    if type(value) is dict:  # what JSON decodes to: no ABC check (it runs ~30 times per pod parsed)
        return value
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PodError(f"{what} must be an object")
    return value


def metadata(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(pod.get("metadata"), "metadata")


def spec(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(pod.get("spec"), "spec")


def name(pod: Mapping[str, Any]) -> str:
    value = metadata(pod).get("name", "")
    return value if isinstance(value, str) else ""


def namespace(pod: Mapping[str, Any]) -> str:
    value = metadata(pod).get("namespace") or "default"
    return value if isinstance(value, str) else "default"


def uid(pod: Mapping[str, Any]) -> str:
    value = metadata(pod).get("uid", "")
    return value if isinstance(value, str) else ""


def annotations_of(pod: Mapping[str, Any]) -> dict[str, str]:
    """String-valued annotations only (a non-string value is not an annotation the API would store)."""
    raw = _mapping(metadata(pod).get("annotations"), "metadata.annotations")
    return {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, str)}


def labels_of(pod: Mapping[str, Any]) -> dict[str, str]:
    raw = _mapping(metadata(pod).get("labels"), "metadata.labels")
    return {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, str)}


def _containers(pod: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    raw = spec(pod).get(key)
    if raw is None:
        return []
    if not isinstance(raw, Sequence) or isinstance(raw, str | bytes):
        raise PodError(f"spec.{key} must be a list")
    result = []
    for position, container in enumerate(raw):
        if not isinstance(container, Mapping):
            raise PodError(f"spec.{key}[{position}] must be an object")
        result.append(container)
    return result


def containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return _containers(pod, "containers")


def init_containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return _containers(pod, "initContainers")


def container_name(container: Mapping[str, Any]) -> str:
    value = container.get("name", "")
    return value if isinstance(value, str) else ""


def resource(container: Mapping[str, Any], name: str) -> Any | None:
    """HAMi's lookup order: `limits[name]`, then `requests[name]`; None when absent."""
    resources = _mapping(container.get("resources"), "resources")
    for section in ("limits", "requests"):
        values = _mapping(resources.get(section), f"resources.{section}")
        if name in values:
            return values[name]
    return None


def limit(container: Mapping[str, Any], name: str) -> Any | None:
    resources = _mapping(container.get("resources"), "resources")
    return _mapping(resources.get("limits"), "resources.limits").get(name)


def container_requests(container: Mapping[str, Any], vendors: Sequence[Vendor]) -> ContainerRequests:
    """vendor key -> request, only for vendors the container asks something of (nums > 0)."""
    result: dict[str, DeviceRequest] = {}
    for vendor in vendors:
        request = vendor.container_request(container)
        if request is not None and request.nums > 0:
            result[vendor.key] = request
    return result


def pod_requests(pod: Mapping[str, Any], vendors: Sequence[Vendor]) -> PodRequests:
    """HAMi `Resourcereqs`: init containers first, then regular containers (§3.2).

    Raises InvalidRequest (with the container named) when a device resource has a value we refuse.
    """
    inits = init_containers(pod)
    everything = [*inits, *containers(pod)]
    requests = []
    for container in everything:
        try:
            requests.append(container_requests(container, vendors))
        except InvalidRequest as exc:
            raise InvalidRequest(f"{exc} in container {container_name(container)}") from None
    return PodRequests(tuple(requests), len(inits))


def phase(pod: Mapping[str, Any]) -> str:
    value = _mapping(pod.get("status"), "status").get("phase", "")
    return value if isinstance(value, str) else ""


def is_terminated(pod: Mapping[str, Any]) -> bool:
    return phase(pod) in ("Succeeded", "Failed")


def refusal(pod: Mapping[str, Any], scheduler_name: str) -> str:
    """Why /filter and /bind must not act for this pod as the API shows it, "" when they may (issue 11).

    Only pods of our scheduler that are neither bound nor being deleted: a bound pod's allocation is what
    the device plugin handed to its containers, a terminating pod must not be given anything, and a pod of
    another scheduler is not ours to place or bind, whoever asks.
    """
    who = f"pod {namespace(pod)}/{name(pod)}"
    named = spec(pod).get("schedulerName") or ""
    if named != scheduler_name:
        return f"{who} is not scheduled by {scheduler_name} (schedulerName {named or '<none>'})"
    if metadata(pod).get("deletionTimestamp"):
        return f"{who} is being deleted"
    node = spec(pod).get("nodeName")
    if node:
        return f"{who} is already bound to node {node}"
    return ""


def disabled_request(pod: Mapping[str, Any], disabled: Mapping[str, str]) -> str | None:
    """The answer for a pod asking for a resource no enabled vendor serves (`disabled`: name -> why), or
    None. HAMi passes such a pod through silently (its resources ignored); we name the resource."""
    if not disabled:
        return None
    for container in [*init_containers(pod), *containers(pod)]:
        resources = _mapping(container.get("resources"), "resources")
        for section in ("limits", "requests"):
            for name in _mapping(resources.get(section), f"resources.{section}"):
                if name in disabled:
                    return f"container {container_name(container)} asks for {name}: {disabled[name]}"
    return None
