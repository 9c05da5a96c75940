"""What the chaos storm watches while it runs (reads only, through the emulator's fault-free hooks and the
replicas' `/readyz`):

- every `sample_every` seconds, the per-device sums of the bound pods against capacity — an
  oversubscription that a later completion or deletion would hide at the end is caught here;
- every `probe_every` seconds, which replicas are Ready: leader changes, moments with two Ready replicas
  (the Service would then spread calls over both) and the time with none;
- `Journal`: every change of a node's `hami.io/mutex.lock` and of the storm pods' scheduling state (UID,
  node, phase, HAMi's binding annotations), one JSON line each with the time and resourceVersion, in
  `journal.jsonl` of the work dir — to reconstruct who held which lock when (it watches through the API,
  faults included; a dropped watch resumes from its last version).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from sim.chaos.check import oversubscription
from sim.cluster.replicas import Replicas
from sim.emulator.testing import EmulatorHandle
from sim.kit import podutil
from sim.kit.informer import Informer
from sim.kit.kube import Kube
from sim.kit.ticker import Ticker
from sim.workload.report import LOCK

logger = logging.getLogger(__name__)


class Observer:
    def __init__(
        self,
        hooks: EmulatorHandle,
        replicas: Replicas,
        label_selector: str,
        *,
        sample_every: float = 3.0,
        probe_every: float = 0.25,
    ) -> None:
        self.hooks = hooks
        self.replicas = replicas
        self.selector = label_selector
        self.samples = 0
        self.over_max = 0
        self.over_first: list[dict[str, Any]] = []
        self.leaders: list[tuple[float, str]] = []  # (seconds since start, the Ready replica or "")
        self.dual_ready = 0
        self.leaderless = 0.0
        self._started = self._last_probe = time.monotonic()
        self._tickers = [
            Ticker("chaos-oversubscription", sample_every, self._sample_tick),
            Ticker("chaos-readiness", probe_every, self._probe),
        ]

    def start(self) -> Observer:
        self._last_probe = time.monotonic()
        for ticker in self._tickers:
            ticker.start()
        return self

    def stop(self) -> None:
        for ticker in self._tickers:
            ticker.stop(10)

    def sample(self) -> None:
        pods = self.hooks.list("pods", label_selector=self.selector)
        nodes = self.hooks.list("nodes")
        over = oversubscription(pods, nodes)
        self.samples += 1
        if over and not self.over_first:
            self.over_first = over
        self.over_max = max(self.over_max, len(over))

    def _sample_tick(self) -> None:
        try:
            self.sample()
        except Exception:  # a failed sample is a missed sample, not a failed run
            logger.exception("oversubscription sample failed")

    def _probe(self) -> None:
        ready = [r.name for r in self.replicas.ready_ones()]
        now = time.monotonic()
        if len(ready) > 1:
            self.dual_ready += 1
        if not ready:
            self.leaderless += now - self._last_probe
        self._last_probe = now
        current = ready[0] if len(ready) == 1 else ("" if not ready else "+".join(ready))
        if not self.leaders or self.leaders[-1][1] != current:
            self.leaders.append((round(now - self._started, 2), current))

    def summary(self) -> dict[str, Any]:
        changes = [name for _, name in self.leaders if name]
        return {
            "oversubscription_samples": self.samples,
            "oversubscribed_max_during_run": self.over_max,
            "oversubscribed_first_seen": self.over_first,
            "leader_changes": sum(1 for a, b in itertools.pairwise(changes) if a != b),
            "leader_timeline": [f"{at:g}s {name or '-'}" for at, name in self.leaders],
            "dual_ready_probes": self.dual_ready,
            "leaderless_seconds": round(self.leaderless, 2),
        }


POD_NOTES = (
    "hami.io/vgpu-node",
    "hami.io/bind-phase",
    "hami.io/bind-time",
    "hami.io/vgpu-devices-to-allocate",
    podutil.REJECTED,
)


def _pod_state(pod: dict[str, Any] | None) -> dict[str, Any]:
    if pod is None:
        return {}
    notes = podutil.annotations_of(pod)
    state: dict[str, Any] = {"uid": podutil.uid(pod), "node": podutil.node_name(pod)}
    state.update(phase=podutil.phase(pod), deleting=podutil.terminating(pod))
    return {**state, **{key.split("/")[-1]: notes.get(key) for key in POD_NOTES}}


class Journal:
    def __init__(self, kube: Kube, path: Path, label_selector: str) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._file = path.open("ab")
        self._informers = [
            Informer(kube, "/api/v1/nodes", self._on_node, "chaos-journal-nodes"),
            Informer(kube, "/api/v1/pods", self._on_pod, "chaos-journal-pods", labelSelector=label_selector),
        ]

    def start(self) -> Journal:
        for informer in self._informers:
            informer.start()
        return self

    def stop(self) -> None:
        for informer in self._informers:
            informer.stop()
        with self._lock:
            self._file.close()

    def _write(self, kind: str, event: str, obj: dict[str, Any], changes: dict[str, Any]) -> None:
        key = podutil.key(obj) if kind == "pod" else podutil.name(obj)
        line = {"t": round(time.time(), 3), "kind": kind, "event": event, "key": key}
        line.update({"rv": podutil.meta(obj).get("resourceVersion"), "changes": changes})
        with self._lock:
            if not self._file.closed:
                self._file.write(orjson.dumps(line) + b"\n")

    def _on_node(self, event: str, node: dict[str, Any], old: dict[str, Any] | None) -> None:
        before = podutil.annotations_of(old).get(LOCK) if old is not None else None
        after = podutil.annotations_of(node).get(LOCK) if event != "DELETED" else None
        if before != after:
            self._write("node", event, node, {"lock": [before, after]})

    def _on_pod(self, event: str, pod: dict[str, Any], old: dict[str, Any] | None) -> None:
        before, after = _pod_state(old), _pod_state(pod if event != "DELETED" else None)
        changes = {
            k: [before.get(k), after.get(k)]
            for k in before.keys() | after.keys()
            if before.get(k) != after.get(k)
        }
        if changes:
            self._write("pod", event, pod, changes)
