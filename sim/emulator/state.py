"""The emulator's state and its test hooks, without the HTTP server: what the request handlers work on.

`EmulatorState` owns the store, the object semantics, list pages, faults and the request log, and the
seeding/inspection methods tests call directly. `sim.emulator.emulator.Emulator` adds the server's
lifecycle. The handlers (`api`, `hooks`, `handler`, `server`) depend on this module only, never on the
emulator itself, so the package has no import circle.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

import orjson

from sim.emulator import resources
from sim.emulator.deferred import Deferred
from sim.emulator.errors import ApiError, bad_request
from sim.emulator.faults import FaultInjector
from sim.emulator.listing import Pages
from sim.emulator.objects import DeleteOptions, Objects
from sim.emulator.requestlog import RequestLog
from sim.emulator.resources import ResourceType
from sim.emulator.selectors import parse_field_selector, parse_label_selector
from sim.emulator.store import Store
from sim.emulator.watch import Watcher

WATCH_ENDINGS = ("closed", "dropped", "expired")


@dataclass(frozen=True)
class EmulatorConfig:
    host: str = "127.0.0.1"
    port: int = 0  # 0: an ephemeral port, see Emulator.url after start()
    tls: bool = False
    event_window: int = 10_000
    pod_deletion_delay: float = 1.0
    kubelet_deletions: bool = False  # graceful pod deletions wait for a kubelet's grace-0 delete instead
    bookmark_interval: float = 1.0
    request_log_size: int = 10_000
    fault_seed: int | None = None
    token: str = "sim-token"


def _resource(name: str) -> ResourceType:
    rtype = resources.by_key(name)
    if rtype is None:
        raise bad_request(f"unknown resource {name!r}; known: {[r.key for r in resources.ALL]}")
    return rtype


class EmulatorState:
    def __init__(self, config: EmulatorConfig | None = None) -> None:
        self.config = config or EmulatorConfig()
        self.store = Store(self.config.event_window)
        self._deferred = Deferred("sim-apiserver-deletions")
        self.objects = Objects(
            self.store, self._deferred, self.config.pod_deletion_delay, self.config.kubelet_deletions
        )
        self.pages = Pages()
        self.faults = FaultInjector(self.config.fault_seed)
        self.requests = RequestLog(self.config.request_log_size)
        self.stopping = threading.Event()
        self.ca_pem: bytes | None = None
        self._port: int | None = None  # set by Emulator once its server is bound
        self.objects.ensure_default_namespaces()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the emulator is not started")
        return self._port

    # --- test hooks: seeding and inspection without HTTP ----------------------------------------------------

    def seed(self, objects: list[dict[str, Any]]) -> int:
        """Insert objects as given (status, uid, timestamps kept; new resourceVersions). All or nothing."""
        return self.objects.seed(objects)

    def get(self, resource: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        rtype = _resource(resource)
        entry = self.store.get(rtype, (namespace or "default") if rtype.namespaced else "", name)
        return None if entry is None else dict(orjson.loads(entry.raw))

    def list(
        self, resource: str, namespace: str | None = None, label_selector: str = "", field_selector: str = ""
    ) -> list[dict[str, Any]]:
        rtype = _resource(resource)
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, rtype.field_labels)
        _, entries = self.objects.select(rtype, namespace, labels, fields)
        return [orjson.loads(e.raw) for e in entries]

    def delete(self, resource: str, name: str, namespace: str | None = None) -> bool:
        """Delete at once (no grace period); False if there was nothing to delete."""
        try:
            self.objects.delete(
                _resource(resource), namespace or "default", name, DeleteOptions(grace_period=0)
            )
        except ApiError as error:
            if error.code == 404:
                return False
            raise
        return True

    def close_watches(self, resource: str, user_agent: str = "", ending: str = "dropped") -> int:
        """End the open watches of `resource` whose client's User-Agent matches `user_agent` (a regular
        expression, searched; "": every client), the way `ending` says (WATCH_ENDINGS: cleanly, the
        connection cut, or 410 Expired so the client lists again); how many were open."""
        if ending not in WATCH_ENDINGS:
            raise bad_request(f"ending must be one of {WATCH_ENDINGS}")
        try:
            agent = re.compile(user_agent)
        except re.error as error:
            raise bad_request(f"invalid user_agent regex: {error}") from error
        rtype = _resource(resource)
        closed = 0
        for subscriber in self.store.subscribers(rtype.key):
            if isinstance(subscriber, Watcher) and agent.search(subscriber.user_agent):
                subscriber.close(ending)
                closed += 1
        return closed

    def reset(self, fault_seed: int | None = None) -> None:
        """Empty store (default namespaces re-created, versions keep growing), no watches, faults or log."""
        self.objects.reset()
        self.pages.clear()
        self.faults.reset(fault_seed)
        self.requests.clear()

    def stats(self) -> dict[str, Any]:
        return {
            "resourceVersion": str(self.store.rv),
            "objects": {r.key: self.store.count(r) for r in resources.ALL},
            "watchers": self.store.watcher_count(),
            "faults_injected": self.faults.injected,
        }
