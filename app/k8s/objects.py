"""Reading, patching and binding pods and nodes as plain JSON (no client models on the hot path).

These calls go straight to the kubernetes client's urllib3 pool (`_call`) instead of through its generated
API methods. Every /filter PATCHes the pod and every /bind makes three or four of these calls, and the
generated methods (v37) spend about 0.5 ms of CPU per call before any byte is sent: pydantic validation of
the arguments, recursive serialisation of the body, and a scan of the whole process environment for proxy
variables on every request (its cost grows with the environment; kubelet injects several variables per
Service). Measured against the API emulator: 1.1 ms -> 0.6 ms of CPU per PATCH (docs/benchmarks.md). The
requests are the same HTTP requests (method, path, body, content type), and everything the client's
configuration decides still applies: the host, the TLS settings and any proxy live in the pool, the bearer
token comes from `auth_settings()` (which runs the client's token-refresh hook; its answer is reused for up
to a second, `_headers`), and the default headers are the client's. The events the processes post and
/bind's LIST of the pods on its node (issue 20) take the same path. Other lists and the watches, which are
neither frequent nor latency-bound, keep the generated methods.
"""

from __future__ import annotations

import functools
import time
import weakref
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

import orjson
import urllib3

from app.k8s import exchange
from app.k8s.client import DEFAULT_TIMEOUT, Kube
from app.k8s.errors import ApiError, from_exception, from_response

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
JSON = "application/json"
_TIMEOUT = urllib3.Timeout(connect=DEFAULT_TIMEOUT[0], read=DEFAULT_TIMEOUT[1])


AUTH_TTL = 1.0  # seconds the credentials of `auth_settings()` are reused for (see `_headers`)
_clock = time.monotonic
_headers_cache: weakref.WeakKeyDictionary[Any, tuple[float, dict[str, str], bytes]] = (
    weakref.WeakKeyDictionary()
)


def _headers(kube: Kube) -> tuple[dict[str, str], bytes]:
    """The client's default headers and credentials, re-read at most every AUTH_TTL seconds per client, as
    a dict and as encoded header lines (`exchange.header_lines`).

    `auth_settings()` runs the client's token-refresh hook, which for a kubeconfig re-applies the whole
    loaded configuration each time (~90 us of CPU, and /bind makes four calls); the hook refreshes a token
    only once it expired (kubeconfig) or once a minute (in-cluster), so a second's reuse changes nothing
    but that cost."""
    configuration, now = kube.api.configuration, _clock()
    cached = _headers_cache.get(configuration)
    if cached is not None and now - cached[0] < AUTH_TTL:
        return cached[1], cached[2]
    headers = {**kube.api.default_headers, "Accept": JSON}
    for auth in configuration.auth_settings().values():
        headers[auth["key"]] = auth["value"]
    lines = exchange.header_lines(headers)
    _headers_cache[configuration] = (now, headers, lines)
    return headers, lines


def _pool(manager: urllib3.PoolManager, host: str) -> tuple[urllib3.HTTPConnectionPool, str]:
    """The pool of the API server's `host` URL and the path prefix it carries (a proxied API such as
    `https://rancher/k8s/clusters/c-1`). What `PoolManager.request` does for each call — parse the URL,
    look the pool up, encode the (already encoded) body, wrap the headers — costs more CPU than the
    request's own HTTP work; the request is the same (redirects are not followed: the API server sends
    none)."""
    scheme, name, port, prefix = _parsed(host)
    return manager.connection_from_host(name, port=port, scheme=scheme), prefix


@functools.lru_cache(maxsize=16)
def _parsed(host: str) -> tuple[str | None, str | None, int | None, str]:
    """The scheme, host name, port and path prefix of the configuration's `host` URL (parsed once)."""
    url = urllib3.util.parse_url(host)
    return url.scheme, url.host, url.port, (url.path or "").rstrip("/")


def _call(kube: Kube, method: str, path: str, body: Any = None, content_type: str = JSON) -> bytes:
    """One request through the client's connection pool; the answer's body, or ApiError."""
    configuration = kube.api.configuration
    headers, lines = _headers(kube)
    payload = orjson.dumps(body) if body is not None else None
    manager = kube.api.rest_client.pool_manager
    try:
        if type(manager) is urllib3.PoolManager:  # no proxy: straight to the host's pool (see `_pool`)
            pool, prefix = _pool(manager, configuration.host)
            if payload is not None:
                lines += b"Content-Type: " + content_type.encode("latin-1") + b"\r\n"
            length = len(payload) if payload is not None else None
            head = exchange.request_head(method, prefix + path, exchange.host_header(pool), lines, length)
            answer = exchange.send(
                pool,
                head,
                payload,
                connect_timeout=DEFAULT_TIMEOUT[0],
                read_timeout=DEFAULT_TIMEOUT[1],
                method=method,
            )
            status, reason, data = answer.status, answer.reason, answer.body
        else:  # a ProxyManager decides how the request goes through the proxy
            status, reason, data = _through_proxy(
                manager, method, configuration.host + path, headers, payload, content_type
            )
    except Exception as exc:
        raise from_exception(exc) from None
    if not 200 <= status < 300:
        raise from_response(status, reason, data)
    return data


def _through_proxy(
    manager: Any, method: str, url: str, headers: dict[str, str], payload: bytes | None, content_type: str
) -> tuple[int, str, bytes]:
    """The request through urllib3's ProxyManager (a proxy configured for the client)."""
    headers = {**headers, "Content-Type": content_type} if payload is not None else headers
    response = manager.request(
        method, url, body=payload, headers=headers, timeout=_TIMEOUT, retries=False, preload_content=False
    )
    try:
        data = response.data  # read it all: a pooled connection must not keep an unread body
    finally:
        response.release_conn()
    return response.status, response.reason or "", bytes(data)


def _object(data: bytes) -> dict[str, Any]:
    decoded = orjson.loads(data)
    if not isinstance(decoded, dict):
        raise ApiError(500, "InternalError", "the API server answered something that is not an object")
    return decoded


def _pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"


def _node_path(name: str) -> str:
    return f"/api/v1/nodes/{quote(name, safe='')}"


def _json(response: Any) -> dict[str, Any]:
    try:
        data = orjson.loads(response.data)
    finally:
        response.release_conn()
    if not isinstance(data, dict):
        raise ApiError(500, "InternalError", "the API server answered something that is not an object")
    return data


def get_pod(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    return _object(_call(kube, "GET", _pod_path(namespace, name)))


def get_node(kube: Kube, name: str) -> dict[str, Any]:
    return _object(_call(kube, "GET", _node_path(name)))


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
    return _object(_call(kube, "PATCH", _pod_path(namespace, name), body, MERGE_PATCH))


def patch_node_annotations(
    kube: Kube, name: str, annotations: Mapping[str, str | None], *, resource_version: str | None = None
) -> dict[str, Any]:
    """Merge patch of node annotations; with `resource_version` it fails with 409 if the node changed."""
    body = _metadata_patch(annotations, None, resource_version)
    return _object(_call(kube, "PATCH", _node_path(name), body, MERGE_PATCH))


def _pointer(*keys: str) -> str:
    """An RFC 6901 JSON pointer to `keys` (`~` and `/` escaped)."""
    return "".join("/" + key.replace("~", "~0").replace("/", "~1") for key in keys)


def add_node_annotation_if_absent(kube: Kube, name: str, key: str, value: str) -> dict[str, Any]:
    """Set the node's annotation `key` only where it is absent, without reading the node: a JSON patch
    `test` of `null` at the key, then `add`. kube-apiserver applies JSON patches with evanphx/json-patch v4
    (k8s.io/apiserver handlers/patch.go), whose `test` of `null` passes on a missing member, and answers
    422 when a test fails: the annotation present (any value), or the node without annotations at all.
    Returns the updated node; raises ApiError (422, 404, ...)."""
    path = _pointer("metadata", "annotations", key)
    body = [{"op": "test", "path": path, "value": None}, {"op": "add", "path": path, "value": value}]
    return _object(_call(kube, "PATCH", _node_path(name), body, JSON_PATCH))


def bind_pod(kube: Kube, namespace: str, name: str, uid: str, node: str) -> None:
    """POST pods/<name>/binding; any non-2xx raises (the answer, a Status, is not needed)."""
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    if uid:
        body["metadata"]["uid"] = uid
    _call(kube, "POST", _pod_path(namespace, name) + "/binding", body)


def pods_on_node(kube: Kube, node: str, page_size: int = 500) -> list[dict[str, Any]]:
    """Every pod bound to `node`, as the API shows them now (a LIST without resourceVersion: a consistent
    read; Kubernetes >= 1.31 serves it from the watch cache's spec.nodeName index). Every /bind makes it,
    so it goes through `_call` (the same request as the generated method's, without its CPU)."""
    items: list[dict[str, Any]] = []
    query = {"fieldSelector": f"spec.nodeName={node}", "limit": str(page_size)}
    while True:
        page = _object(_call(kube, "GET", "/api/v1/pods?" + urlencode(query)))
        found = page.get("items")
        items.extend(item for item in found or () if isinstance(item, dict))
        token = str(metadata_of(page).get("continue") or "")
        if not token:
            return items
        query["continue"] = token


def create_event(kube: Kube, namespace: str, event: Mapping[str, Any]) -> None:
    """POST a core/v1 Event (the answer is not needed); any non-2xx raises ApiError."""
    _call(kube, "POST", f"/api/v1/namespaces/{quote(namespace, safe='')}/events", event)


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


def get_json(kube: Kube, path: str) -> dict[str, Any]:
    """GET an API path (a list, an object) as JSON, through the same pool and credentials as the rest."""
    return _object(_call(kube, "GET", path))
