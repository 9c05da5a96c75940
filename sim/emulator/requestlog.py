"""A bounded log of the API requests the emulator answered (test hooks are not logged), in completion order.

A request is recorded when its answer is ready, just before it is written (a client holding an answer
finds its request here); a watch when its stream ends, a dropped request when it is dropped.

Tests use it to assert what a component actually sent (verbs, selectors, retries after faults) without
instrumenting the component itself.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RequestRecord:
    time: float  # epoch seconds at arrival
    method: str
    path: str
    query: str
    verb: str  # Kubernetes verb, "" for discovery and unknown paths
    resource: str
    status: int  # 0: the connection was dropped without an answer
    duration_ms: float
    faults: tuple[str, ...]


class RequestLog:
    def __init__(self, capacity: int = 10_000) -> None:
        self._lock = threading.Lock()
        self._records: deque[RequestRecord] = deque(maxlen=capacity)

    def add(self, record: RequestRecord) -> None:
        with self._lock:
            self._records.append(record)

    def records(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._records)

    def as_json(self) -> list[dict[str, Any]]:
        return [dataclasses.asdict(r) for r in self.records()]

    def clear(self) -> None:
        with self._lock:
            self._records.clear()
