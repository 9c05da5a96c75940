"""What the informers keep of each object: only the fields a decision reads (bounded memory).

A real Pod or Node carries managedFields, status conditions, images and the last-applied configuration;
thousands of them would cost hundreds of megabytes for nothing. Each function here returns a new, small dict
with the same layout as the API object, so the pure rules (`app.core.reservations`, `app.core.inventory`,
`app.core.quota`) read it unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from app.core import podkeys
from app.core.capacity import CAPACITY_ANNOTATION
from app.core.inventory import CORDON_ANNOTATION
from app.core.nodelock import LOCK_ANNOTATION
from app.core.vendor import Vendor, node_locks

ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
NODE_ANNOTATION_PREFIX = "hami.io/node-"  # register, pair scores and handshakes of every vendor
POD_ANNOTATION_PREFIX = "hami.io/"

Shape = Callable[[Mapping[str, Any]], dict[str, Any]]


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if type(value) is dict or isinstance(value, Mapping) else {}  # dict first: no ABC check


def _pick(source: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    return {key: source[key] for key in keys if key in source}


def _metadata(obj: Mapping[str, Any], *extra: str) -> dict[str, Any]:
    return _pick(_mapping(obj.get("metadata")), ("name", "namespace", "uid", "resourceVersion", *extra))


def _containers(raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        return []
    return [_pick(c, ("name", "resources")) for c in raw if isinstance(c, Mapping)]


def _init_statuses(raw: Any) -> list[dict[str, Any]]:
    """Only whether each init container terminated, and with which exit code (the init shrink)."""
    if not isinstance(raw, list):
        return []
    kept = []
    for entry in raw:
        state = _mapping(_mapping(entry).get("state"))
        terminated = _mapping(state.get("terminated"))
        kept.append({"state": {"terminated": {"exitCode": terminated.get("exitCode")}}} if terminated else {})
    return kept


def pod_shape(vendors: Iterable[Vendor]) -> Shape:
    """What a ledger row needs of a pod: its allocation annotations and requests, node, scheduler, phase,
    init containers' exits, and its facts (priority, start or creation time, deletion, PodGroup:
    app/core/podfacts.py)."""
    vendors = tuple(vendors)
    allocated = set(podkeys.declared(vendors))  # every key a vendor writes, by its declaration
    allocated |= {key for v in vendors for key in v.reads.pod_annotations}

    def shape(pod: Mapping[str, Any]) -> dict[str, Any]:
        metadata = _metadata(pod, "labels", "deletionTimestamp", "creationTimestamp")
        owners = _mapping(pod.get("metadata")).get("ownerReferences")
        if isinstance(owners, list) and owners:  # who made the pod (workers/notices.py), not the whole list
            metadata["ownerReferences"] = [_pick(_mapping(o), ("kind", "name")) for o in owners]
        annotations = _mapping(_mapping(pod.get("metadata")).get("annotations"))
        metadata["annotations"] = {
            k: v for k, v in annotations.items() if k.startswith(POD_ANNOTATION_PREFIX) or k in allocated
        }
        spec = _mapping(pod.get("spec"))
        status = _mapping(pod.get("status"))
        return {
            "metadata": metadata,
            "spec": {
                # the PodGroup a gang member names and its priority (workers/podgroups.py, app/filter/gang.py)
                **_pick(spec, ("nodeName", "schedulerName", "schedulingGroup", "priority")),
                "containers": _containers(spec.get("containers")),
                "initContainers": _containers(spec.get("initContainers")),
            },
            "status": {
                **_pick(status, ("phase", "startTime")),
                "initContainerStatuses": _init_statuses(status.get("initContainerStatuses")),
            },
        }

    return shape


def node_shape(vendors: Iterable[Vendor]) -> Shape:
    """Registration annotations, the node lock (for the leader's lock sweeper; `content` ignores it, as it
    changes on every bind and no registration reads it), our capacity annotation (the leader compares it
    before writing it again; the work loop and the decode cache ignore it), topology labels, the vendors'
    allocatable device counts, and whatever else a vendor's discovery reads (`Vendor.reads`: annotations,
    labels, capacity)."""
    vendors = tuple(vendors)
    counts = {v.resources.count for v in vendors}
    annotations = {
        CORDON_ANNOTATION,
        CAPACITY_ANNOTATION,  # the leader's own (workers/capacity.py): compared, never decoded
        *(spec.annotation for spec in node_locks(vendors)),
        *(k for v in vendors for k in v.reads.node_annotations),
    }
    labels = (ZONE_LABEL, REGION_LABEL, *(k for v in vendors for k in v.reads.node_labels))
    capacity = tuple(k for v in vendors for k in v.reads.capacity)

    def shape(node: Mapping[str, Any]) -> dict[str, Any]:
        metadata = _metadata(node)
        raw = _mapping(node.get("metadata"))
        metadata["labels"] = _pick(_mapping(raw.get("labels")), labels)
        metadata["annotations"] = {
            k: v
            for k, v in _mapping(raw.get("annotations")).items()
            if k.startswith(NODE_ANNOTATION_PREFIX) or k in annotations
        }
        status = _mapping(node.get("status"))
        shaped: dict[str, Any] = {"allocatable": _pick(_mapping(status.get("allocatable")), counts)}
        if capacity:
            shaped["capacity"] = _pick(_mapping(status.get("capacity")), capacity)
        return {"metadata": metadata, "status": shaped}

    return shape


def quota_shape(vendors: Iterable[Vendor]) -> Shape:
    tracked = {f"limits.{n}" for v in vendors for n in (v.resources.memory, v.resources.cores) if n}

    def shape(quota: Mapping[str, Any]) -> dict[str, Any]:
        hard = _mapping(_mapping(quota.get("spec")).get("hard"))
        return {"metadata": _metadata(quota), "spec": {"hard": _pick(hard, tracked)}}

    return shape


def lease_shape(lease: Mapping[str, Any]) -> dict[str, Any]:
    spec = _mapping(lease.get("spec"))
    keys = ("holderIdentity", "leaseDurationSeconds", "renewTime", "acquireTime")
    return {"metadata": _metadata(lease), "spec": _pick(spec, keys)}


def content(obj: Mapping[str, Any], locks: Collection[str] = (LOCK_ANNOTATION,)) -> dict[str, Any]:
    """The object without its resourceVersion and node locks (`locks`: their annotation keys): equal
    content means nothing a decision or the registration reads changed."""
    raw = _mapping(obj.get("metadata"))
    metadata = {k: v for k, v in raw.items() if k != "resourceVersion"}
    annotations = _mapping(raw.get("annotations"))
    if any(key in annotations for key in locks):
        metadata["annotations"] = {k: v for k, v in annotations.items() if k not in locks}
    return {**obj, "metadata": metadata}
