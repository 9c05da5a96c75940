"""A list+watch loop over `sim.kit.kube.Kube` that keeps a local store and calls a handler for every change:
the part of client-go's shared informer the simulated actors need (the kubelets and device plugins, the
simulated kube-scheduler, the chaos storm's journal, the benchmark's pod watcher).

Why a module of its own: `Kube` is the request side (one call, one answer); this is the long-running side
(a thread per watched path), which only the actors and the watchers need.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from sim.kit.kube import Kube, KubeError, Obj

logger = logging.getLogger(__name__)


def object_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or ""
    return f"{namespace}/{meta.get('name', '')}" if namespace else str(meta.get("name", ""))


Handler = Callable[[str, Obj, Obj | None], None]


class Informer:
    """List, then watch from the list's version, keeping ``store`` (key -> latest object) up to date and
    calling ``handler(type, obj, old)`` for ADDED, MODIFIED and DELETED; relists on 410 Expired (emitting
    the differences), rewatches after a dropped connection with a short backoff. Runs in its own thread."""

    def __init__(self, kube: Kube, path: str, handler: Handler, name: str, **params: Any) -> None:
        self.kube = kube
        self.path = path
        self.params = params
        self.handler = handler
        self.store: dict[str, Obj] = {}
        self.synced = threading.Event()
        self.stop_event = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._interrupt: Callable[[], None] | None = None
        self._interrupt_lock = threading.Lock()

    def start(self) -> Informer:
        self._thread.start()
        return self

    def stop(self, wait: float = 5.0) -> None:
        """Stop the loop: the open watch is interrupted at once (an idle one would otherwise block until
        its next event or its timeout), then the thread is joined."""
        self.stop_event.set()
        with self._interrupt_lock:
            if self._interrupt is not None:
                self._interrupt()
        if self._thread.is_alive():
            self._thread.join(wait)

    def _opened(self, interrupt: Callable[[], None]) -> None:
        with self._interrupt_lock:
            self._interrupt = interrupt
            if self.stop_event.is_set():  # stopped while the watch was being opened
                interrupt()

    def _emit(self, kind: str, obj: Obj) -> None:
        key = object_key(obj)
        old = self.store.get(key)
        if kind == "DELETED":
            self.store.pop(key, None)
        else:
            self.store[key] = obj
            if old is None:
                kind = "ADDED"
        try:
            self.handler(kind, obj, old)
        except Exception:
            logger.exception("informer %s: handler failed", self._thread.name)

    def _relist(self) -> str:
        version, items = self.kube.list(self.path, **self.params)
        seen = set()
        for item in items:
            key = object_key(item)
            seen.add(key)
            old = self.store.get(key)
            if old is None or old.get("metadata", {}).get("resourceVersion") != item["metadata"].get(
                "resourceVersion"
            ):
                self._emit("MODIFIED" if old else "ADDED", item)
        for key in [k for k in self.store if k not in seen]:
            self._emit("DELETED", self.store[key])
        self.synced.set()
        return version

    def _run(self) -> None:
        version = ""
        delay = 0.1
        while not self.stop_event.is_set():
            try:
                if not version:
                    version = self._relist()
                events = self.kube.watch(
                    self.path, version, self.stop_event, on_open=self._opened, **self.params
                )
                for event in events:
                    obj = event.get("object") or {}
                    rv = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    if event.get("type") != "BOOKMARK":
                        self._emit(str(event.get("type")), obj)
                    version = rv
                delay = 0.1
            except KubeError as exc:
                if exc.status == 410:
                    version = ""
                    continue
                if self.stop_event.is_set():
                    return
                logger.debug("informer %s: %s; retrying", self._thread.name, exc)
                if exc.status != 0:
                    version = ""
                self.stop_event.wait(delay)
                delay = min(delay * 2, 2.0)
