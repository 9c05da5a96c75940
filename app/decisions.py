"""One structured log line per decision — filter, bind, admission — so any placement can be traced later.

Why one line each: an operator asking "why did this pod go there" (or "why not") greps one logger,
`hami.decisions`, for the pod's UID or name and finds the whole story of that request: the node, the
devices with their memory and cores, the score, the bounded reason and every phase's time. HAMi logs the
same facts across several klog lines at -v=4 (and not the score or the phase times).

The level is HAMI_DECISION_LOG (INFO by default; DEBUG keeps them out of an INFO log; OFF switches them
off). When the logger would drop the line nothing is built, so a disabled log costs one level check.

Fields (JSON keys; absent when they do not apply):
    decision      filter | bind | admission
    pod_uid, namespace, pod
    result        filter: placed, unschedulable, passthrough, error; bind: bound, error;
                  admission: allowed, denied
    node          the chosen node (filter), the target node (bind)
    score         the chosen node's score (filter)
    devices       [{container, vendor, uuid, memory_mib, cores}] the allocation written (filter)
    candidates    how many nodes kube-scheduler offered (filter)
    reason        bounded: the denial key (filter), the bind reason (app.bind.usecase), the admission status
                  reason (and status_message); with `reasons` the count of nodes per failure reason
                  (filter, not placed)
    error         the Error text answered, if any
    phases_ms     each phase's milliseconds; duration_ms the whole request
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from typing import Any

from app.core import pods
from app.core.model import PodDevices

logger = logging.getLogger("hami.decisions")

OFF = "OFF"


def _level(setting: str) -> int | None:
    """The logging level for HAMI_DECISION_LOG, None when off or when the logger would drop it."""
    if setting == OFF:
        return None
    level = logging.getLevelName(setting)
    return level if isinstance(level, int) and logger.isEnabledFor(level) else None


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def _identity(pod: Any) -> dict[str, str]:
    if not isinstance(pod, Mapping):
        return {}
    try:
        found = {"pod_uid": pods.uid(pod), "namespace": pods.namespace(pod), "pod": pods.name(pod)}
    except pods.PodError:
        return {}
    return {key: value for key, value in found.items() if value}


def device_rows(devices: PodDevices) -> list[dict[str, Any]]:
    """An allocation as one row per (container, device): readable, unlike the annotation encoding."""
    rows = []
    for vendor, containers in sorted(devices.items()):
        for index, container in enumerate(containers):
            for d in container:
                rows.append(
                    {
                        "container": index,
                        "vendor": vendor,
                        "uuid": d.uuid,
                        "memory_mib": d.usedmem,
                        "cores": d.usedcores,
                    }
                )
    return rows


def filter_decision(
    setting: str,
    pod: Any,
    *,
    result: str,
    candidates: int,
    node: str = "",
    score: float | None = None,
    devices: PodDevices | None = None,
    reason: str = "",
    failed: Mapping[str, str] | None = None,
    error: str = "",
    phases: Mapping[str, float] | None = None,
    seconds: float = 0.0,
) -> None:
    level = _level(setting)
    if level is None:
        return
    fields: dict[str, Any] = {"decision": "filter", **_identity(pod), "result": result}
    fields["candidates"] = candidates
    if node:
        fields["node"] = node
    if score is not None:
        fields["score"] = round(score, 6)
    if devices:
        fields["devices"] = device_rows(devices)
    if reason:
        fields["reason"] = reason
    if failed:
        fields["reasons"] = dict(Counter(failed.values()).most_common())
    if error:
        fields["error"] = error
    fields["phases_ms"] = {k: _ms(v) for k, v in (phases or {}).items()}
    fields["duration_ms"] = _ms(seconds)
    logger.log(level, "filter decision", extra=fields)


def bind_decision(
    setting: str,
    *,
    namespace: str,
    name: str,
    uid: str,
    node: str,
    reason: str,
    error: str = "",
    lock_waited: float = 0.0,
    took_over: str = "",
    phases: Mapping[str, float] | None = None,
    seconds: float = 0.0,
) -> None:
    level = _level(setting)
    if level is None:
        return
    fields: dict[str, Any] = {
        "decision": "bind",
        "pod_uid": uid,
        "namespace": namespace,
        "pod": name,
        "result": "error" if error else "bound",
        "node": node,
        "reason": reason,
    }
    if error:
        fields["error"] = error
    if lock_waited:
        fields["lock_wait_ms"] = _ms(lock_waited)
    if took_over:
        fields["lock_taken_over"] = took_over
    fields["phases_ms"] = {k: _ms(v) for k, v in (phases or {}).items()}
    fields["duration_ms"] = _ms(seconds)
    logger.log(level, "bind decision", extra=fields)


def admission_decision(
    setting: str,
    *,
    request_uid: str,
    operation: str,
    pod: Any,
    namespace: str,
    allowed: bool,
    code: int,
    reason: str,
    message: str,
    patched: int,
    seconds: float,
) -> None:
    level = _level(setting)
    if level is None:
        return
    identity = _identity(pod)
    if not identity.get("pod") and isinstance(pod, Mapping):
        metadata = pod.get("metadata")
        generate = metadata.get("generateName") if isinstance(metadata, Mapping) else None
        if isinstance(generate, str):
            identity["pod"] = generate  # the API server names the pod after admission
    fields: dict[str, Any] = {
        "decision": "admission",
        "request_uid": request_uid,
        "operation": operation,
        **identity,
        "namespace": namespace or identity.get("namespace", ""),
        "result": "allowed" if allowed else "denied",
        "code": code,
    }
    if reason:
        fields["reason"] = reason
    if message:
        fields["status_message"] = message  # "message" is reserved by logging.LogRecord
    fields["patch_operations"] = patched
    fields["duration_ms"] = _ms(seconds)
    logger.log(level, "admission decision", extra=fields)
