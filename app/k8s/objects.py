"""Reading, patching and binding pods and nodes as plain JSON (no client models on the hot path)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from app.k8s.client import DEFAULT_TIMEOUT, Kube
from app.k8s.errors import ApiError, from_exception

MERGE_PATCH = "application/merge-patch+json"


def _json(response: Any) -> dict[str, Any]:
    try:
        data = orjson.loads(response.data)
    finally:
        response.release_conn()
    if not isinstance(data, dict):
        raise ApiError(500, "InternalError", "the API server answered something that is not an object")
    return data


def get_pod(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    try:
        response = kube.core.read_namespaced_pod(
            name, namespace, _preload_content=False, _request_timeout=DEFAULT_TIMEOUT
        )
    except Exception as exc:
        raise from_exception(exc) from None
    return _json(response)


def get_node(kube: Kube, name: str) -> dict[str, Any]:
    try:
        response = kube.core.read_node(name, _preload_content=False, _request_timeout=DEFAULT_TIMEOUT)
    except Exception as exc:
        raise from_exception(exc) from None
    return _json(response)


def _metadata_patch(
    annotations: Mapping[str, str | None],
    labels: Mapping[str, str | None] | None,
    resource_version: str | None,
    uid: str | None = None,
) -> dict[str, Any]:
    """A merge patch of metadata. `resourceVersion` and `uid` in the body are preconditions: the API
    server answers 409 when the object changed, or when it is another object with the same name."""
    metadata: dict[str, Any] = {"annotations": dict(annotations)}
    if labels:
        metadata["labels"] = dict(labels)
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    if uid:
        metadata["uid"] = uid
    return {"metadata": metadata}


def patch_pod_metadata(
    kube: Kube,
    namespace: str,
    name: str,
    annotations: Mapping[str, str | None],
    labels: Mapping[str, str | None] | None = None,
    *,
    resource_version: str | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    """RFC 7386 merge patch of annotations (and labels); None deletes a key. Returns the updated pod."""
    body = _metadata_patch(annotations, labels, resource_version, uid)
    try:
        response = kube.core.patch_namespaced_pod(
            name,
            namespace,
            body,
            _content_type=MERGE_PATCH,
            _preload_content=False,
            _request_timeout=DEFAULT_TIMEOUT,
        )
    except Exception as exc:
        raise from_exception(exc) from None
    return _json(response)


def patch_node_annotations(
    kube: Kube, name: str, annotations: Mapping[str, str | None], *, resource_version: str | None = None
) -> dict[str, Any]:
    """Merge patch of node annotations; with `resource_version` it fails with 409 if the node changed."""
    body = _metadata_patch(annotations, None, resource_version)
    try:
        response = kube.core.patch_node(
            name, body, _content_type=MERGE_PATCH, _preload_content=False, _request_timeout=DEFAULT_TIMEOUT
        )
    except Exception as exc:
        raise from_exception(exc) from None
    return _json(response)


def bind_pod(kube: Kube, namespace: str, name: str, uid: str, node: str) -> None:
    """POST pods/<name>/binding. The v37 client mis-parses the Status answer, so the body is not decoded
    into a model; any non-2xx raises."""
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    if uid:
        body["metadata"]["uid"] = uid
    core: Any = kube.core  # the raw call: the client's V1Binding model cannot parse the Status answer
    try:
        response = core.create_namespaced_pod_binding(
            name, namespace, body, _preload_content=False, _request_timeout=DEFAULT_TIMEOUT
        )
    except Exception as exc:
        raise from_exception(exc) from None
    status = response.status
    response.drain_conn()  # an unread body left in a pooled connection garbles the next answer on it
    response.release_conn()
    if not 200 <= status < 300:
        raise ApiError(status, "BindingFailed", f"binding answered HTTP {status}")


def list_raw(
    kube: Kube, kind: str, *, label_selector: str = "", field_selector: str = "", page_size: int = 500
) -> tuple[list[dict[str, Any]], str]:
    """List all objects of `kind` (pods, nodes, resourcequotas) cluster-wide in pages; returns the items
    and the list's resourceVersion (to start a watch from)."""
    method: Any = {
        "pods": kube.core.list_pod_for_all_namespaces,
        "nodes": kube.core.list_node,
        "resourcequotas": kube.core.list_resource_quota_for_all_namespaces,
    }[kind]
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        kwargs: dict[str, Any] = {
            "limit": page_size,
            "_preload_content": False,
            "_request_timeout": (5.0, 120.0),
        }
        if token:
            kwargs["_continue"] = token
        if label_selector:
            kwargs["label_selector"] = label_selector
        if field_selector:
            kwargs["field_selector"] = field_selector
        try:
            page = _json(method(**kwargs))
        except Exception as exc:
            raise from_exception(exc) from None
        items.extend(page.get("items") or [])
        metadata = page.get("metadata") or {}
        token = metadata.get("continue") or ""
        if not token:
            return items, str(metadata.get("resourceVersion") or "")


def metadata_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = obj.get("metadata")
    return metadata if isinstance(metadata, Mapping) else {}


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    raw = metadata_of(obj).get("annotations")
    return dict(raw) if isinstance(raw, Mapping) else {}


def resource_version(obj: Mapping[str, Any]) -> str:
    return str(metadata_of(obj).get("resourceVersion") or "")
