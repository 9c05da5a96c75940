"""kube-scheduler's extender v1 JSON, with Go field names (reference §1.2).

The upstream structs have no JSON tags, so keys are Go field names; Go's decoder matches keys
case-insensitively and its encoder emits every field, nulls included. We accept any key case on input and
emit exactly the Go names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
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
        # every name a string, checked in C (a 1,000-name body: half the CPU of a generator)
        if names is not None and (
            not isinstance(names, list) or not all(map(isinstance, names, repeat(str)))
        ):
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


def _victim_uids(victims: Any, meta: bool) -> tuple[list[str], int]:
    if not isinstance(victims, Mapping):
        raise WireError("json: cannot unmarshal victims: expected an object")
    listed = _get(victims, "Pods") or []
    violations = _get(victims, "NumPDBViolations") or 0
    if not isinstance(listed, list) or not isinstance(violations, int) or isinstance(violations, bool):
        raise WireError(
            "json: cannot unmarshal victims: expected Pods (a list) and NumPDBViolations (a number)"
        )
    uids = []
    for pod in listed:
        holder = pod if meta else (_get(pod, "metadata") if isinstance(pod, Mapping) else None)
        uid = _get(holder, "UID" if meta else "uid") if isinstance(holder, Mapping) else None
        if not isinstance(uid, str) or not uid:
            raise WireError("json: cannot unmarshal victims: a pod without a UID")
        uids.append(uid)
    return uids, violations


@dataclass(frozen=True, slots=True)
class PreemptionArgs:
    """ExtenderPreemptionArgs: the preemptor and, per candidate node, kube-scheduler's victims as UIDs
    (NodeNameToMetaVictims with nodeCacheCapable, else NodeNameToVictims with whole pods) and their count
    of PodDisruptionBudget violations."""

    pod: dict[str, Any] | None
    victims: dict[str, tuple[list[str], int]]

    @classmethod
    def parse(cls, body: Any) -> PreemptionArgs:
        if not isinstance(body, Mapping):
            raise WireError(
                "json: cannot unmarshal non-object into Go value of type v1.ExtenderPreemptionArgs"
            )
        pod = _get(body, "Pod")
        if pod is not None and not isinstance(pod, dict):
            raise WireError("json: cannot unmarshal Pod: expected an object")
        victims: dict[str, tuple[list[str], int]] = {}
        for field_name, meta in (("NodeNameToVictims", False), ("NodeNameToMetaVictims", True)):
            nodes = _get(body, field_name)
            if nodes is None:
                continue
            if not isinstance(nodes, Mapping):
                raise WireError(f"json: cannot unmarshal {field_name}: expected an object")
            for node, listed in nodes.items():
                victims[str(node)] = _victim_uids(listed, meta) if listed is not None else ([], 0)
        return cls(pod, victims)


def preemption_result(victims: Mapping[str, tuple[Sequence[str], int]], error: str = "") -> dict[str, Any]:
    """ExtenderPreemptionResult (NodeNameToMetaVictims); `Error` is ours: kube-scheduler's decoder ignores
    it, and an empty map tells it that no candidate node is left."""
    result: dict[str, Any] = {
        "NodeNameToMetaVictims": {
            node: {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": violations}
            for node, (uids, violations) in victims.items()
        }
    }
    if error:
        result["Error"] = error
    return result


def filter_result(
    *,
    node_names: list[str] | None = None,
    nodes: list[dict[str, Any]] | None = None,
    failed: Mapping[str, str] | None = None,
    unresolvable: Mapping[str, str] | None = None,
    error: str = "",
) -> dict[str, Any]:
    """ExtenderFilterResult with every Go field, nulls included."""
    return {
        "Nodes": {"metadata": {}, "items": nodes} if nodes is not None else None,
        "NodeNames": node_names,
        "FailedNodes": dict(failed) if failed else None,
        "FailedAndUnresolvableNodes": dict(unresolvable) if unresolvable else None,
        "Error": error,
    }


def binding_result(error: str = "") -> dict[str, str]:
    return {"Error": error}
