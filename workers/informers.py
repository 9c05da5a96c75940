"""List + watch, one thread per collection, handing plain-dict changes to a handler (client-go's reflector).

Each informer lists (paged, stripped by its shape), hands the differences from what it held before to its
handler (so a re-list after a gap reports the deletions that happened in between, like client-go's
DeltaFIFO.Replace), then watches from the list's resourceVersion with bookmarks. A clean end of the watch
(server timeout) re-watches from the last version; a dropped connection or an API error backs off
(exponential, jittered) and re-watches from the last version; 410 Expired re-lists at once.

The handler runs before the informer's own store is updated; when it raises, the informer re-lists (with
backoff), so the change is delivered again rather than lost. Handlers run in the informer's thread.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.k8s.client import Kube
from app.k8s.errors import ApiError
from app.k8s.watching import Expired, Target, WatchStream, list_objects
from workers.shapes import Shape

logger = logging.getLogger(__name__)

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"


@dataclass(frozen=True, slots=True)
class Change:
    type: str  # ADDED, MODIFIED or DELETED
    obj: dict[str, Any]  # the object now (for DELETED: its last state)
    old: dict[str, Any] | None  # what the informer held before, if anything


Handler = Callable[[Sequence[Change]], None]
Key = Callable[[Mapping[str, Any]], str]


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = obj.get("metadata")
    return metadata if isinstance(metadata, Mapping) else {}


def by_name(obj: Mapping[str, Any]) -> str:
    metadata = _metadata(obj)
    return f"{metadata.get('namespace') or ''}/{metadata.get('name') or ''}"


def by_uid(obj: Mapping[str, Any]) -> str:
    return str(_metadata(obj).get("uid") or by_name(obj))


def _version(obj: Mapping[str, Any]) -> str:
    return str(_metadata(obj).get("resourceVersion") or "")


@dataclass(frozen=True, slots=True)
class Backoff:
    first: float = 0.5
    factor: float = 2.0
    cap: float = 30.0
    jitter: float = 0.5

    def delay(self, failures: int) -> float:
        base = min(self.cap, self.first * self.factor ** max(0, failures - 1))
        return base * (1 + self.jitter * random.random())


class Informer:
    def __init__(
        self,
        kube: Kube,
        target: Target,
        shape: Shape,
        key: Key,
        handler: Handler,
        *,
        on_restart: Callable[[str, str], None],
        watch_timeout: tuple[int, int] = (60, 120),
        backoff: Backoff = Backoff(),
    ) -> None:
        self.target = target
        self.synced = threading.Event()
        self._kube = kube
        self._shape = shape
        self._key = key
        self._handler = handler
        self._on_restart = on_restart
        self._watch_timeout = watch_timeout
        self._backoff = backoff
        self._store: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stream: WatchStream | None = None
        self._thread = threading.Thread(target=self._run, name=f"informer-{target.kind}", daemon=True)

    # -- reading ------------------------------------------------------------------------------------------

    def items(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._store.values())

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            return self._store.get(key)

    def keys(self) -> set[str]:
        with self._lock:
            return set(self._store)

    # -- lifecycle ----------------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.close()

    def join(self, timeout: float) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        version, failures = "", 0
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                if not version:
                    version = self._relist()
                version = self._watch(version)
                failures = 0 if time.monotonic() - started >= 1.0 else failures + 1
            except Expired:
                self._restart("expired")
                version, failures = "", 0
            except ApiError as exc:
                self._restart("dropped" if exc.status == 0 else "error", exc)
                failures += 1
            except Exception as exc:  # a handler failed: list again so the change is delivered again
                logger.exception("informer handler failed", extra={"resource": self.target.kind})
                self._restart("handler", exc)
                version, failures = "", failures + 1
            if failures and not self._stop.is_set():
                self._stop.wait(self._backoff.delay(failures))

    def _restart(self, reason: str, error: Exception | None = None) -> None:
        if self._stop.is_set():
            return
        self._on_restart(self.target.kind, reason)
        if reason != "handler":
            logger.info(
                "watch restarts",
                extra={"resource": self.target.kind, "reason": reason, "error": str(error or "")},
            )

    # -- list and watch -----------------------------------------------------------------------------------

    def _relist(self) -> str:
        items, version = list_objects(self._kube, self.target, self._shape)
        fresh = {self._key(obj): obj for obj in items}
        old = self._store
        changes = [Change(DELETED, obj, obj) for key, obj in old.items() if key not in fresh]
        for key, obj in fresh.items():
            previous = old.get(key)
            if previous is None:
                changes.append(Change(ADDED, obj, None))
            elif _version(previous) != _version(obj):
                changes.append(Change(MODIFIED, obj, previous))
        if changes or not self.synced.is_set():
            self._handler(changes)
        with self._lock:
            self._store = fresh
        self.synced.set()
        return version

    def _watch(self, version: str) -> str:
        timeout = random.randint(*self._watch_timeout)
        stream = WatchStream(self._kube, self.target, version, timeout)
        self._stream = stream
        try:
            if self._stop.is_set():
                return version
            for event in stream:
                if event.type != "BOOKMARK":
                    self._apply(event.type, self._shape(event.object))
                version = event.resource_version or version
        finally:
            self._stream = None
        return version

    def _apply(self, kind: str, obj: dict[str, Any]) -> None:
        key = self._key(obj)
        previous = self.get(key)
        if kind == DELETED:
            self._handler([Change(DELETED, obj, previous)])
            with self._lock:
                self._store.pop(key, None)
            return
        self._handler([Change(MODIFIED if previous is not None else ADDED, obj, previous)])
        with self._lock:
            self._store[key] = obj
