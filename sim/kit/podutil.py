"""Small pod helpers shared by the simulated kubelet, kube-scheduler and the demo: field access, resource
requests, the status a kubelet reports, and latency summaries."""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from app.core import quantity

Obj = dict[str, Any]
GPU_RESOURCE = "nvidia.com/gpu"
RUN_SECONDS = "sim.hami.io/run-seconds"
REJECTED = "sim.hami.io/rejected"
TERMINAL = ("Succeeded", "Failed")


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = obj.get("metadata")
    return value if isinstance(value, Mapping) else {}


def name(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("name") or "")


def namespace(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("namespace") or "default")


def uid(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("uid") or "")


def key(obj: Mapping[str, Any]) -> str:
    return f"{namespace(obj)}/{name(obj)}"


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    value = meta(obj).get("annotations")
    return {k: v for k, v in value.items() if isinstance(v, str)} if isinstance(value, Mapping) else {}


def labels(obj: Mapping[str, Any]) -> dict[str, str]:
    value = meta(obj).get("labels")
    return {k: v for k, v in value.items() if isinstance(v, str)} if isinstance(value, Mapping) else {}


def spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = obj.get("spec")
    return value if isinstance(value, Mapping) else {}


def node_name(pod: Mapping[str, Any]) -> str:
    return str(spec(pod).get("nodeName") or "")


def phase(pod: Mapping[str, Any]) -> str:
    status = pod.get("status")
    return str(status.get("phase") or "") if isinstance(status, Mapping) else ""


def unschedulable_reason(pod: Mapping[str, Any]) -> str | None:
    """Why an unbound pod was found unschedulable: the simulated scheduler's rejection annotation, else the
    PodScheduled=False/Unschedulable condition the real kube-scheduler writes; None when neither."""
    if node_name(pod):
        return None
    rejected = annotations_of(pod).get(REJECTED)
    if rejected is not None:
        return rejected
    status = pod.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for item in conditions if isinstance(conditions, list) else []:
        if (
            isinstance(item, Mapping)
            and item.get("type") == "PodScheduled"
            and item.get("status") == "False"
            and item.get("reason") == "Unschedulable"
        ):
            return str(item.get("message") or "Unschedulable")
    return None


def terminating(pod: Mapping[str, Any]) -> bool:
    return bool(meta(pod).get("deletionTimestamp"))


def containers(pod: Mapping[str, Any], init: bool = False) -> list[Mapping[str, Any]]:
    value = spec(pod).get("initContainers" if init else "containers")
    return [c for c in value if isinstance(c, Mapping)] if isinstance(value, list) else []


def resource(container: Mapping[str, Any], resource_name: str) -> object:
    """`limits[name]`, else `requests[name]` (HAMi's lookup order), else None."""
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return None
    for section in ("limits", "requests"):
        values = resources.get(section)
        if isinstance(values, Mapping) and values.get(resource_name) is not None:
            return values[resource_name]
    return None


def device_count(container: Mapping[str, Any], resource_name: str) -> int:
    """The container's count of a device resource (what the kubelet asks that device plugin to Allocate)."""
    value = quantity.as_int64(resource(container, resource_name))
    return value if value and value > 0 else 0


def gpu_count(container: Mapping[str, Any]) -> int:
    """The container's `nvidia.com/gpu`."""
    return device_count(container, GPU_RESOURCE)


def gpu_containers(pod: Mapping[str, Any]) -> list[tuple[int, Mapping[str, Any]]]:
    """(index in init-then-regular order, container) of every container requesting GPUs."""
    ordered = containers(pod, init=True) + containers(pod)
    return [(i, c) for i, c in enumerate(ordered) if gpu_count(c) > 0]


def requests_of(container: Mapping[str, Any]) -> dict[str, Fraction]:
    """Container requests (limits stand in for missing requests, as the API server defaults them)."""
    resources = container.get("resources")
    result: dict[str, Fraction] = {}
    if not isinstance(resources, Mapping):
        return result
    for section in ("limits", "requests"):
        values = resources.get(section)
        if isinstance(values, Mapping):
            for res, raw in values.items():
                try:
                    result[str(res)] = quantity.parse(raw)
                except quantity.QuantityError:
                    continue
    return result


def pod_requests(pod: Mapping[str, Any]) -> dict[str, Fraction]:
    """kube-scheduler's effective pod request: max(each init container, sum of regular containers)."""
    total: dict[str, Fraction] = {}
    for container in containers(pod):
        for res, amount in requests_of(container).items():
            total[res] = total.get(res, Fraction(0)) + amount
    for container in containers(pod, init=True):
        for res, amount in requests_of(container).items():
            total[res] = max(total.get(res, Fraction(0)), amount)
    return total


# --- the status a kubelet reports ---------------------------------------------------------------------------


def condition(kind: str, status: str, stamp: str, reason: str = "", message: str = "") -> Obj:
    """A pod condition as the kubelet or kube-scheduler writes it."""
    result: Obj = {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": stamp}
    if reason:
        result["reason"] = reason
    if message:
        result["message"] = message
    return result


def running_status(pod: Mapping[str, Any], host_ip: str, pod_ip: str) -> Obj:
    stamp = now_rfc3339()
    init_statuses = [
        {
            "name": c.get("name", ""),
            "ready": True,
            "restartCount": 0,
            "image": c.get("image", ""),
            "state": {
                "terminated": {"exitCode": 0, "reason": "Completed", "startedAt": stamp, "finishedAt": stamp}
            },
        }
        for c in containers(pod, init=True)
    ]
    statuses = [
        {
            "name": c.get("name", ""),
            "ready": True,
            "started": True,
            "restartCount": 0,
            "image": c.get("image", ""),
            "state": {"running": {"startedAt": stamp}},
        }
        for c in containers(pod)
    ]
    status: Obj = {
        "phase": "Running",
        "hostIP": host_ip,
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": stamp,
        "conditions": [
            condition("Initialized", "True", stamp),
            condition("ContainersReady", "True", stamp),
            condition("Ready", "True", stamp),
        ],
        "containerStatuses": statuses,
    }
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    return status


def finished_status(pod: Mapping[str, Any], exit_code: int = 0) -> Obj:
    stamp = now_rfc3339()
    reason = "Completed" if exit_code == 0 else "Error"
    statuses = [
        {
            "name": c.get("name", ""),
            "ready": False,
            "started": False,
            "restartCount": 0,
            "image": c.get("image", ""),
            "state": {"terminated": {"exitCode": exit_code, "reason": reason, "finishedAt": stamp}},
        }
        for c in containers(pod)
    ]
    return {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "conditions": [
            condition("ContainersReady", "False", stamp, "PodCompleted"),
            condition("Ready", "False", stamp, "PodCompleted"),
        ],
        "containerStatuses": statuses,
    }


def admission_failed_status(message: str) -> Obj:
    """What the kubelet reports when a device plugin's Allocate fails: the pod is rejected (Failed)."""
    return {
        "phase": "Failed",
        "reason": "UnexpectedAdmissionError",
        "message": f"Allocate failed due to {message}, which is unexpected",
    }


def message_shape(text: str, width: int = 100) -> str:
    """An error message with names and numbers blanked (`#`), to count errors by kind."""
    return re.sub(r"[\w.-]*\d[\w.-]*", "#", text)[:width]


# --- latency summaries --------------------------------------------------------------------------------------


def percentile(values: Iterable[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); 0 for no values."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def summary(values: list[float]) -> Obj:
    return {
        "count": len(values),
        "p50_ms": round(percentile(values, 50), 3),
        "p90_ms": round(percentile(values, 90), 3),
        "p99_ms": round(percentile(values, 99), 3),
        "max_ms": round(max(values), 3) if values else 0.0,
        "mean_ms": round(sum(values) / len(values), 3) if values else 0.0,
    }
