"""Pod events (FilteringSucceed, FilteringFailed, BindingSucceed, BindingFailed) that never slow a decision.

`record` only puts the event on a bounded queue; one background thread per process posts them. Identical
events within a short window are dropped and posting is rate-limited, so a storm of unschedulable pods
cannot turn into a storm of API writes (HAMi #745: client-side throttling on event writes). When the queue
is full the event is dropped and counted.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cachetools import TTLCache

from app.k8s import objects
from app.k8s.client import Kube

logger = logging.getLogger(__name__)

MAX_MESSAGE = 1024
NORMAL, WARNING = "Normal", "Warning"


@dataclass(frozen=True, slots=True)
class PodRef:
    namespace: str
    name: str
    uid: str = ""


@dataclass(frozen=True, slots=True)
class _Event:
    pod: PodRef
    kind: str
    reason: str
    message: str
    at: datetime


class EventRecorder:
    def __init__(
        self,
        kube: Kube,
        component: str,
        instance: str = "",
        *,
        per_second: float = 20.0,
        burst: int = 50,
        capacity: int = 1000,
        dedup_seconds: float = 60.0,
    ) -> None:
        self._kube = kube
        self._component = component
        self._instance = instance or component
        self._queue: queue.Queue[_Event | None] = queue.Queue(maxsize=capacity)
        self._recent: TTLCache[tuple[str, str, str, str], bool] = TTLCache(maxsize=10_000, ttl=dedup_seconds)
        self._lock = threading.Lock()
        self._rate, self._burst = per_second, float(burst)
        self._tokens, self._stamp = float(burst), time.monotonic()
        self._thread: threading.Thread | None = None
        self.dropped = 0
        self.posted = 0

    def record(self, pod: PodRef, kind: str, reason: str, message: str) -> None:
        key = (pod.uid or f"{pod.namespace}/{pod.name}", kind, reason, message)
        with self._lock:
            if key in self._recent:
                return
            self._recent[key] = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="event-recorder", daemon=True)
                self._thread.start()
        try:
            self._queue.put_nowait(_Event(pod, kind, reason, message[:MAX_MESSAGE], datetime.now(UTC)))
        except queue.Full:
            self.dropped += 1

    def close(self, timeout: float = 2.0) -> None:
        """Flush what is queued (within `timeout`) and stop the thread."""
        if self._thread is None:
            return
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            return
        self._thread.join(timeout)

    def _take_token(self) -> None:
        while True:
            now = time.monotonic()
            self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._rate)
            self._stamp = now
            if self._tokens >= 1:
                self._tokens -= 1
                return
            time.sleep((1 - self._tokens) / self._rate)

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            if event is None:
                return
            self._take_token()
            try:
                self._post(event)
                self.posted += 1
            except Exception as exc:  # an event must never take the process down
                logger.warning("posting event failed", extra={"reason": event.reason, "error": str(exc)})

    def _post(self, event: _Event) -> None:
        stamp = event.at.strftime("%Y-%m-%dT%H:%M:%SZ")
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{event.pod.name}.", "namespace": event.pod.namespace},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": event.pod.namespace,
                "name": event.pod.name,
                "uid": event.pod.uid,
            },
            "reason": event.reason,
            "message": event.message,
            "type": event.kind,
            "source": {"component": self._component},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "reportingComponent": self._component,
            "reportingInstance": self._instance,
        }
        objects.create_event(self._kube, event.pod.namespace, body)
