"""A small raw-JSON Kubernetes client for the simulated cluster actors (device plugin, kube-scheduler, demo).

The simulated actors talk to the API the way client-go does — GET, LIST, WATCH with bookmarks, merge and
strategic-merge patches with resourceVersion preconditions, the status and binding subresources — but they
need none of the typed models, so this is plain urllib3 + orjson: one pooled connection manager per process,
shared by all threads. Its list+watch loop with a local store is `sim.kit.informer`.
"""

from __future__ import annotations

import base64
import contextlib
import random
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import orjson
import urllib3
import yaml

JSON = "application/json"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
TRANSIENT = frozenset({0, 429, 500, 502, 503, 504})  # statuses a retry may cure (0: no answer)
# ... and, for a client that rides out a kube-apiserver restart, 403: a freshly started kube-apiserver
# denies requests until its RBAC and Node authorizers have synced their caches
RESTARTING = TRANSIENT | {403}
Obj = dict[str, Any]


class KubeError(Exception):
    """A failed API call: the HTTP status (0 = no answer), the Status reason and message."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class ClusterConfig:
    server: str
    token: str = ""
    ca_pem: bytes | None = None
    insecure: bool = False


def load_kubeconfig(path: str | Path) -> ClusterConfig:
    """The current context's server, bearer token and CA (or insecure-skip-tls-verify) of a kubeconfig."""
    data = yaml.safe_load(Path(path).read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a kubeconfig")
    current = data.get("current-context")
    contexts = {c["name"]: c.get("context") or {} for c in data.get("contexts") or []}
    context = contexts.get(current) or (next(iter(contexts.values())) if contexts else {})
    clusters = {c["name"]: c.get("cluster") or {} for c in data.get("clusters") or []}
    users = {u["name"]: u.get("user") or {} for u in data.get("users") or []}
    cluster = clusters.get(context.get("cluster")) or (next(iter(clusters.values())) if clusters else {})
    user = users.get(context.get("user")) or {}
    if not cluster.get("server"):
        raise ValueError(f"{path}: no cluster server")
    ca: bytes | None = None
    if cluster.get("certificate-authority-data"):
        ca = base64.b64decode(cluster["certificate-authority-data"])
    elif cluster.get("certificate-authority"):
        ca = Path(cluster["certificate-authority"]).read_bytes()
    return ClusterConfig(
        server=str(cluster["server"]).rstrip("/"),
        token=str(user.get("token") or ""),
        ca_pem=ca,
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
    )


def pool_manager(
    maxsize: int,
    ca_pem: bytes | None = None,
    insecure: bool = False,
    timeout: float | None = None,
    client_cert: tuple[str, str] | None = None,
) -> urllib3.PoolManager:
    """A connection pool for HTTP or HTTPS (trusting ``ca_pem``, or nothing checked when ``insecure``),
    presenting ``client_cert`` (certificate and key files) when given."""
    kwargs: dict[str, Any] = {"maxsize": maxsize, "block": False, "retries": False}
    if client_cert is not None:
        kwargs["cert_file"], kwargs["key_file"] = client_cert
    if timeout is not None:
        kwargs["timeout"] = urllib3.Timeout(connect=5.0, read=timeout)
    if insecure:
        kwargs["cert_reqs"] = ssl.CERT_NONE
        kwargs["assert_hostname"] = False
    elif ca_pem is not None:
        kwargs["cert_reqs"] = ssl.CERT_REQUIRED
        kwargs["ca_cert_data"] = ca_pem.decode()
    with warnings_quiet():
        return urllib3.PoolManager(**kwargs)


@contextlib.contextmanager
def warnings_quiet() -> Iterator[None]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
        yield


def pod_path(namespace: str, name: str = "", sub: str = "") -> str:
    path = f"/api/v1/namespaces/{namespace}/pods"
    return f"{path}/{name}/{sub}" if sub else (f"{path}/{name}" if name else path)


def node_path(name: str = "", sub: str = "") -> str:
    path = "/api/v1/nodes"
    return f"{path}/{name}/{sub}" if sub else (f"{path}/{name}" if name else path)


def _error(status: int, data: bytes) -> KubeError:
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        body = None
    if isinstance(body, dict):
        return KubeError(status, str(body.get("reason") or ""), str(body.get("message") or ""))
    return KubeError(status, "", data[:200].decode(errors="replace"))


class Kube:
    """Thread-safe raw-JSON API client. Every call raises ``KubeError`` on failure (status 0: no answer)."""

    def __init__(
        self,
        config: ClusterConfig,
        pool_size: int = 32,
        timeout: float = 30.0,
        retries: int = 0,
        retried: frozenset[int] = TRANSIENT,
    ) -> None:
        self.config = config
        self.timeout = timeout
        self.retries = retries
        self.retried = retried  # the statuses `retries` applies to
        self._headers = {"Accept": JSON, "User-Agent": "hami-sim"}
        if config.token:
            self._headers["Authorization"] = f"Bearer {config.token}"
        self._pool = pool_manager(pool_size, config.ca_pem, config.insecure)

    @classmethod
    def from_kubeconfig(
        cls, path: str | Path, pool_size: int = 32, retries: int = 0, retried: frozenset[int] = TRANSIENT
    ) -> Kube:
        return cls(load_kubeconfig(path), pool_size, retries=retries, retried=retried)

    def close(self) -> None:
        self._pool.clear()

    def _url(self, path: str, params: Mapping[str, Any] | None) -> str:
        query = {k: v for k, v in (params or {}).items() if v is not None and v != ""}
        return self.config.server + path + (f"?{urlencode(query)}" if query else "")

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, Any] | None = None,
        content_type: str = JSON,
        timeout: float | None = None,
    ) -> Any:
        """One API call; transient failures (no answer, 429, 5xx) are retried `retries` times with jittered
        backoff, as client-go's callers do (a lost answer to a write is then seen by the retry: 409/404,
        or the same result for an idempotent patch)."""
        headers, data = dict(self._headers), None
        if body is not None:
            data = orjson.dumps(body)
            headers["Content-Type"] = content_type
        url, read = self._url(path, params), timeout or self.timeout
        delay, attempt = 0.05, 0
        while True:
            try:
                return self._send(method, url, data, headers, read)
            except KubeError as exc:
                if exc.status not in self.retried or attempt >= self.retries:
                    raise
            attempt += 1
            time.sleep(delay * (1.0 + random.random()))
            delay = min(delay * 2.0, 1.0)

    def _send(self, method: str, url: str, data: bytes | None, headers: dict[str, str], read: float) -> Any:
        try:
            with warnings_quiet():
                response = self._pool.request(
                    method, url, body=data, headers=headers, timeout=urllib3.Timeout(connect=5.0, read=read)
                )
        except urllib3.exceptions.HTTPError as exc:
            raise KubeError(0, "ConnectionError", str(exc)) from None
        if response.status >= 400:
            raise _error(response.status, response.data)
        return orjson.loads(response.data) if response.data else None

    def exchange(
        self, method: str, path: str, body: Any = None, *, content_type: str = JSON, **params: Any
    ) -> tuple[int, Any]:
        """One call, never raising for an HTTP status: (status, decoded JSON body or None). For tests that
        look at error bodies (the Status object) as well as at successes."""
        headers = dict(self._headers)
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else orjson.dumps(body)
            headers["Content-Type"] = content_type
        with warnings_quiet():
            response = self._pool.request(
                method,
                self._url(path, params),
                body=data,
                headers=headers,
                timeout=urllib3.Timeout(connect=5.0, read=self.timeout),
            )
        try:
            decoded = orjson.loads(response.data) if response.data else None
        except orjson.JSONDecodeError:
            decoded = response.data.decode(errors="replace")
        return response.status, decoded

    # --- verbs ----------------------------------------------------------------------------------------------

    def get(self, path: str) -> Obj:
        result: Obj = self.request("GET", path)
        return result

    def get_or_none(self, path: str) -> Obj | None:
        try:
            return self.get(path)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def list(self, path: str, **params: Any) -> tuple[str, list[Obj]]:
        """All items (following ``continue``) and the list's resourceVersion."""
        items: list[Obj] = []
        token = ""
        while True:
            page = self.request("GET", path, params={**params, "limit": 500, "continue": token})
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            token = meta.get("continue") or ""
            if not token:
                return str(meta.get("resourceVersion") or ""), items

    def create(self, path: str, obj: Obj) -> Obj:
        result: Obj = self.request("POST", path, obj)
        return result

    def patch(self, path: str, patch: Any, content_type: str = MERGE) -> Obj:
        result: Obj = self.request("PATCH", path, patch, content_type=content_type)
        return result

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        """POST pods/<name>/binding (what kube-scheduler's default binder does)."""
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        self.create(pod_path(namespace, name, "binding"), binding)

    def delete(self, path: str, resource_version: str | None = None, grace: int | None = None) -> None:
        options: Obj = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if resource_version is not None:
            options["preconditions"] = {"resourceVersion": resource_version}
        if grace is not None:
            options["gracePeriodSeconds"] = grace
        self.request("DELETE", path, options)

    def watch(
        self,
        path: str,
        resource_version: str,
        stop: threading.Event,
        timeout_seconds: int = 60,
        on_open: Callable[[Callable[[], None]], None] | None = None,
        **params: Any,
    ) -> Iterator[Obj]:
        """Watch events (``{"type", "object"}``) from ``resource_version``, bookmarks included; ends on
        the server's timeout, on ``stop`` (checked at every event or bookmark) or raises KubeError (410).
        ``on_open`` gets, once the stream is open, a callable that interrupts a read blocked on it from
        another thread (an idle watch gets no bookmark, so ``stop`` alone is seen only at the next event)."""
        query = {
            **params,
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": timeout_seconds,
        }
        try:
            with warnings_quiet():
                response = self._pool.request(
                    "GET",
                    self._url(path, query),
                    headers=self._headers,
                    preload_content=False,
                    timeout=urllib3.Timeout(connect=5.0, read=timeout_seconds + 15.0),
                )
        except urllib3.exceptions.HTTPError as exc:
            raise KubeError(0, "ConnectionError", str(exc)) from None
        try:
            if response.status >= 400:
                raise _error(response.status, response.read())
            if on_open is not None:
                on_open(response.shutdown)
            buffer = b""
            for chunk in response.stream(65536):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    event = orjson.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        raise KubeError(
                            int(status.get("code") or 500),
                            str(status.get("reason") or ""),
                            str(status.get("message") or ""),
                        )
                    yield event
                if stop.is_set():
                    return
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            if not stop.is_set():
                raise KubeError(0, "ConnectionError", f"watch interrupted: {exc}") from None
        finally:
            response.close()  # a watch connection is never reused
            response.release_conn()


def atomic_write_json(path: str | Path, payload: Any) -> None:
    """Write JSON so that a reader never sees half of it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("wb", dir=target.parent, delete=False, suffix=".partial") as handle:
        handle.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2))
    Path(handle.name).replace(target)
