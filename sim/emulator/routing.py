"""URL path + method -> the Kubernetes request it denotes (resource, namespace, name, subresource, verb).

The same classification drives dispatch, fault-injection matching and the request log, so a fault rule written
as ``verb=create, resource=pods, subresource=binding`` means exactly what kube-apiserver's audit log would
say.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.emulator import resources
from sim.emulator.errors import method_not_allowed, page_not_found
from sim.emulator.resources import NAMESPACES, ResourceType


@dataclass(frozen=True)
class Route:
    rtype: ResourceType
    namespace: str | None  # None: cluster-scoped kind or a list/watch across all namespaces
    name: str
    subresource: str
    verb: str  # get list watch create update patch delete deletecollection


def _split_group_version(parts: list[str]) -> tuple[str, str, list[str]] | None:
    if len(parts) >= 2 and parts[0] == "api":
        return "", parts[1], parts[2:]
    if len(parts) >= 3 and parts[0] == "apis":
        return parts[1], parts[2], parts[3:]
    return None


def _verb(method: str, name: str, subresource: str, watch: bool) -> str:
    if method == "GET":
        if name:
            return "get"
        return "watch" if watch else "list"
    if method == "POST" and not name:
        return "create"
    if method == "POST" and subresource in ("binding", "eviction"):
        return "create"
    if method == "PUT" and name:
        return "update"
    if method == "PATCH" and name:
        return "patch"
    if method == "DELETE":
        return "delete" if name else "deletecollection"
    raise method_not_allowed()


def parse_route(method: str, path: str, watch: bool) -> Route | None:
    """The resource request for ``path``; None when it is not a resource path (discovery and the like)."""
    parts = [p for p in path.split("/") if p]
    split = _split_group_version(parts)
    if split is None or not split[2]:
        return None
    group, version, rest = split
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) >= 3 and resources.by_path(group, version, rest[2]) is not None:
        namespace, rest = rest[1], rest[2:]
    rtype = resources.by_path(group, version, rest[0])
    if rtype is None or len(rest) > 3:
        raise page_not_found()
    name = rest[1] if len(rest) >= 2 else ""
    subresource = rest[2] if len(rest) == 3 else ""
    if subresource and subresource not in rtype.subresources:
        raise page_not_found()
    if rtype.namespaced and namespace is None and name:
        raise page_not_found()
    if not rtype.namespaced and namespace is not None:
        raise page_not_found()
    verb = _verb(method, name, subresource, watch)
    if rtype.namespaced and namespace is None and verb not in ("list", "watch"):
        raise method_not_allowed()  # the all-namespaces path only lists and watches
    if rtype is NAMESPACES and verb == "deletecollection":
        raise method_not_allowed()
    return Route(rtype, namespace, name, subresource, verb)
