"""The kubelet of every simulated GPU node: admits each pod bound to one of our nodes (one pod at a time
per node, as the kubelet's sync loop does) and calls its device plugins' Allocate once per container and
device resource (init containers first): HAMi's NVIDIA plugin (sim/nodes/hamiplugin.py) or another vendor's
(sim/nodes/vendorplugins.py).

The kubelet then reports the pod Running (status subresource) or, when Allocate failed, Failed with
`UnexpectedAdmissionError`; later Succeeded after `sim.hami.io/run-seconds` (default: runs until deleted).
With `finish_deletions` it also plays the kubelet's part of a graceful deletion, as on kube-apiserver (and
the emulator with `--kubelet-deletions`) nobody else does: a Running pod whose deletionTimestamp is set keeps
running, phase Running and its devices held, for its grace period (`deletionGracePeriodSeconds`, which the
API server took from the DELETE or from terminationGracePeriodSeconds) times `grace_scale`, at most
`grace_cap` seconds, counted from when this kubelet saw the deletion, as if its containers ignored SIGTERM;
a later DELETE with a shorter grace shortens it. Then the pod is deleted with grace 0 and its UID as
precondition. A pod that never ran (Pending, or already terminal) has nothing to stop and goes at once.
A status the API does not take for want of an answer (no answer, 429, 5xx: kube-apiserver restarting; a 403
too where the client retries those: `Kube.retried`) is sent again until it is taken, for up to
STATUS_RETRY_FOR, as the kubelet's status manager keeps syncing; given up at once it left a pod whose Allocate
failed in the outage Pending for good, bound and locked.
Pods without GPU containers just become Running. Oddities that HAMi would not notice (Allocate served
another pod than the one being admitted, a group mapped to a container without GPUs, an allocation left
incomplete with the lock held) are counted in the stats.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from app.core import nodelock
from sim.emulator.deferred import Deferred
from sim.kit import podutil
from sim.kit.informer import Informer
from sim.kit.kube import STRATEGIC, Kube, KubeError, pod_path
from sim.nodes.hamiplugin import TO_ALLOCATE, VENDOR, DevicePlugin, Stats
from sim.nodes.objects import GPU_RESOURCE, ClusterSpec
from sim.nodes.vendorplugins import PLUGINS, AllocateError, Plugin

logger = logging.getLogger(__name__)

STATUS_RETRY_FOR, STATUS_RETRY_PAUSE = 120.0, 1.0  # seconds: a pod status the API did not answer
Obj = dict[str, Any]


@dataclass(frozen=True)
class PluginConfig:
    allocate_latency: float = 0.002  # seconds one Allocate call takes on the node (besides API calls)
    workers: int = 8  # allocation threads shared by all nodes
    default_run_seconds: float | None = None  # None: pods run until deleted
    finish_deletions: bool = False  # finish graceful deletions (kube-apiserver waits for the kubelet)
    grace_scale: float = 1.0  # a terminating Running pod runs for its grace period times this ...
    grace_cap: float = 10.0  # ... at most this many seconds (the default grace, 30 s, would slow every test)
    stock_gpus: bool = False  # pods without HAMi's allocation get whole GPUs as from NVIDIA's own plugin


def grace_seconds(pod: Mapping[str, Any], config: PluginConfig) -> float:
    """How long a terminating pod keeps running on its node: its grace period (the deletion's, else the
    spec's, else Kubernetes' default 30 s) times `grace_scale`, at most `grace_cap`; 0 for a pod that has no
    running containers to stop."""
    if podutil.phase(pod) != "Running":
        return 0.0
    grace = podutil.meta(pod).get("deletionGracePeriodSeconds")
    if grace is None:
        grace = podutil.spec(pod).get("terminationGracePeriodSeconds", 30)
    return min(max(0.0, float(grace)) * config.grace_scale, config.grace_cap)


class Kubelets:
    """The kubelets of all simulated nodes: one pod watch for all of them, a small shared thread pool,
    admissions serial per node, and one timer thread for pods that finish."""

    def __init__(self, kube: Kube, cluster: ClusterSpec, config: PluginConfig | None = None) -> None:
        self.kube = kube
        self.config = config or PluginConfig()
        self.stats = Stats()
        latency = self.config.allocate_latency
        self.plugins = {s.name: DevicePlugin(kube, s, self.stats, latency) for s in cluster.nodes}
        words = (VENDOR, *sorted({part.key for s in cluster.nodes for part in s.parts}))
        self.node_plugins: dict[str, dict[str, Plugin]] = {}
        for spec in cluster.nodes:
            plugins: dict[str, Plugin] = {GPU_RESOURCE: self.plugins[spec.name]} if spec.devices else {}
            for part in spec.parts:
                factory = PLUGINS.get(part.plugin)
                if factory is not None:
                    plugins[part.resource] = factory(kube, spec.name, part)
                else:
                    plugins[part.resource] = DevicePlugin(
                        kube, spec, self.stats, latency, part=part, words=words
                    )
                for other in part.other_resources:  # one plugin serving several resources
                    plugins[other] = plugins[part.resource]
            self.node_plugins[spec.name] = plugins
        self._host_ips = {s.name: f"10.0.{i // 250}.{i % 250 + 1}" for i, s in enumerate(cluster.nodes)}
        self._pool = ThreadPoolExecutor(max(1, self.config.workers), thread_name_prefix="sim-kubelet")
        self._lock = threading.Lock()
        self._queues: dict[str, deque[tuple[str, float]]] = {s.name: deque() for s in cluster.nodes}
        self._busy: set[str] = set()
        self._seen: set[str] = set()  # pod UIDs admitted or queued
        self._finishing: dict[str, float] = {}  # pod UID -> when its graceful deletion ends (monotonic)
        self._pod_ips = 0
        self._timers = Deferred("sim-kubelet-timers")
        self._stopped = False
        self.informer = Informer(
            kube, "/api/v1/pods", self._on_pod, "sim-kubelet-pods", fieldSelector="spec.nodeName!="
        )

    def start(self) -> Kubelets:
        self.informer.start()
        return self

    def stop(self) -> None:
        self._stopped = True
        self.informer.stop()
        self._timers.stop()
        self._pool.shutdown(wait=True, cancel_futures=True)

    # --- events ---------------------------------------------------------------------------------------------

    def _on_pod(self, kind: str, pod: Obj, old: Obj | None) -> None:
        node = podutil.node_name(pod)
        if node not in self.plugins:
            return
        uid = podutil.uid(pod)
        if kind == "DELETED" or podutil.phase(pod) in podutil.TERMINAL:
            for plugin in self.node_plugins[node].values():
                plugin.forget(uid)
        with self._lock:
            if kind == "DELETED":
                self._seen.discard(uid)
                self._finishing.pop(uid, None)
                return
            if podutil.terminating(pod):
                if self.config.finish_deletions and not self._stopped:
                    self._terminate(pod)
                return
            if uid in self._seen:
                return
            self._seen.add(uid)
            state = podutil.phase(pod)
            if state == "Running":
                self._schedule_finish(pod)
                return
            if state != "Pending":
                return
            self._queues[node].append((podutil.key(pod), time.perf_counter()))
            if node not in self._busy and not self._stopped:
                self._busy.add(node)
                self._pool.submit(self._drain, node)

    def _drain(self, node: str) -> None:
        """Admit the node's queued pods one at a time (the kubelet's sync loop)."""
        while True:
            with self._lock:
                queue = self._queues[node]
                if not queue or self._stopped:
                    self._busy.discard(node)
                    return
                key, queued_at = queue.popleft()
            try:
                self._admit(node, key, queued_at)
            except Exception:
                logger.exception("%s: admitting %s failed", node, key)
                self.stats.count("admit_crashed")

    # --- admission ------------------------------------------------------------------------------------------

    def _admit(self, node: str, key: str, queued_at: float) -> None:
        pod = self.informer.store.get(key)
        if pod is None or podutil.terminating(pod) or podutil.phase(pod) != "Pending":
            return
        plugins = self.node_plugins[node]
        namespace, name = podutil.namespace(pod), podutil.name(pod)
        ordered = podutil.containers(pod, init=True) + podutil.containers(pod)
        stock = self.config.stock_gpus and TO_ALLOCATE not in podutil.annotations_of(pod)
        asked: list[Plugin] = []  # one Allocate per container and device resource
        for index, container in [] if stock else enumerate(ordered):
            for resource, plugin in plugins.items():
                count = podutil.device_count(container, resource)
                if count <= 0:
                    continue
                asked.append(plugin)
                try:
                    served, group_index = plugin.allocate(count)
                except (AllocateError, KubeError) as exc:  # an API error is the plugin's Allocate error
                    for each in plugins.values():
                        each.forget(podutil.uid(pod))
                    self._set_status(pod, podutil.admission_failed_status(str(exc)))
                    self.stats.count("pods_failed_admission")
                    return
                if podutil.key(served) != key:
                    self.stats.count("allocate_served_other_pod")
                elif group_index is not None and (group_index != index or group_index >= len(ordered)):
                    self.stats.count("allocate_group_container_mismatch")
        if stock:
            self.stats.count("pods_stock_gpus")
        elif asked:
            fresh = self.kube.get_or_none(pod_path(namespace, name))
            notes = podutil.annotations_of(fresh) if fresh else {}
            hami = [p for p in asked if isinstance(p, DevicePlugin)]  # plugins of other protocols: no phase
            if any(any(w in notes.get(p.to_allocate, "") for w in p.words) for p in hami) or (
                hami and notes.get(nodelock.BIND_PHASE) == "allocating"
            ):
                self.stats.count("allocation_incomplete")
        with self._lock:
            self._pod_ips += 1
            pod_ip = f"10.244.{self._pod_ips // 250}.{self._pod_ips % 250 + 1}"
        if self._set_status(pod, podutil.running_status(pod, self._host_ips[node], pod_ip)):
            self.stats.count("pods_running")
            self.stats.record(self.stats.admit_ms, (time.perf_counter() - queued_at) * 1000.0)
            self._schedule_finish(pod)

    def _set_status(self, pod: Mapping[str, Any], status: Obj) -> bool:
        path = pod_path(podutil.namespace(pod), podutil.name(pod), "status")
        deadline = time.monotonic() + STATUS_RETRY_FOR
        while True:
            try:
                self.kube.patch(path, {"metadata": {"uid": podutil.uid(pod)}, "status": status}, STRATEGIC)
                return True
            except KubeError as exc:
                if exc.status in self.kube.retried and time.monotonic() < deadline and not self._stopped:
                    time.sleep(STATUS_RETRY_PAUSE)
                    continue
                if exc.status != 404:
                    logger.warning("status of %s: %s", podutil.key(pod), exc)
                return False

    def _terminate(self, pod: Mapping[str, Any]) -> None:
        """Schedule the end of a graceful deletion, or bring it forward (a shorter grace). Caller holds the
        lock."""
        uid = podutil.uid(pod)
        now = time.monotonic()
        due = now + grace_seconds(pod, self.config)
        known = self._finishing.get(uid)
        if known is not None and known <= due:
            return
        self._finishing[uid] = due
        key = podutil.key(pod)

        def finish() -> None:
            if not self._stopped:
                self._pool.submit(self._finish_deletion, key, uid, due)

        self._timers.call_later(due - now, finish)

    def _finish_deletion(self, key: str, uid: str, due: float) -> None:
        """The kubelet's part of a graceful deletion: containers stopped, delete with grace 0 (UID
        precondition, so a same-name successor is never deleted). `due` tells a timer that a shorter grace
        replaced from one that is still current."""
        with self._lock:
            if self._finishing.get(uid) != due:
                return
        namespace, name = key.split("/", 1)
        path = pod_path(namespace, name)
        try:
            self.kube.request(
                "DELETE",
                path,
                {
                    "kind": "DeleteOptions",
                    "apiVersion": "v1",
                    "gracePeriodSeconds": 0,
                    "preconditions": {"uid": uid},
                },
            )
            self.stats.count("deletions_finished")
        except KubeError as exc:
            if exc.status not in (404, 409):
                logger.warning("finishing the deletion of %s: %s", key, exc)
            with self._lock:
                if self._finishing.get(uid) == due:
                    del self._finishing[uid]

    # --- completion -----------------------------------------------------------------------------------------

    def _schedule_finish(self, pod: Mapping[str, Any]) -> None:
        raw = podutil.annotations_of(pod).get(podutil.RUN_SECONDS)
        seconds = self.config.default_run_seconds
        if raw is not None:
            try:
                seconds = float(raw)
            except ValueError:
                seconds = None
        if seconds is None or seconds < 0:
            return
        key, uid = podutil.key(pod), podutil.uid(pod)

        def due() -> None:
            if not self._stopped:
                self._pool.submit(self._finish, key, uid)

        self._timers.call_later(seconds, due)

    def _finish(self, key: str, uid: str) -> None:
        pod = self.informer.store.get(key)
        if (
            pod is None
            or podutil.uid(pod) != uid
            or podutil.phase(pod) != "Running"
            or podutil.terminating(pod)
        ):
            return
        if self._set_status(pod, podutil.finished_status(pod)):
            self.stats.count("pods_succeeded")
