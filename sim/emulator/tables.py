"""Server-side ``meta.k8s.io/v1`` Table rendering, which ``kubectl get`` asks for in its Accept header.

The columns match kube-apiserver's printers for pods, nodes, namespaces, leases and core events (Age rendered
like apimachinery's HumanDuration); other kinds get NAME and AGE.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import orjson

from sim.emulator import resources
from sim.emulator.listing import Page, list_metadata
from sim.emulator.resources import ResourceType
from sim.emulator.store import Entry, JsonObj

Cells = list[Any]


def human_duration(seconds: float) -> str:
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 120:
        return f"{max(s, 0)}s"
    minutes, hours, days = s // 60, s // 3600, s // 86400
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y{days % 365}d" if days % 365 and days < 365 * 8 else f"{days // 365}y"


def _age(stamp: str | None) -> str:
    if not stamp:
        return "<unknown>"
    created = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return human_duration((datetime.datetime.now(datetime.UTC) - created).total_seconds())


def _pod(obj: JsonObj) -> Cells:
    spec, status, meta = obj.get("spec") or {}, obj.get("status") or {}, obj["metadata"]
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    phase = (
        "Terminating" if meta.get("deletionTimestamp") else status.get("reason") or status.get("phase", "")
    )
    restarts = sum(int(s.get("restartCount", 0)) for s in statuses)
    gates = spec.get("readinessGates")
    return [
        meta["name"],
        f"{ready}/{len(spec.get('containers') or [])}",
        phase,
        restarts,
        _age(meta.get("creationTimestamp")),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        f"{len(gates)}" if gates else "<none>",
    ]


def _node(obj: JsonObj) -> Cells:
    spec, status, meta = obj.get("spec") or {}, obj.get("status") or {}, obj["metadata"]
    ready = next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    state = {"True": "Ready", "False": "NotReady"}.get(str(ready), "Unknown")
    if spec.get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = meta.get("labels") or {}
    roles = sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/"))
    if labels.get("kubernetes.io/role"):
        roles.append(labels["kubernetes.io/role"])
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    info = status.get("nodeInfo") or {}
    return [
        meta["name"],
        state,
        ",".join(roles) or "<none>",
        _age(meta.get("creationTimestamp")),
        info.get("kubeletVersion", ""),
        addresses.get("InternalIP", "<none>"),
        addresses.get("ExternalIP", "<none>"),
        info.get("osImage", "<unknown>"),
        info.get("kernelVersion", "<unknown>"),
        info.get("containerRuntimeVersion", "<unknown>"),
    ]


def _namespace(obj: JsonObj) -> Cells:
    meta = obj["metadata"]
    return [meta["name"], (obj.get("status") or {}).get("phase", ""), _age(meta.get("creationTimestamp"))]


def _lease(obj: JsonObj) -> Cells:
    meta = obj["metadata"]
    holder = (obj.get("spec") or {}).get("holderIdentity") or ""
    return [meta["name"], holder, _age(meta.get("creationTimestamp"))]


def _event(obj: JsonObj) -> Cells:
    meta, involved = obj["metadata"], obj.get("involvedObject") or {}
    seen = obj.get("lastTimestamp") or obj.get("eventTime") or meta.get("creationTimestamp")
    target = f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"
    return [_age(seen), obj.get("type", ""), obj.get("reason", ""), target, obj.get("message", "")]


def _default(obj: JsonObj) -> Cells:
    meta = obj["metadata"]
    return [meta["name"], _age(meta.get("creationTimestamp"))]


def _columns(*specs: tuple[str, str, int]) -> list[dict[str, Any]]:
    return [
        {"name": n, "type": t, "format": "name" if n == "Name" else "", "description": n, "priority": p}
        for n, t, p in specs
    ]


_NAME, _AGE = ("Name", "string", 0), ("Age", "string", 0)
_PRINTERS: dict[str, tuple[list[dict[str, Any]], Callable[[JsonObj], Cells]]] = {
    resources.PODS.key: (
        _columns(
            _NAME,
            ("Ready", "string", 0),
            ("Status", "string", 0),
            ("Restarts", "integer", 0),
            _AGE,
            ("IP", "string", 1),
            ("Node", "string", 1),
            ("Nominated Node", "string", 1),
            ("Readiness Gates", "string", 1),
        ),
        _pod,
    ),
    resources.NODES.key: (
        _columns(
            _NAME,
            ("Status", "string", 0),
            ("Roles", "string", 0),
            _AGE,
            ("Version", "string", 0),
            ("Internal-IP", "string", 1),
            ("External-IP", "string", 1),
            ("OS-Image", "string", 1),
            ("Kernel-Version", "string", 1),
            ("Container-Runtime", "string", 1),
        ),
        _node,
    ),
    resources.NAMESPACES.key: (_columns(_NAME, ("Status", "string", 0), _AGE), _namespace),
    resources.LEASES.key: (_columns(_NAME, ("Holder", "string", 0), _AGE), _lease),
    resources.EVENTS.key: (
        _columns(
            ("Last Seen", "string", 0),
            ("Type", "string", 0),
            ("Reason", "string", 0),
            ("Object", "string", 0),
            ("Message", "string", 0),
        ),
        _event,
    ),
}


def _row_object(entry: Entry, include: str) -> bytes:
    if include == "Object":
        return entry.raw
    if include == "None":
        return b"null"
    return orjson.dumps(
        {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": entry.metadata}
    )


def row(rtype: ResourceType, entry: Entry, include_object: str) -> bytes:
    """One object as a one-row Table: a ``get`` of one object, or an event of a ``get -w`` watch."""
    return table(rtype, Page(entry.rv, [entry], "", 0), include_object)


def table(rtype: ResourceType, page: Page, include_object: str) -> bytes:
    """A Table for a list page (``include_object``: Object, Metadata or None, as the query parameter)."""
    columns, printer = _PRINTERS.get(rtype.key, (_columns(_NAME, _AGE), _default))
    rows = b",".join(
        b'{"cells":%s,"object":%s}' % (orjson.dumps(printer(e.obj)), _row_object(e, include_object))
        for e in page.items
    )
    return (
        b'{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":%s,"columnDefinitions":%s,"rows":[%s]}'
        % (
            list_metadata(page),
            orjson.dumps(columns),
            rows,
        )
    )
