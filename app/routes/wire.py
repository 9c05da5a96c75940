"""kube-scheduler's extender v1 JSON, with Go field names (reference §1.2).

The upstream structs have no JSON tags, so keys are Go field names; Go's decoder matches keys
case-insensitively and its encoder emits every field, nulls included. We accept any key case on input and
emit exactly the Go names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class WireError(ValueError):
    """The request body is JSON but not the expected shape; the message goes into `Error`."""


def _get(body: Mapping[str, Any], name: str) -> Any:
    if name in body:
        return body[name]
    lowered = name.lower()
    for key, value in body.items():
        if isinstance(key, str) and key.lower() == lowered:
            return value
    return None


@dataclass(frozen=True, slots=True)
class ExtenderArgs:
    pod: dict[str, Any] | None
    nodes: list[dict[str, Any]] | None  # the Nodes path (nodeCacheCapable: false)
    node_names: list[str] | None

    @classmethod
    def parse(cls, body: Any) -> ExtenderArgs:
        if not isinstance(body, Mapping):
            raise WireError("json: cannot unmarshal non-object into Go value of type v1.ExtenderArgs")
        pod = _get(body, "Pod")
        if pod is not None and not isinstance(pod, dict):
            raise WireError("json: cannot unmarshal Pod: expected an object")
        nodes = _get(body, "Nodes")
        items: list[dict[str, Any]] | None = None
        if nodes is not None:
            raw = _get(nodes, "Items") if isinstance(nodes, Mapping) else None
            if not isinstance(nodes, Mapping) or not isinstance(raw, list | type(None)):
                raise WireError("json: cannot unmarshal Nodes: expected a NodeList object")
            items = [n for n in raw or [] if isinstance(n, dict)]
        names = _get(body, "NodeNames")
        if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
            raise WireError("json: cannot unmarshal NodeNames: expected a list of strings")
        return cls(pod, items, names)


@dataclass(frozen=True, slots=True)
class BindingArgs:
    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str

    @classmethod
    def parse(cls, body: Any) -> BindingArgs:
        if not isinstance(body, Mapping):
            raise WireError("json: cannot unmarshal non-object into Go value of type v1.ExtenderBindingArgs")
        values = {}
        for name in ("PodName", "PodNamespace", "PodUID", "Node"):
            value = _get(body, name)
            if value is not None and not isinstance(value, str):
                raise WireError(f"json: cannot unmarshal {name}: expected a string")
            values[name] = value or ""
        return cls(values["PodName"], values["PodNamespace"], values["PodUID"], values["Node"])


def filter_result(
    *,
    node_names: list[str] | None = None,
    nodes: list[dict[str, Any]] | None = None,
    failed: Mapping[str, str] | None = None,
    error: str = "",
) -> dict[str, Any]:
    """ExtenderFilterResult with every Go field, nulls included."""
    return {
        "Nodes": {"metadata": {}, "items": nodes} if nodes is not None else None,
        "NodeNames": node_names,
        "FailedNodes": dict(failed) if failed else None,
        "FailedAndUnresolvableNodes": None,
        "Error": error,
    }


def binding_result(error: str = "") -> dict[str, str]:
    return {"Error": error}
