"""The resource types the emulator serves, in one table.

Routing, discovery, field selectors, status handling and the bulk seeding endpoint all look resources up here,
so adding a kind is one row. Field labels are the ones kube-apiserver accepts for each kind (anything else is
a 400, as on a real server).
"""

from __future__ import annotations

from dataclasses import dataclass

COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    field_labels: frozenset[str] = COMMON_FIELDS
    # Pods and nodes: status changes only through /status, spec/metadata only through the main resource.
    split_status: bool = False

    @property
    def key(self) -> str:
        """Unique name: the plural, qualified by the group outside core (``events.events.k8s.io``)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()


_POD_FIELDS = COMMON_FIELDS | {
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
}
_EVENT_FIELDS = COMMON_FIELDS | {
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "type",
}
_EVENTS_V1_FIELDS = COMMON_FIELDS | {
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "regarding.resourceVersion",
    "regarding.fieldPath",
    "reason",
    "reportingController",
    "type",
}

PODS = ResourceType(
    "",
    "v1",
    "pods",
    "Pod",
    True,
    ("po",),
    ("binding", "status", "eviction"),
    _POD_FIELDS,
    split_status=True,
)
NODES = ResourceType(
    "",
    "v1",
    "nodes",
    "Node",
    False,
    ("no",),
    ("status",),
    COMMON_FIELDS | {"spec.unschedulable"},
    split_status=True,
)
NAMESPACES = ResourceType(
    "", "v1", "namespaces", "Namespace", False, ("ns",), ("status",), COMMON_FIELDS | {"status.phase"}, True
)
RESOURCE_QUOTAS = ResourceType(
    "", "v1", "resourcequotas", "ResourceQuota", True, ("quota",), ("status",), split_status=True
)
EVENTS = ResourceType("", "v1", "events", "Event", True, ("ev",), (), _EVENT_FIELDS)
EVENTS_V1 = ResourceType("events.k8s.io", "v1", "events", "Event", True, ("ev",), (), _EVENTS_V1_FIELDS)
LEASES = ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True)
PDBS = ResourceType(
    "policy",
    "v1",
    "poddisruptionbudgets",
    "PodDisruptionBudget",
    True,
    ("pdb",),
    ("status",),
    split_status=True,
)

# DRA (resource.k8s.io/v1, GA in 1.34): the objects the registration worker reads (workers/dra.py).
DEVICE_CLASSES = ResourceType("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False)
RESOURCE_SLICES = ResourceType(
    "resource.k8s.io",
    "v1",
    "resourceslices",
    "ResourceSlice",
    False,
    (),
    (),
    COMMON_FIELDS | {"spec.nodeName", "spec.driver", "spec.pool.name"},
)

ALL: tuple[ResourceType, ...] = (
    PODS,
    NODES,
    NAMESPACES,
    RESOURCE_QUOTAS,
    EVENTS,
    EVENTS_V1,
    LEASES,
    PDBS,
    DEVICE_CLASSES,
    RESOURCE_SLICES,
)
GROUPS: tuple[str, ...] = tuple(dict.fromkeys(r.group for r in ALL if r.group))

_BY_PATH = {(r.group, r.version, r.plural): r for r in ALL}
_BY_KEY = {r.key: r for r in ALL}
_BY_KIND = {(r.api_version, r.kind): r for r in ALL}


def by_path(group: str, version: str, plural: str) -> ResourceType | None:
    return _BY_PATH.get((group, version, plural))


def by_key(key: str) -> ResourceType | None:
    """``pods``, ``nodes``, ``leases.coordination.k8s.io``; a plural alone also finds a group's only kind."""
    found = _BY_KEY.get(key)
    if found is not None:
        return found
    matches = [r for r in ALL if r.plural == key]
    return matches[0] if len(matches) == 1 else None


def by_kind(api_version: str, kind: str) -> ResourceType | None:
    return _BY_KIND.get((api_version, kind))


def in_group_version(group: str, version: str) -> tuple[ResourceType, ...]:
    return tuple(r for r in ALL if r.group == group and r.version == version)
