"""Prometheus metrics of the HTTP service: request phases, denials, locks, our state, and HAMi's gauges.

Under Gunicorn the workers are separate processes, so counters and histograms live in
prometheus_client's multiprocess files (PROMETHEUS_MULTIPROC_DIR) and any worker's /metrics aggregates
all of them (a MultiProcessCollector per scrape). Our state gauges (leader, synced, ledger size, ages,
node counts) are not per-process values: a small collector computes them at scrape time from the shared
state, so every worker reports the same numbers. Without PROMETHEUS_MULTIPROC_DIR (tests, a single
process) a private registry is used.

HAMi's allocation gauges (reference §8, ~330,000 samples at 5,000 nodes × 8 GPUs) are not built here: the
registration worker renders them as text into the state directory (app/state/gauges.py) and /metrics
streams that file after the rest, without parsing it, so a scrape costs a Gunicorn worker a file copy
instead of seconds of CPU and ~190 MB of memory (docs/benchmarks.md, "Metrics at scale"). Its families
are distinct from everything above, so no family appears twice.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from flask import Flask, Response, request
from prometheus_client import CollectorRegistry, Counter, Histogram, PlatformCollector
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from prometheus_flask_exporter import PrometheusMetrics

from app.state.snapshot import Snapshot
from app.state.status import ReplicaStatus
from app.state.usage import UsageView
from app.telemetry import BuildInfoCollector, ProcessTreeCollector

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
OPENMETRICS_EOF = b"# EOF\n"

FILTER_SECONDS = Histogram(
    "hami_scheduler_filter_duration_seconds", "Time spent answering one /filter", buckets=_BUCKETS
)
FILTER_PHASE_SECONDS = Histogram(
    "hami_scheduler_filter_phase_duration_seconds",
    "Time spent in each phase of /filter",
    ["phase"],
    buckets=_BUCKETS,
)
BIND_SECONDS = Histogram(
    "hami_scheduler_bind_duration_seconds", "Time spent answering one /bind", buckets=_BUCKETS
)
BIND_PHASE_SECONDS = Histogram(
    "hami_scheduler_bind_phase_duration_seconds",
    "Time spent in each phase of /bind",
    ["phase"],
    buckets=_BUCKETS,
)
ALLOCATION_WRITE_SECONDS = Histogram(
    "hami_scheduler_allocation_write_duration_seconds",
    "Time spent writing a filter's allocation to the pod after /filter answered, by outcome",
    ["outcome"],
    buckets=_BUCKETS,
)
WEBHOOK_SECONDS = Histogram(
    "hami_scheduler_webhook_duration_seconds", "Time spent in /webhook", buckets=_BUCKETS
)
FILTER_RESULTS = Counter("hami_scheduler_filter_results", "Filter answers by result", ["result"])
FILTER_DENIALS = Counter("hami_scheduler_filter_denials", "Pods not placed, by main reason", ["reason"])
GANG_PLANS = Counter(
    "hami_scheduler_gang_plans",
    "Gang members' /filter deciding for their quorum (docs/gangs.md), by outcome: planned, refused",
    ["outcome"],
)
BIND_RESULTS = Counter(
    "hami_scheduler_bind_results", "Bind answers by result and bounded reason", ["result", "reason"]
)
PREEMPT_RESULTS = Counter(
    "hami_scheduler_preempt_results", "Preempt answers by result (docs/preemption.md)", ["result"]
)
WEBHOOK_RESULTS = Counter("hami_scheduler_webhook_results", "Admission answers by result", ["result"])
LOCK_CONTENTION = Counter(
    "hami_scheduler_node_lock_contention", "Binds that found the node locked by another pod"
)
LOCK_WAIT = Histogram(
    "hami_scheduler_node_lock_wait_seconds", "Time a bind waited for a node lock", buckets=_BUCKETS
)
LOCK_TAKEOVERS = Counter(
    "hami_scheduler_node_lock_takeovers", "Locks taken over from another holder", ["why"]
)

OWN_METRICS: tuple[Collector, ...] = (
    FILTER_SECONDS,
    FILTER_PHASE_SECONDS,
    ALLOCATION_WRITE_SECONDS,
    BIND_SECONDS,
    BIND_PHASE_SECONDS,
    WEBHOOK_SECONDS,
    FILTER_RESULTS,
    FILTER_DENIALS,
    BIND_RESULTS,
    PREEMPT_RESULTS,
    WEBHOOK_RESULTS,
    LOCK_CONTENTION,
    LOCK_WAIT,
    LOCK_TAKEOVERS,
)


def observe_phases(total: Histogram, by_phase: Histogram, phases: dict[str, float], seconds: float) -> None:
    """The request's duration into `total`, each phase's into `by_phase`."""
    for phase, spent in phases.items():
        by_phase.labels(phase).observe(spent)
    total.observe(seconds)


class ReplicaCollector(Collector):
    """Our small state gauges, read from the shared state at scrape (HAMi's come from the rendered file)."""

    def __init__(
        self,
        read: Callable[[], tuple[Snapshot | None, UsageView, ReplicaStatus]],
        clock: Callable[[], float],
        gauges_age: Callable[[], float],
    ) -> None:
        self._read = read
        self._clock = clock
        self._gauges_age = gauges_age

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snapshot, view, status = self._read()
        now = self._clock()
        yield GaugeMetricFamily(
            "hami_scheduler_leader", "1 when this replica leads", value=int(status.is_leader(now))
        )
        yield GaugeMetricFamily(
            "hami_scheduler_synced", "1 when the cache is synced", value=int(status.synced)
        )
        yield GaugeMetricFamily(
            "hami_scheduler_ledger_reservations", "Reservations in the ledger", value=len(view.entries)
        )
        age = now - snapshot.written_at if snapshot and snapshot.written_at else float("nan")
        yield GaugeMetricFamily(
            "hami_scheduler_snapshot_age_seconds", "Age of the inventory snapshot", value=age
        )
        yield GaugeMetricFamily(
            "hami_scheduler_registrar_heartbeat_age_seconds",
            "Seconds since the registration worker's last heartbeat",
            value=now - status.heartbeat if status.heartbeat else float("nan"),
        )
        yield GaugeMetricFamily(
            "hami_scheduler_nodes_registered",
            "Nodes in the snapshot",
            value=len(snapshot.nodes) if snapshot else 0,
        )
        yield GaugeMetricFamily(
            "hami_scheduler_nodes_unusable",
            "Nodes left out of the snapshot (corrupt or unhealthy)",
            value=len(snapshot.broken) if snapshot else 0,
        )
        yield GaugeMetricFamily(
            "hami_scheduler_state_metrics_age_seconds",
            "Seconds since the registration worker last rendered or confirmed HAMi's gauges (NaN: none;"
            " left out of /metrics when older than the bound)",
            value=self._gauges_age(),
        )


class _Body:
    """The response body: our metrics, then the rendered file in chunks, then the OpenMetrics end marker.
    A class rather than a generator so that the file is closed even when the body is never iterated."""

    CHUNK = 256 * 1024

    def __init__(self, head: bytes, file: BinaryIO, tail: bytes) -> None:
        self._head, self._file, self._tail = head, file, tail

    def __iter__(self) -> Iterator[bytes]:
        yield self._head
        while chunk := self._file.read(self.CHUNK):
            yield chunk
        if self._tail:
            yield self._tail

    def close(self) -> None:
        self._file.close()


def process_collectors(multiprocess: bool) -> tuple[Collector, ...]:
    """hami_build_info, python_info and process_* (app/telemetry.py): under Gunicorn the process metrics
    are the sums over the master (a worker's parent) and its workers, else this process's own."""
    root = os.getppid if multiprocess else os.getpid
    return (BuildInfoCollector(), PlatformCollector(registry=None), ProcessTreeCollector(root))


class _Files(Collector):
    """The multiprocess files of several directories merged as one (this server's and the scheduler
    verbs' server's: each Gunicorn needs its own directory, as PIDs of two containers may coincide)."""

    def __init__(self, directories: tuple[str, ...]) -> None:
        self._directories = directories

    def collect(self) -> Iterator[Any]:
        files = sorted(str(p) for d in self._directories for p in Path(d).glob("*.db"))
        return iter(MultiProcessCollector.merge(files, accumulate=True))  # type: ignore[no-untyped-call]


def exposition_registry(
    collectors: tuple[Collector, ...], private: CollectorRegistry, also: str = ""
) -> CollectorRegistry:
    """What /metrics exposes before HAMi's gauges. Under Gunicorn (PROMETHEUS_MULTIPROC_DIR) a fresh
    registry per scrape that reads every worker's files (and those of `also`, the scheduler verbs'
    server) plus `collectors` (the shared-state and process collectors); prometheus_flask_exporter's own
    multiprocess endpoint builds a registry holding only the files, which silently dropped our state
    gauges."""
    own = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not own:
        return private
    registry = CollectorRegistry()
    registry.register(_Files((own, also) if also else (own,)))
    for collector in collectors:
        registry.register(collector)
    return registry


def init_metrics(
    app: Flask,
    collector: Collector,
    hami_gauges: Callable[[], BinaryIO | None],
    *,
    expose: bool = True,
    also: str = "",
) -> PrometheusMetrics:
    """Flask request metrics plus ours on /metrics, multiprocess-aware; then HAMi's gauges, streamed from
    the file the registration worker renders (`hami_gauges` opens it, None when missing or stale).
    `/metrics?hami_gauges=0` leaves HAMi's gauges out, for a scrape configuration that already takes them
    from the registration worker's port (the chart's ServiceMonitor).

    Without `expose` (the server of the scheduler verbs, reachable only by kube-scheduler) the metrics are
    recorded but served by the public server, which reads the multiprocess files of `also` as well."""
    private = CollectorRegistry()
    multiprocess = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
    collectors = (collector, *process_collectors(multiprocess))
    if not multiprocess:
        for metric in (*OWN_METRICS, *collectors):
            private.register(metric)
    # In multiprocess mode the values live in files whatever the registry; `private` only names them.
    metrics = PrometheusMetrics(
        app, path=None, registry=private, group_by="endpoint", excluded_paths=["^/metrics$"]
    )
    if not expose:
        return metrics

    @app.get("/metrics")
    def metrics_endpoint() -> Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        head = encoder(exposition_registry(collectors, private, also))
        file = hami_gauges() if request.args.get("hami_gauges", "1") not in ("0", "false") else None
        if file is None:
            return Response(head, status=200, headers={"Content-Type": content_type})
        tail = b""
        if content_type.startswith("application/openmetrics-text") and head.endswith(OPENMETRICS_EOF):
            head, tail = head[: -len(OPENMETRICS_EOF)], OPENMETRICS_EOF  # the marker must come last
        length = len(head) + os.fstat(file.fileno()).st_size + len(tail)
        return Response(
            _Body(head, file, tail),
            status=200,
            headers={"Content-Type": content_type, "Content-Length": str(length)},
            direct_passthrough=True,
        )

    return metrics
