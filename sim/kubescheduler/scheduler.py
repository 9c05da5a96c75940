"""A simulated kube-scheduler that calls our extender the way the HAMi chart configures it (reference §10.1).

Pods whose `spec.schedulerName` is ours and that are not bound wait in a queue (priority, then arrival).
With `default_profile` (`sim up`, the demo: the cluster's own `default-scheduler`), pods of that name (or
none) asking for no managed resource join the queue and are bound by the in-tree filters alone; one asking
for a managed resource stays Pending (in a cluster our webhook hands it to us; docs/demo.md).
One scheduling loop takes them one at a time — filters are serial, as kube-scheduler's scheduling cycle is —
runs the in-tree filters (`sim.kubescheduler.cache`), POSTs `/filter` with `{"Pod", "NodeNames"}` in nodeTree
order, assumes the pod on the answered node and hands `/bind` to a thread pool (binding cycles run in
parallel).

Outcomes and retries (kube-scheduler's semantics, with a rule that ends):
- one node in the answer: bind; a bind `Error` (or a failed call) forgets the assumption, counts as an
  error and sends the pod to the backoff queue — it is filtered again later;
- `Error` in the filter answer, an HTTP failure or a timeout (`httpTimeout`): backoff queue;
- no node (FailedNodes, or no feasible node in-tree): the pod is unschedulable and parked. Like
  kube-scheduler it is retried only after a cluster event (a node added/changed/deleted, an assigned pod
  added/changed/deleted, a failed binding) and once its backoff elapsed;
- backoff: 1 s doubling per attempt up to 10 s (podInitialBackoffSeconds / podMaxBackoffSeconds).

Rejection rule (kube-scheduler would keep such pods Pending forever; a simulation must end): a pod is
rejected after `max_unschedulable` unschedulable answers, after `max_errors` errors, or when it has been
parked unschedulable for `unschedulable_timeout` seconds with no cluster event since. A rejected pod gets the
annotation `sim.hami.io/rejected: <reason>` and the condition PodScheduled=False (Unschedulable or
SchedulerError), and is never retried. Every pod therefore ends bound or rejected within
max_unschedulable x (backoff + timeout) + max_errors x 10 s.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import threading
import time
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sim.kit import podutil
from sim.kit.informer import Informer
from sim.kit.kube import STRATEGIC, Kube, KubeError, pod_path
from sim.kubescheduler.cache import SchedulerCache
from sim.kubescheduler.extender import Extender, ExtenderError
from sim.kubescheduler.state import PodState, SchedulerConfig, SchedulerStats, fit_error

logger = logging.getLogger(__name__)
Obj = dict[str, Any]
UNSCHEDULABLE, ERROR = "unschedulable", "error"
DEFAULT_SCHEDULER = "default-scheduler"


class SimScheduler:
    def __init__(self, kube: Kube, extender: Extender, config: SchedulerConfig | None = None) -> None:
        self.kube = kube
        self.extender = extender
        self.config = config or SchedulerConfig()
        self.cache = SchedulerCache(
            extender.config.managed_resources, self.config.percentage_of_nodes_to_score
        )
        self.stats = SchedulerStats()
        self._cond = threading.Condition()
        self._states: dict[str, PodState] = {}
        self._active: list[tuple[int, int, str]] = []
        self._backoff: list[tuple[float, int, str]] = []
        self._parked: dict[str, PodState] = {}
        self._seq = itertools.count()
        self._event_seq = 0
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max(1, self.config.bind_workers), thread_name_prefix="sim-bind")
        self._loop = threading.Thread(target=self._run, name="sim-scheduler", daemon=True)
        self.nodes = Informer(kube, "/api/v1/nodes", self._on_node, "sim-scheduler-nodes")
        self.pods = Informer(kube, "/api/v1/pods", self._on_pod, "sim-scheduler-pods")

    def start(self) -> SimScheduler:
        self.nodes.start()
        self.pods.start()
        self.nodes.synced.wait(10)
        self.pods.synced.wait(10)
        self._loop.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._loop.is_alive():
            self._loop.join(5)
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.pods.stop()
        self.nodes.stop()

    def pending(self) -> int:
        with self._cond:
            return sum(1 for s in self._states.values() if s.where != "rejected")

    # --- informer handlers ----------------------------------------------------------------------------------

    def _count(self, name: str) -> None:
        with self._cond:
            self.stats.counters[name] += 1

    def _cluster_event(self) -> None:
        with self._cond:
            self._event_seq += 1
            self._cond.notify_all()

    def _on_node(self, kind: str, node: Obj, old: Obj | None) -> None:
        if kind == "DELETED":
            self.cache.remove_node(podutil.name(node))
        else:
            self.cache.set_node(node)
        self._cluster_event()

    def _ours(self, pod: Mapping[str, Any]) -> bool:
        name = podutil.spec(pod).get("schedulerName") or DEFAULT_SCHEDULER
        if name == self.config.scheduler_name:
            return True
        return self.config.default_profile and name == DEFAULT_SCHEDULER and not self.extender.interested(pod)

    def _on_pod(self, kind: str, pod: Obj, old: Obj | None) -> None:
        key = podutil.key(pod)
        if kind == "DELETED":
            self.cache.remove_pod(key)
        else:
            self.cache.set_pod(pod)
        bound = bool(podutil.node_name(pod))
        if bound and (
            kind == "DELETED"
            or old is None
            or not podutil.node_name(old)
            or podutil.phase(pod) != podutil.phase(old)
        ):
            self._cluster_event()
        with self._cond:
            state = self._states.get(key)
            if kind == "DELETED" or bound or podutil.terminating(pod):
                if state is not None and state.where != "binding":
                    del self._states[key]
                return
            if state is not None or not self._ours(pod) or podutil.REJECTED in podutil.annotations_of(pod):
                return
            if podutil.phase(pod) not in ("", "Pending"):
                return
            now = time.monotonic()
            priority = int(podutil.spec(pod).get("priority") or 0)
            self._states[key] = PodState(key, now, priority)
            if not self.stats.first_seen_wall:
                self.stats.first_seen_wall = time.time()
            heapq.heappush(self._active, (-priority, next(self._seq), key))
            self._cond.notify_all()

    # --- the scheduling loop --------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            key = self._next()
            if key is not None:
                try:
                    self._schedule_one(key)
                except Exception as exc:
                    logger.exception("scheduling %s crashed", key)
                    self._fail(key, f"internal error: {exc}", ERROR)

    def _next(self) -> str | None:
        with self._cond:
            self._flush(time.monotonic())
            while self._active:
                _, _, key = heapq.heappop(self._active)
                state = self._states.get(key)
                if state is not None and state.where == "active":
                    state.where = "inflight"
                    return key
            self._cond.wait(0.05)
            return None

    def _flush(self, now: float) -> None:
        """Backoff expired -> active; unschedulable + event + backoff expired -> active; stale -> rejected."""
        while self._backoff and self._backoff[0][0] <= now:
            _, _, key = heapq.heappop(self._backoff)
            state = self._states.get(key)
            if state is not None and state.where == "backoff" and state.ready_at <= now:
                self._activate(state)
        for state in list(self._parked.values()):
            if state.where != "unschedulable":
                self._parked.pop(state.key, None)
            elif self._event_seq > state.parked_event:
                if now >= state.ready_at:
                    self.stats.counters["requeued_on_event"] += 1
                    self._activate(state)
            elif now - state.parked_at >= self.config.unschedulable_timeout:
                self._reject(
                    state,
                    f"{UNSCHEDULABLE}: {state.reason} (no cluster change for "
                    f"{self.config.unschedulable_timeout:g}s)",
                )

    def _activate(self, state: PodState) -> None:
        state.where = "active"
        self._parked.pop(state.key, None)
        heapq.heappush(self._active, (-state.priority, next(self._seq), state.key))

    def _schedule_one(self, key: str) -> None:
        pod = self.pods.store.get(key)
        with self._cond:
            state = self._states.get(key)
            if state is None:
                return
            if pod is None or podutil.node_name(pod) or podutil.terminating(pod):
                del self._states[key]
                return
            state.attempts += 1
        feasible, failed = self.cache.feasible(pod)
        total = len(self.cache.nodes)
        if not feasible:
            self._fail(key, fit_error(total, failed), UNSCHEDULABLE)
            return
        if not self.extender.interested(pod):
            self._assume_and_bind(pod, feasible[0], direct=True)
            return
        nodes = [self.cache.nodes[n] for n in feasible] if not self.extender.config.node_cache_capable else []
        self._count("filter_calls")
        try:
            answer = self.extender.filter(pod, feasible, nodes)
        except ExtenderError as exc:
            self._count("filter_failed_calls")
            self._fail(key, str(exc), ERROR)
            return
        self.stats.filter_ms.append(answer.millis)
        if answer.error:
            self._count("filter_errors")
            self._fail(key, answer.error, ERROR)
            return
        chosen = [n for n in answer.node_names if n in self.cache.nodes]
        if not chosen:
            self._count("filter_unschedulable")
            self._fail(key, fit_error(total, {**failed, **answer.failed}), UNSCHEDULABLE)
            return
        self._assume_and_bind(pod, chosen[0], direct=False)

    def _assume_and_bind(self, pod: Obj, node: str, direct: bool) -> None:
        key = podutil.key(pod)
        self.cache.assume(pod, node)
        with self._cond:
            state = self._states.get(key)
            if state is not None:
                state.where = "binding"
        self._pool.submit(self._bind, pod, node, direct)

    def _bind(self, pod: Obj, node: str, direct: bool) -> None:
        key = podutil.key(pod)
        error = ""
        try:
            if direct:
                started = time.perf_counter()
                self.kube.bind(podutil.namespace(pod), podutil.name(pod), podutil.uid(pod), node)
                millis = (time.perf_counter() - started) * 1000.0
            else:
                self._count("bind_calls")
                error, millis = self.extender.bind(
                    podutil.namespace(pod), podutil.name(pod), podutil.uid(pod), node
                )
            with self._cond:
                self.stats.bind_ms.append(millis)
        except (ExtenderError, KubeError) as exc:
            self._count("bind_failed_calls")
            error = str(exc)
        if error:
            self._count("bind_errors")
            self.cache.forget(key)
            self._cluster_event()
            self._fail(key, error, ERROR)
            return
        now = time.monotonic()
        with self._cond:
            state = self._states.pop(key, None)
            self.stats.counters["bound"] += 1
            self.stats.last_bound_wall = time.time()
            if state is not None:
                self.stats.e2e_ms.append((now - state.first_seen) * 1000.0)

    # --- failures -------------------------------------------------------------------------------------------

    def _backoff_for(self, attempts: int) -> float:
        return min(self.config.initial_backoff * 2.0 ** max(0, attempts - 1), self.config.max_backoff)

    def _fail(self, key: str, reason: str, kind: str) -> None:
        now = time.monotonic()
        with self._cond:
            state = self._states.get(key)
            if state is None or state.where == "rejected":
                return
            state.reason = reason
            if kind == UNSCHEDULABLE:
                state.unschedulable += 1
                if state.unschedulable >= self.config.max_unschedulable:
                    self._reject(state, f"{UNSCHEDULABLE}: {reason} ({state.unschedulable} attempts)")
                    return
                state.where, state.parked_at, state.parked_event = "unschedulable", now, self._event_seq
                self._parked[key] = state
                state.ready_at = now + self._backoff_for(state.attempts)
            else:
                state.errors += 1
                self.stats.errors[podutil.message_shape(reason)] += 1
                if state.errors >= self.config.max_errors:
                    self._reject(state, f"{ERROR}: {reason} ({state.errors} attempts)")
                    return
                state.where, state.ready_at = "backoff", now + self._backoff_for(state.attempts)
                heapq.heappush(self._backoff, (state.ready_at, next(self._seq), key))
            message = reason[:1000]
            if message != state.condition:
                state.condition = message
                condition_reason = "Unschedulable" if kind == UNSCHEDULABLE else "SchedulerError"
                self._submit(self._set_condition, key, condition_reason, message, None)
            self._cond.notify_all()

    def _reject(self, state: PodState, reason: str) -> None:
        """Caller holds the condition."""
        state.where = "rejected"
        self._parked.pop(state.key, None)
        self.stats.counters["rejected"] += 1
        self.stats.rejected[state.key] = reason
        self._submit(self._set_condition, state.key, "Unschedulable", reason[:1000], reason[:2000])

    def _submit(self, *args: Any) -> None:
        if not self._stop.is_set():
            with contextlib.suppress(RuntimeError):  # shutting down
                self._pool.submit(*args)

    def _set_condition(self, key: str, reason: str, message: str, rejected: str | None) -> None:
        namespace, _, name = key.partition("/")
        condition = podutil.condition("PodScheduled", "False", podutil.now_rfc3339(), reason, message)
        try:
            if rejected is not None:
                self.kube.patch(
                    pod_path(namespace, name), {"metadata": {"annotations": {podutil.REJECTED: rejected}}}
                )
            self.kube.patch(
                pod_path(namespace, name, "status"), {"status": {"conditions": [condition]}}, STRATEGIC
            )
        except KubeError as exc:
            if exc.status != 404:
                logger.warning("updating the PodScheduled condition of %s: %s", key, exc)

    # --- report ---------------------------------------------------------------------------------------------

    def stats_json(self) -> Obj:
        with self._cond:
            waiting = Counter(s.where for s in self._states.values())
            return {
                "counters": dict(sorted(self.stats.counters.items())),
                "filter": podutil.summary(list(self.stats.filter_ms)),
                "bind": podutil.summary(list(self.stats.bind_ms)),
                "schedule_e2e": podutil.summary(list(self.stats.e2e_ms)),
                "queue": dict(sorted(waiting.items())),
                "rejected": dict(sorted(self.stats.rejected.items())),
                "errors": dict(self.stats.errors.most_common(40)),
                "first_seen_wall": self.stats.first_seen_wall,
                "last_bound_wall": self.stats.last_bound_wall,
            }
