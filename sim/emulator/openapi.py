"""The smallest OpenAPI v3 that lets ``kubectl apply/create/replace`` run with its default validation.

kubectl first asks whether the server validates fields itself: it looks, in /openapi/v3, for the PATCH
operation of the object's group-version-kind and its ``fieldValidation`` query parameter. Without an answer it
fails with "failed to download openapi". These documents declare exactly that and nothing more (no schemas),
so kubectl leaves validation to the server and computes apply patches from its built-in types. The emulator
accepts ``fieldValidation`` but does not reject unknown fields (see docs/emulator.md).
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from sim.emulator import resources
from sim.emulator.resources import ResourceType


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _item_path(rtype: ResourceType) -> str:
    scope = "/namespaces/{namespace}" if rtype.namespaced else ""
    return f"/{_gv_path(rtype.group, rtype.version)}{scope}/{rtype.plural}/{{name}}"


def _group_version_doc(group: str, version: str) -> dict[str, Any]:
    paths = {
        _item_path(rtype): {
            "patch": {
                "operationId": f"patch{rtype.kind}",
                "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": rtype.kind},
                "parameters": [
                    {
                        "name": "fieldValidation",
                        "in": "query",
                        "schema": {"type": "string", "uniqueItems": True},
                    }
                ],
                "responses": {"200": {"description": "OK"}},
            }
        }
        for rtype in resources.in_group_version(group, version)
    }
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.35.0-sim"}, "paths": paths}


_DOCS: dict[str, bytes] = {
    _gv_path(g, v): orjson.dumps(_group_version_doc(g, v))
    for g, v in dict.fromkeys((r.group, r.version) for r in resources.ALL)
}
_ROOT = orjson.dumps(
    {
        "paths": {
            path: {
                "serverRelativeURL": f"/openapi/v3/{path}?hash={hashlib.sha256(doc).hexdigest()[:32].upper()}"
            }
            for path, doc in _DOCS.items()
        }
    }
)


def document(path: str) -> bytes | None:
    """The OpenAPI v3 document at ``path`` (``/openapi/v3`` or ``/openapi/v3/api/v1``...), or None."""
    if path.rstrip("/") == "/openapi/v3":
        return _ROOT
    prefix = "/openapi/v3/"
    return _DOCS.get(path[len(prefix) :].strip("/")) if path.startswith(prefix) else None
