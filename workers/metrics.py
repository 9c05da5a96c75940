"""The worker's own metrics and liveness endpoint (HAMI_WORKER_METRICS_BIND, HAMi's :9395).

A plain prometheus_client registry on its own port, never the Gunicorn multiprocess directory: that
directory names files by PID, and this container has its own PID namespace (research/ecosystem.md §1.2).
A small stdlib HTTP server thread answers:

- `/metrics`: the worker's metrics, `hami_build_info`, process and Python metrics, then HAMi's gauges as
  rendered into the state directory (app/state/gauges.py), streamed from the file — where HAMi serves them
  (its --metrics-bind-address, :9395/metrics), so existing scrape configurations and HAMi-WebUI keep
  working. A missing or stale file leaves them out. `?hami_gauges=0` leaves them out on purpose;
- `/metrics/hami`: the gauges alone (503 while the file is missing or stale);
- `/healthz`: 200 while the work loop makes progress, 503 otherwise.

The extender's /metrics carries the same gauges; the chart's ServiceMonitor takes them from this port and
asks the extender without them, so no series is ingested twice.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, BinaryIO
from urllib.parse import parse_qs, urlsplit

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.registry import Collector

from app.core.inventory import node_annotations, node_name
from app.core.nodelock import LOCK_ANNOTATION, LockParseError, parse_lock
from app.telemetry import BuildInfoCollector

logger = logging.getLogger(__name__)

_SWEEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class WorkerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        r.register(BuildInfoCollector())
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)
        self.sweep_seconds = Histogram(
            "hami_worker_registration_sweep_seconds",
            "Duration of one registration pass (decode, health, publish)",
            buckets=_SWEEP_BUCKETS,
            registry=r,
        )
        self.nodes_registered = Gauge(
            "hami_worker_nodes_registered", "Nodes in the published inventory", registry=r
        )
        self.nodes_unhealthy = Gauge(
            "hami_worker_nodes_unhealthy", "Nodes left out because their handshake/health failed", registry=r
        )
        self.nodes_corrupt = Gauge(
            "hami_worker_nodes_corrupt",
            "Nodes left out because a device annotation does not decode",
            registry=r,
        )
        self.watch_restarts = Counter(
            "hami_worker_watch_restarts",
            "Watches restarted, by resource and reason (expired, dropped, error, handler)",
            ["resource", "reason"],
            registry=r,
        )
        self.lock_sweeps = Counter(
            "hami_worker_lock_sweeps", "Sweeps of abandoned node locks the leader ran", registry=r
        )
        self.locks_released = Counter(
            "hami_worker_node_locks_released",
            "Abandoned node locks (hami.io/mutex.lock) the leader's sweep released",
            registry=r,
        )
        self.phantoms_released = Counter(
            "hami_worker_phantom_reservations_released",
            "Expired reservations of pods kube-scheduler never bound whose annotations the sweep removed",
            registry=r,
        )
        self.leader = Gauge("hami_worker_leader", "1 while this replica leads", registry=r)
        self.synced = Gauge(
            "hami_worker_synced", "1 while the leader's ledger and inventory are synced", registry=r
        )
        self.ledger_entries = Gauge(
            "hami_worker_ledger_entries", "Reservation rows by state", ["state"], registry=r
        )
        self.node_report_age = Gauge(
            "hami_worker_node_last_report_age_seconds",
            "Seconds since the node object last changed (a kubelet or device-plugin report)",
            ["node"],
            registry=r,
        )
        self.snapshot_generation = Gauge(
            "hami_worker_snapshot_generation", "Generation of the last published inventory", registry=r
        )
        self.corrupt_pods = Counter(
            "hami_worker_pod_allocation_errors", "Pod allocation annotations that did not decode", registry=r
        )
        self.allocation_rewrites = Counter(
            "hami_worker_bound_allocation_rewrites",
            "Changes of a bound pod's node or allocation annotation seen on the API and not followed "
            "(a bound pod's allocation is immutable; alert on any)",
            registry=r,
        )
        self.handshakes = Counter(
            "hami_worker_handshake_patches",
            "Handshake annotations written, by result",
            ["result"],
            registry=r,
        )
        self.capacity_patches = Counter(
            "hami_worker_capacity_patches",
            "Capacity annotations (hami.io/device-capacity) written or removed, by result",
            ["result"],
            registry=r,
        )
        self.ledger_drift = Counter(
            "hami_worker_ledger_drift", "Audits that found the ledger different from the API", registry=r
        )
        self.rebuilds = Counter(
            "hami_worker_ledger_rebuilds", "Ledger rebuilds from a fresh pod list", registry=r
        )
        # held reservations and freed capacity (docs/held-reservations.md; the endings: `HoldEndings`)
        self.holds = Gauge(
            "hami_worker_holds",
            "Live held reservations in this replica's ledger, by kind",
            ["kind"],
            registry=r,
        )
        self.freed_touches = Counter(
            "hami_worker_freed_touches",
            "Node touches telling kube-scheduler that capacity came back without an API event, by result",
            ["result"],
            registry=r,
        )
        self.handovers = Counter(
            "hami_worker_handovers",
            "Hand-overs of leadership because this replica's node was cordoned (drain)",
            registry=r,
        )
        self.state_metrics_seconds = Histogram(
            "hami_worker_state_metrics_render_seconds",
            "Duration of one rendering of HAMi's gauges into the state directory",
            buckets=_SWEEP_BUCKETS,
            registry=r,
        )
        # DRA side by side (workers/dra.py, docs/compatibility.md); the alert HamiSchedulerDraCollision.
        self.dra_available = Gauge(
            "hami_worker_dra_available", "1 while the cluster serves resource.k8s.io/v1", registry=r
        )
        self.dra_collisions = Gauge(
            "hami_worker_dra_collisions",
            "DeviceClasses serving a resource name we manage (extendedResourceName), by resource",
            ["resource", "vendor"],
            registry=r,
        )
        self.dra_overlapping_nodes = Gauge(
            "hami_worker_dra_overlapping_nodes",
            "Registered nodes whose GPUs a DRA driver also publishes in ResourceSlices (refused by /filter)",
            registry=r,
        )


class HoldEndings(Collector):
    """`hami_worker_hold_endings_total{kind, cause}`: held reservations ended since the ledger file was made,
    counted by every process in the transaction that ended them (app/state/holdstore.py), read at scrape."""

    def __init__(self, endings: Callable[[], dict[tuple[str, str], int]]) -> None:
        self._endings = endings

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "hami_worker_hold_endings", "Held reservations ended, by kind and cause", labels=["kind", "cause"]
        )
        for (kind, cause), count in sorted(self._endings().items()):
            family.add_metric([kind, cause], count)
        yield family


def parse_bind(bind: str) -> tuple[str, int]:
    """`host:port` or `[v6]:port`."""
    host, _, port = bind.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"HAMI_WORKER_METRICS_BIND={bind!r}: expected host:port")
    return host.strip("[]"), int(port)


class _Server6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class MetricsServer:
    def __init__(
        self,
        bind: str,
        metrics: WorkerMetrics,
        healthy: Callable[[], bool],
        hami_gauges: Callable[[], BinaryIO | None] = lambda: None,
    ) -> None:
        registry = metrics.registry

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    query = parse_qs(urlsplit(self.path).query)
                    wanted = query.get("hami_gauges", ["1"])[-1] not in ("0", "false")
                    self._stream(generate_latest(registry), hami_gauges() if wanted else None)
                elif path == "/healthz":
                    ok = healthy()
                    self._answer(200 if ok else 503, b"ok\n" if ok else b"stalled\n", "text/plain")
                elif path == "/metrics/hami":
                    self._gauges_only(hami_gauges())
                else:
                    self._answer(404, b"not found\n", "text/plain")

            def _answer(self, code: int, body: bytes, content_type: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _gauges_only(self, file: BinaryIO | None) -> None:
                if file is None:
                    self._answer(503, b"no current HAMi gauges\n", "text/plain")
                else:
                    self._stream(b"", file)

            def _stream(self, head: bytes, file: BinaryIO | None) -> None:
                """`head`, then the file's bytes (one family set each: the names are disjoint)."""
                if file is None:
                    self._answer(200, head, CONTENT_TYPE_PLAIN_0_0_4)
                    return
                with file:
                    self.send_response(200)
                    self.send_header("Content-Type", CONTENT_TYPE_PLAIN_0_0_4)
                    self.send_header("Content-Length", str(len(head) + os.fstat(file.fileno()).st_size))
                    self.end_headers()
                    self.wfile.write(head)
                    shutil.copyfileobj(file, self.wfile, 1 << 18)

            def log_message(self, format: str, *args: object) -> None:
                """Scrapes are not logged."""

        host, port = parse_bind(bind)
        server_class = _Server6 if ":" in host else ThreadingHTTPServer
        self._server = server_class((host, port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="worker-metrics", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()
        logger.info("worker metrics listening", extra={"port": self.port})

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


class LockAges(Collector):
    """`hami_worker_node_lock_age_seconds{node,lock}`: how long each held node lock (HAMi's
    `hami.io/mutex.lock`, a vendor's own such as `cambricon.com/dsmlu.lock`: `keys`) has been held, from the
    node informer at scrape time. Only held locks have a sample; a value that does not parse counts from
    the epoch (it is that old for every rule: app.core.nodelock treats it as expired)."""

    def __init__(
        self,
        nodes: Callable[[], list[dict[str, Any]]],
        clock: Callable[[], float],
        keys: Sequence[str] = (LOCK_ANNOTATION,),
    ) -> None:
        self._nodes = nodes
        self._clock = clock
        self._keys = tuple(keys)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "hami_worker_node_lock_age_seconds",
            "Seconds a held node lock has been held",
            labels=["node", "lock"],
        )
        now = self._clock()
        for node in self._nodes():
            annotations = node_annotations(node)
            for key in self._keys:
                value = annotations.get(key)
                if value is None:
                    continue
                try:
                    taken = parse_lock(value).time.timestamp()
                except LockParseError:
                    taken = 0.0
                family.add_metric([node_name(node), key], max(0.0, now - taken))
        yield family
