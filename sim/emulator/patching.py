"""The three PATCH flavours kube-apiserver accepts, chosen by Content-Type.

Stored objects are shared, never mutated: merge and strategic merge build new containers only along the
patched paths; JSON patch works on a private copy. Strategic merge covers what clients of this project and
``kubectl apply`` send: maps merge, ``null`` deletes, the list fields below merge by their patch merge key
(with ``$patch: delete`` items), ``finalizers`` merges as a set, ``$setElementOrder``/``$retainKeys``
directives are ignored, and every other list is replaced.
"""

from __future__ import annotations

from typing import Any

import jsonpatch
import orjson

from sim.emulator.errors import ApiError, bad_request

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"

# Field name -> patch merge key, from the patchMergeKey tags of the core/v1 types.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "conditions": "type",
    "addresses": "type",
    "ownerReferences": "uid",
}
SET_LISTS = frozenset({"finalizers"})


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch; ``target`` is left untouched."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Strategic merge patch for the cases listed in the module docstring; ``target`` is left untouched."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS and isinstance(result.get(key), list):
            result[key] = _merge_keyed_list(result[key], value, MERGE_KEYS[key])
        elif isinstance(value, list) and key in SET_LISTS and isinstance(result.get(key), list):
            result[key] = list(dict.fromkeys([*result[key], *value]))
        elif isinstance(value, list):
            result[key] = [_without_directives(item) for item in value]
        else:
            result[key] = strategic_merge_patch(result.get(key), value)
    return result


def _merge_keyed_list(current: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    merged = list(current)
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise bad_request(f"map in the patch list has no merge key {merge_key!r}: {item!r}")
        index = next(
            (
                i
                for i, old in enumerate(merged)
                if isinstance(old, dict) and old.get(merge_key) == item[merge_key]
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del merged[index]
        elif index is None:
            merged.append(_without_directives(item))
        else:
            merged[index] = strategic_merge_patch(merged[index], item)
    return merged


def _without_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_directives(v) for k, v in value.items() if not k.startswith("$")}
    return value


def _missing_member(document: Any, operation: Any) -> bool:
    """A ``test`` of ``null`` at a member its object lacks: kube-apiserver's JSON patch library
    (gopkg.in/evanphx/json-patch.v4, `Patch.test`) lets it pass, where RFC 6902 would fail it (a client
    uses it as "only if absent", app/k8s/objects.py). The object itself must exist."""
    if not isinstance(operation, dict) or operation.get("op") != "test" or operation.get("value") is not None:
        return False
    try:
        pointer = jsonpatch.JsonPointer(operation.get("path", ""))
        parent, key = pointer.to_last(document)
    except (jsonpatch.JsonPointerException, TypeError):
        return False
    return isinstance(parent, dict) and isinstance(key, str) and key not in parent


def json_patch(document: dict[str, Any], operations: Any) -> Any:
    """RFC 6902 on a private copy, as kube-apiserver applies it (a ``test`` of ``null`` passes on a missing
    member); a failed ``test`` or an inapplicable operation is 422 Invalid."""
    if not isinstance(operations, list):
        raise bad_request("json patch must be a list of operations")
    copy = orjson.loads(orjson.dumps(document))
    try:
        for operation in operations:
            if not _missing_member(copy, operation):
                copy = jsonpatch.JsonPatch([operation]).apply(copy, in_place=True)
        return copy
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, KeyError, TypeError) as error:
        raise ApiError(
            422, f"the server rejected our request due to an error in our request: {error}"
        ) from error


def apply_patch(content_type: str, document: dict[str, Any], patch: Any) -> Any:
    """Dispatch on the request's Content-Type (parameters after ``;`` ignored)."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media == MERGE_PATCH:
        return merge_patch(document, patch)
    if media == STRATEGIC_MERGE_PATCH:
        return strategic_merge_patch(document, patch)
    if media == JSON_PATCH:
        return json_patch(document, patch)
    raise ApiError(
        415,
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{JSON_PATCH}, {MERGE_PATCH}, {STRATEGIC_MERGE_PATCH}",
    )
