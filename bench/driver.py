"""The benchmark's stand-in for kube-scheduler (and for the API server's webhook calls) against our service.

How kube-scheduler calls an extender configured like HAMi's chart (`filterVerb`, `bindVerb`,
`nodeCacheCapable: true`, `httpTimeout: 30s`), and what this module therefore does:

- **Filter is serial**: one scheduling cycle at a time, on one keep-alive connection (Go's transport reuses
  its idle connection), `ExtenderArgs` `{"Pod", "Nodes": null, "NodeNames"}` with the node names in nodeTree
  order (zone round robin). The bodies are encoded before the clock starts: kube-scheduler's own encoding
  is not our cost.
- **Bind is concurrent**: after a filter picked a node the pod is assumed and its binding cycle runs on a
  pool of threads (kube-scheduler's binding goroutines) while the next pod is filtered.
- **Failures requeue like the scheduling queue**: a filter `Error`, a failed call or a bind `Error` sends the
  pod back with backoff (1 s doubling to 10 s, kube-scheduler's podInitial/MaxBackoff), re-read from the API
  first (kube-scheduler would filter its informer's current copy); after 10 attempts it is given up. A pod
  no node fits is counted unschedulable and not retried (the measured mix always fits).
- **The floor** (`noop`): the same bodies on the same connection to `POST /bench/noop` — serially before
  the window (quiet), and interleaved with the filters (after every tenth filter answer, before the next
  filter), so the floor is also measured under the very load the filters see. The interleaved calls sit in
  the serial loop: they lower the end-to-end rate slightly, never raise it.
- **The webhook burst**: AdmissionReview v1 CREATEs sent by a few threads at once, as an API server
  admitting concurrent creates would.

All latencies are client-side (what kube-scheduler would observe), in milliseconds.
"""

from __future__ import annotations

import base64
import heapq
import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import jsonpatch
import orjson
import urllib3

Obj = dict[str, Any]
HEADERS = {"Content-Type": "application/json"}
INITIAL_BACKOFF, MAX_BACKOFF, MAX_ATTEMPTS = 1.0, 10.0, 10


def connection_pool(url: str, size: int, timeout: float = 30.0) -> urllib3.HTTPConnectionPool:
    parts = urlsplit(url)
    return urllib3.HTTPConnectionPool(
        parts.hostname or "127.0.0.1",
        parts.port or 80,
        maxsize=size,
        block=True,
        retries=False,
        timeout=urllib3.Timeout(connect=5.0, read=timeout),
    )


def post(pool: urllib3.HTTPConnectionPool, path: str, body: bytes) -> tuple[Any, float]:
    """POST `body`, return the decoded 200 answer and the round trip in ms; raises RuntimeError otherwise."""
    started = time.perf_counter()
    response = pool.urlopen("POST", path, body=body, headers=HEADERS)
    millis = (time.perf_counter() - started) * 1000.0
    if response.status != 200:
        raise RuntimeError(f"POST {path}: HTTP {response.status}: {response.data[:200]!r}")
    return orjson.loads(response.data), millis


def filter_body(pod: Obj, names_json: bytes) -> bytes:
    return b'{"Pod":' + orjson.dumps(pod) + b',"Nodes":null,"NodeNames":' + names_json + b"}"


def noop_floor(pool: urllib3.HTTPConnectionPool, bodies: Sequence[bytes]) -> list[float]:
    """The floor: every filter body once through `POST /bench/noop`."""
    samples = []
    for body in bodies:
        answer, millis = post(pool, "/bench/noop", body)
        if answer.get("Error"):
            raise RuntimeError(f"/bench/noop answered an Error: {answer['Error']}")
        samples.append(millis)
    return samples


def admission_review(pod: Obj, index: int) -> bytes:
    meta = pod["metadata"]
    request = {
        "uid": f"bench-{index:06d}",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "name": meta["name"],
        "namespace": meta["namespace"],
        "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:default:bench"},
        "object": pod,
        "dryRun": False,
    }
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})


def webhook_burst(
    pool: urllib3.HTTPConnectionPool, pods: Sequence[Obj], threads: int
) -> tuple[list[Obj], list[float]]:
    """Admit every pod through `/webhook`, `threads` at a time; the mutated pods and the latencies."""
    bodies = [admission_review(pod, i) for i, pod in enumerate(pods)]

    def admit(index: int) -> tuple[Obj, float]:
        answer, millis = post(pool, "/webhook", bodies[index])
        response = answer.get("response") or {}
        if not response.get("allowed"):
            raise RuntimeError(f"the webhook denied {pods[index]['metadata']['name']}: {response}")
        pod = pods[index]
        if response.get("patch"):
            pod = jsonpatch.apply_patch(pod, orjson.loads(base64.b64decode(response["patch"])))
        return pod, millis

    with ThreadPoolExecutor(max(1, threads), thread_name_prefix="bench-webhook") as executor:
        results = list(executor.map(admit, range(len(pods))))
    return [pod for pod, _ in results], [millis for _, millis in results]


@dataclass
class _Task:
    key: str
    uid: str
    body: bytes
    attempts: int = 0


@dataclass
class Run:
    """What one scheduling run measured."""

    filter_ms: list[float] = field(default_factory=list)
    bind_ms: list[float] = field(default_factory=list)
    noop_ms: list[float] = field(default_factory=list)  # the floor, interleaved with the filters
    counters: Counter[str] = field(default_factory=Counter)
    bound: set[str] = field(default_factory=set)
    failed: dict[str, str] = field(default_factory=dict)
    first_filter: float = 0.0  # perf_counter
    last_filter: float = 0.0  # when the last filter answer arrived
    last_bind: float = 0.0
    nodes: Counter[str] = field(default_factory=Counter)  # measured pods bound per node

    @property
    def seconds(self) -> float:
        return max(1e-9, self.last_bind - self.first_filter)


class Scheduler:
    """Serial filters, concurrent binds, backoff requeues; `run` ends once every pod is bound or given up."""

    def __init__(
        self,
        url: str,
        names_json: bytes,
        refetch: Callable[[str], Obj],
        bind_workers: int = 16,
        timeout: float = 30.0,
        noop_every: int = 10,
    ) -> None:
        self.filter_pool = connection_pool(url, 1, timeout)
        self.bind_pool = connection_pool(url, max(1, bind_workers), timeout)
        self.names_json = names_json
        self.refetch = refetch
        self.bind_workers = bind_workers
        self.noop_every = noop_every
        self._cond = threading.Condition()
        self._queue: list[tuple[float, int, _Task]] = []
        self._seq = itertools.count()
        self._open = 0
        self._deadline = float("inf")
        self.result = Run()

    def close(self) -> None:
        self.filter_pool.close()
        self.bind_pool.close()

    def _requeue(self, task: _Task, reason: str) -> None:
        """Caller holds the condition."""
        task.attempts += 1
        if task.attempts >= MAX_ATTEMPTS:
            self.result.failed[task.key] = reason
            self._open -= 1
        else:
            delay = min(INITIAL_BACKOFF * 2 ** (task.attempts - 1), MAX_BACKOFF)
            heapq.heappush(self._queue, (time.perf_counter() + delay, next(self._seq), task))
            task.body = b""  # re-read from the API before the next attempt
        self._cond.notify_all()

    def _next(self) -> _Task | None:
        with self._cond:
            while self._open > 0:
                now = time.perf_counter()
                if now > self._deadline:  # give up what is still queued; binds in flight finish
                    for _, _, task in self._queue:
                        self.result.failed[task.key] = "timeout: the run's deadline passed"
                        self._open -= 1
                    self._queue.clear()
                if self._queue and self._queue[0][0] <= now:
                    return heapq.heappop(self._queue)[2]
                wait = self._queue[0][0] - now if self._queue else 1.0
                self._cond.wait(min(wait, 1.0))
            return None

    def run(self, pods: Sequence[tuple[str, str, bytes]], timeout: float = 1800.0) -> Run:
        """`pods`: (namespace/name, uid, filter body) in queue order; pods not placed within `timeout`
        seconds are given up (they show as not bound in the correctness check)."""
        now = time.perf_counter()
        self._deadline = now + timeout
        with self._cond:
            for key, uid, body in pods:
                heapq.heappush(self._queue, (now, next(self._seq), _Task(key, uid, body)))
            self._open = len(pods)
        with ThreadPoolExecutor(max(1, self.bind_workers), thread_name_prefix="bench-bind") as binders:
            while (task := self._next()) is not None:
                self._filter_one(task, binders)
        return self.result

    def _filter_one(self, task: _Task, binders: ThreadPoolExecutor) -> None:
        result = self.result
        if not task.body:
            task.body = filter_body(self.refetch(task.key), self.names_json)
        if not result.first_filter:
            result.first_filter = time.perf_counter()
        try:
            answer, millis = post(self.filter_pool, "/filter", task.body)
        except (urllib3.exceptions.HTTPError, RuntimeError, orjson.JSONDecodeError) as exc:
            with self._cond:
                result.counters["filter_failed_calls"] += 1
                self._requeue(task, f"filter call: {exc}")
            return
        result.filter_ms.append(millis)
        result.last_filter = time.perf_counter()
        result.counters["filter_calls"] += 1
        if answer.get("Error"):
            with self._cond:
                result.counters["filter_errors"] += 1
                self._requeue(task, f"filter: {answer['Error']}")
            return
        names = answer.get("NodeNames") or []
        if not names:
            with self._cond:
                result.counters["filter_unschedulable"] += 1
                result.failed[task.key] = (
                    "unschedulable: "
                    + "; ".join(sorted(set((answer.get("FailedNodes") or {}).values())))[:500]
                )
                self._open -= 1
                self._cond.notify_all()
            return
        if self.bind_workers > 0:
            binders.submit(self._bind, task, str(names[0]))
        else:  # diagnostic only (--bind-workers 0): bind before the next filter, no overlap
            self._bind(task, str(names[0]))
        if self.noop_every > 0 and result.counters["filter_calls"] % self.noop_every == 0:
            self._noop(task.body)

    def _noop(self, body: bytes) -> None:
        """The floor under the same load: the same body through `/bench/noop`, on the filter connection."""
        try:
            _, millis = post(self.filter_pool, "/bench/noop", body)
        except (urllib3.exceptions.HTTPError, RuntimeError, orjson.JSONDecodeError):
            self.result.counters["noop_failed_calls"] += 1
            return
        self.result.noop_ms.append(millis)

    def _bind(self, task: _Task, node: str) -> None:
        result = self.result
        namespace, _, name = task.key.partition("/")
        body = orjson.dumps({"PodName": name, "PodNamespace": namespace, "PodUID": task.uid, "Node": node})
        try:
            answer, millis = post(self.bind_pool, "/bind", body)
            error = str(answer.get("Error") or "")
        except (urllib3.exceptions.HTTPError, RuntimeError, orjson.JSONDecodeError) as exc:
            with self._cond:
                result.counters["bind_failed_calls"] += 1
                self._requeue(task, f"bind call: {exc}")
            return
        with self._cond:
            result.bind_ms.append(millis)
            result.counters["bind_calls"] += 1
            if error:
                result.counters["bind_errors"] += 1
                self._requeue(task, f"bind: {error}")
                return
            result.bound.add(task.key)
            result.nodes[node] += 1
            result.last_bind = time.perf_counter()
            self._open -= 1
            self._cond.notify_all()


class Scraper(threading.Thread):
    """Prometheus scraping the service's `/metrics` every `every` seconds during the window (what the
    chart's ServiceMonitor does when enabled; off by default, like the chart)."""

    def __init__(self, url: str, every: float) -> None:
        super().__init__(name="bench-scraper", daemon=True)
        self.pool = connection_pool(url, 1, timeout=60.0)
        self.every = every
        self.samples: list[float] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.every):
            started = time.perf_counter()
            try:
                response = self.pool.urlopen("GET", "/metrics")
                response.drain_conn()
            except urllib3.exceptions.HTTPError:
                continue
            self.samples.append((time.perf_counter() - started) * 1000.0)

    def stop(self) -> list[float]:
        self.done.set()
        self.join(60)
        self.pool.close()
        return self.samples
