"""The next version of an object for an update, a patch, a /status write or a binding (pure functions).

kube-apiserver's update rules in one place: identity and system fields (uid, creationTimestamp, name,
namespace, deletion marks) are kept from the stored version, a ``metadata.resourceVersion`` in the new content
is an optimistic-concurrency precondition (409 Conflict when stale), and kinds with a status subresource take
status only through /status and everything else only through the main resource.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

from sim.emulator.errors import STALE, bad_request, conflict, invalid
from sim.emulator.resources import ResourceType
from sim.emulator.store import Entry, JsonObj


def timestamp(offset_seconds: float = 0.0) -> str:
    moment = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=offset_seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(value: str) -> float:
    """Seconds since the epoch of a `timestamp` string (RFC 3339, UTC, whole seconds)."""
    moment = datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    return moment.timestamp()


_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def check_name(kind: str, name: str, label: bool = False) -> None:
    """422 unless `name` is a lowercase RFC 1123 subdomain (a label, for namespaces), as apimachinery says."""
    pattern, what, limit = (_LABEL, "label", 63) if label else (_SUBDOMAIN, "subdomain", 253)
    if len(name) <= limit and pattern.fullmatch(name):
        return
    chars = "'-'" if label else "'-' or '.'"
    example = "'my-name', or '123-abc'" if label else "'example.com'"
    cause = (
        f'metadata.name: Invalid value: "{name}": a lowercase RFC 1123 {what} must consist of lower case '
        f"alphanumeric characters, {chars}, and must start and end with an alphanumeric character "
        f"(e.g. {example}, regex used for validation is '{pattern.pattern}')"
    )
    raise invalid(kind, name, cause, field="metadata.name")


def checked_metadata(obj: JsonObj) -> JsonObj:
    """The object's metadata, if the object decodes as a typed one would (objects where objects go, strings
    where strings go); else 400, as on a real server. Keeps malformed input out of the store."""
    for field in ("spec", "status"):
        if obj.get(field) is not None and not isinstance(obj[field], dict):
            raise bad_request(f"{field} must be a JSON object")
    meta = {} if obj.get("metadata") is None else obj["metadata"]
    if not isinstance(meta, dict):
        raise bad_request("metadata must be a JSON object")
    for field in ("name", "generateName", "namespace", "uid", "resourceVersion"):
        if meta.get(field) is not None and not isinstance(meta[field], str):
            raise bad_request(f"metadata.{field} must be a string")
    for field in ("labels", "annotations"):
        value = meta.get(field)
        if value is not None and not (
            isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
        ):
            raise bad_request(f"metadata.{field} must map strings to strings")
    return meta


def uid_mismatch(wanted: str, actual: str) -> str:
    return f"Precondition failed: UID in precondition: {wanted}, UID in object meta: {actual}"


def updated(rtype: ResourceType, current: Entry, new: JsonObj, subresource: str) -> JsonObj:
    """The object an update or patch stores: identity and system fields kept, resourceVersion precondition
    checked, and status (or everything but status, for /status) taken from the current version."""
    old_meta = current.metadata
    name = old_meta["name"]
    new_meta = checked_metadata(new)
    if new_meta.get("name", name) != name:
        raise bad_request(
            f"the name of the object ({new_meta['name']}) does not match the name on the URL ({name})"
        )
    if rtype.namespaced and new_meta.get("namespace", old_meta["namespace"]) != old_meta["namespace"]:
        raise bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    if new_meta.get("uid") and new_meta["uid"] != old_meta["uid"]:
        raise invalid(
            rtype.kind, name, f'metadata.uid: Invalid value: "{new_meta["uid"]}": field is immutable'
        )
    if new_meta.get("resourceVersion") and new_meta["resourceVersion"] != str(current.rv):
        raise conflict(rtype.plural, rtype.group, name, STALE)
    meta = {
        **new_meta,
        "name": name,
        "uid": old_meta["uid"],
        "creationTimestamp": old_meta["creationTimestamp"],
    }
    if rtype.namespaced:
        meta["namespace"] = old_meta["namespace"]
    for field in ("deletionTimestamp", "deletionGracePeriodSeconds"):
        if field in old_meta:
            meta[field] = old_meta[field]
    if subresource == "status":
        # The status subresource writes status and metadata (labels, annotations: a pod's annotations can
        # change through pods/status), never the spec.
        result = {**current.obj, "metadata": meta}
        if new.get("status") is None:
            result.pop("status", None)
        else:
            result["status"] = new["status"]
        return result
    result = {**new, "kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": meta}
    if rtype.split_status:
        result.pop("status", None)
        if current.obj.get("status") is not None:
            result["status"] = current.obj["status"]
    return result


def binding_target(name: str, binding: Any) -> str:
    """The node a v1 Binding names; 400/422 for a malformed Binding."""
    if not isinstance(binding, dict):
        raise bad_request("the body of the request must be a Binding")
    node = (binding.get("target") or {}).get("name")
    if not node:
        raise invalid("Binding", name, "target.name: Required value")
    bound_name = (binding.get("metadata") or {}).get("name")
    if bound_name and bound_name != name:
        raise bad_request(
            f"the name of the object ({bound_name}) does not match the name on the URL ({name})"
        )
    return str(node)


def bound(current: Entry, name: str, binding: JsonObj, node: str) -> JsonObj:
    """The pod bound to ``node``; 409 if the Binding's uid is not the pod's, or the pod is bound or going."""
    meta, bmeta = current.metadata, binding.get("metadata") or {}
    if bmeta.get("uid") and bmeta["uid"] != meta["uid"]:
        raise conflict("pods/binding", "", name, uid_mismatch(bmeta["uid"], meta["uid"]))
    if meta.get("deletionTimestamp"):
        raise conflict("pods/binding", "", name, f"pod {name} is being deleted, cannot be assigned to a host")
    spec = current.obj.get("spec") or {}
    if spec.get("nodeName"):
        raise conflict(
            "pods/binding", "", name, f'pod {name} is already assigned to node "{spec["nodeName"]}"'
        )
    status = current.obj.get("status") or {}
    scheduled = {
        "type": "PodScheduled",
        "status": "True",
        "lastProbeTime": None,
        "lastTransitionTime": timestamp(),
    }
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
    if bmeta.get("annotations"):
        meta = {**meta, "annotations": {**(meta.get("annotations") or {}), **bmeta["annotations"]}}
    return {
        **current.obj,
        "metadata": meta,
        "spec": {**spec, "nodeName": node},
        "status": {**status, "conditions": [*conditions, scheduled]},
    }
