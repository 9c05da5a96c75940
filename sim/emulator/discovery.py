"""Legacy (unaggregated) discovery documents and /version.

kubectl resolves resource names, short names and scopes from these; it falls back to legacy discovery because
the emulator never answers with the aggregated ``apidiscovery.k8s.io`` media type. Built from the resource
table.
"""

from __future__ import annotations

from typing import Any

from sim.emulator import resources
from sim.emulator.resources import ResourceType

VERSION = {
    "major": "1",
    "minor": "35",
    "gitVersion": "v1.35.0-sim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}

_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_SUBRESOURCE_VERBS = {"status": ["get", "patch", "update"], "binding": ["create"], "eviction": ["create"]}
# Subresources whose kind lives in another group (kubectl drain finds the eviction API through this).
_SUBRESOURCE_KINDS = {
    "binding": {"kind": "Binding"},
    "eviction": {"group": "policy", "version": "v1", "kind": "Eviction"},
}


def _resource_docs(rtype: ResourceType) -> list[dict[str, Any]]:
    main: dict[str, Any] = {
        "name": rtype.plural,
        "singularName": rtype.singular,
        "namespaced": rtype.namespaced,
        "kind": rtype.kind,
        "verbs": [v for v in _VERBS if not (rtype is resources.NAMESPACES and v == "deletecollection")],
    }
    if rtype.short_names:
        main["shortNames"] = list(rtype.short_names)
    if rtype is resources.PODS:
        main["categories"] = ["all"]
    subs = [
        {
            "name": f"{rtype.plural}/{sub}",
            "singularName": "",
            "namespaced": rtype.namespaced,
            "kind": rtype.kind,
            **_SUBRESOURCE_KINDS.get(sub, {}),
            "verbs": _SUBRESOURCE_VERBS[sub],
        }
        for sub in rtype.subresources
    ]
    return [main, *subs]


def _group(name: str) -> dict[str, Any]:
    versions = sorted({r.version for r in resources.ALL if r.group == name})
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def document(path: str, server_address: str) -> dict[str, Any] | None:
    """The discovery document served at ``path``, or None."""
    parts = [p for p in path.split("/") if p]
    if parts == ["version"]:
        return VERSION
    if parts == ["api"]:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
        }
    if parts == ["apis"]:
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(g) for g in resources.GROUPS]}
    if len(parts) == 2 and parts[0] == "apis" and parts[1] in resources.GROUPS:
        return {"kind": "APIGroup", "apiVersion": "v1", **_group(parts[1])}
    if (len(parts) == 2 and parts[0] == "api") or (len(parts) == 3 and parts[0] == "apis"):
        group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
        served = resources.in_group_version(group, version)
        if not served:
            return None
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": [doc for rtype in served for doc in _resource_docs(rtype)],
        }
    return None
