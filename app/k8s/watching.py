"""List and watch as raw JSON, for the registration worker's informers.

`list_objects` pages through a collection and strips every object as its page arrives (a 5,000-node list
never sits in memory whole with managedFields and status); `WatchStream` streams one watch request from a
resourceVersion, with bookmarks, and ends on the server's timeout, a dropped connection or `close()` from
another thread.

Why not `kubernetes.watch.Watch().stream(..., deserialize=False)`: in client v37 the raw mode reads
`event["raw_object"]` for ERROR events, a key only the deserializing path sets, so a 410 Expired arrives as
a KeyError; and it never records the resourceVersion, so its automatic resume restarts from the first
version and replays history. We send the same request (`watch=True`, `_preload_content=False`) and split
lines with the client's own `iter_resp_lines`.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from kubernetes import client
from kubernetes.watch.watch import iter_resp_lines

from app.k8s.client import Kube
from app.k8s.errors import ApiError, from_exception

Strip = Callable[[Mapping[str, Any]], dict[str, Any]]
LIST_TIMEOUT = (5.0, 120.0)
READ_SLACK = 15.0  # seconds a watch may stay silent beyond its server-side timeout


class Expired(ApiError):
    """410 Gone: the resourceVersion left the server's window; the caller must list again."""


@dataclass(frozen=True, slots=True)
class Target:
    """One collection: `kind` is pods, nodes, resourcequotas, podgroups or leases (leases need a
    namespace)."""

    kind: str
    namespace: str = ""
    label_selector: str = ""
    field_selector: str = ""


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED or BOOKMARK
    object: dict[str, Any]

    @property
    def resource_version(self) -> str:
        metadata = self.object.get("metadata")
        return str(metadata.get("resourceVersion") or "") if isinstance(metadata, Mapping) else ""


def _method(kube: Kube, target: Target) -> Callable[..., Any]:
    """The client call for `target`, with the namespace bound when there is one."""
    core: Any = kube.core
    coordination: Any = kube.coordination
    if target.kind == "podgroups":  # scheduling.k8s.io/v1beta1 (app/k8s/workload.py): every namespace
        return client.SchedulingV1beta1Api(kube.api).list_pod_group_for_all_namespaces
    if target.kind == "leases":
        if not target.namespace:
            raise ValueError("leases are listed in one namespace")
        return lambda **kw: coordination.list_namespaced_lease(target.namespace, **kw)
    if target.namespace and target.kind in ("pods", "resourcequotas"):
        namespaced = {"pods": core.list_namespaced_pod, "resourcequotas": core.list_namespaced_resource_quota}
        method = namespaced[target.kind]
        return lambda **kw: method(target.namespace, **kw)
    calls: dict[str, Callable[..., Any]] = {
        "pods": core.list_pod_for_all_namespaces,
        "nodes": core.list_node,
        "resourcequotas": core.list_resource_quota_for_all_namespaces,
    }
    return calls[target.kind]


def _selectors(target: Target) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    if target.label_selector:
        kwargs["label_selector"] = target.label_selector
    if target.field_selector:
        kwargs["field_selector"] = target.field_selector
    return kwargs


def list_objects(
    kube: Kube,
    target: Target,
    strip: Strip,
    *,
    page_size: int = 500,
    on_page: Callable[[], None] | None = None,
) -> tuple[list[dict[str, Any]], str]:
    """Every object of `target`, stripped, and the list's resourceVersion (to watch from)."""
    method = _method(kube, target)
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        kwargs = {
            **_selectors(target),
            "limit": page_size,
            "_preload_content": False,
            "_request_timeout": LIST_TIMEOUT,
        }
        if token:
            kwargs["_continue"] = token
        try:
            response = method(**kwargs)
            try:
                page = orjson.loads(response.data)
            finally:
                response.release_conn()
        except Exception as exc:
            raise from_exception(exc) from None
        if not isinstance(page, dict):
            raise ApiError(500, "InternalError", "the API server answered a list that is not an object")
        items.extend(strip(item) for item in page.get("items") or () if isinstance(item, Mapping))
        if on_page is not None:
            on_page()
        metadata = page.get("metadata") or {}
        token = metadata.get("continue") or ""
        if not token:
            return items, str(metadata.get("resourceVersion") or "")


def _status_error(status: Mapping[str, Any]) -> ApiError:
    code = status.get("code")
    reason = str(status.get("reason") or "")
    message = str(status.get("message") or "watch error")
    if code == 410:
        return Expired(410, reason or "Expired", message)
    return ApiError(code if isinstance(code, int) else 500, reason, message)


class WatchStream:
    """One watch request; iterate for events. Raises Expired (410) or ApiError (status 0: connection)."""

    def __init__(self, kube: Kube, target: Target, resource_version: str, timeout_seconds: int) -> None:
        self._method = _method(kube, target)
        self._target = target
        self._resource_version = resource_version
        self._timeout = timeout_seconds
        self._response: Any = None
        self._closed = False

    def __iter__(self) -> Iterator[WatchEvent]:
        kwargs = {
            **_selectors(self._target),
            "watch": True,
            "resource_version": self._resource_version,
            "allow_watch_bookmarks": True,
            "timeout_seconds": self._timeout,
            "_preload_content": False,
            "_request_timeout": (5.0, self._timeout + READ_SLACK),
        }
        try:
            self._response = self._method(**kwargs)
        except Exception as exc:
            error = from_exception(exc)
            raise (Expired(410, error.reason, error.message) if error.status == 410 else error) from None
        try:
            yield from self._events()
        finally:
            response, self._response = self._response, None
            response.close()
            response.release_conn()

    def _events(self) -> Iterator[WatchEvent]:
        try:
            for line in iter_resp_lines(self._response):
                if not line:
                    continue
                event = orjson.loads(line)
                kind, obj = event.get("type"), event.get("object")
                if not isinstance(obj, dict):
                    continue
                if kind == "ERROR":
                    raise _status_error(obj)
                yield WatchEvent(str(kind), obj)
        except ApiError:
            raise
        except Exception as exc:
            if self._closed:
                return
            if isinstance(exc, orjson.JSONDecodeError):
                raise ApiError(0, "ConnectionError", f"truncated watch event: {exc}") from None
            raise from_exception(exc) from None

    def close(self) -> None:
        """Abort from another thread: shut the socket so the blocked read returns at once."""
        self._closed = True
        response = self._response
        connection = getattr(response, "connection", None) if response is not None else None
        sock = getattr(connection, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
