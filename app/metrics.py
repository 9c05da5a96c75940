"""Prometheus metrics of the HTTP service: request phases, denials, locks, and HAMi's gauges.

Under Gunicorn the workers are separate processes, so counters and histograms live in
prometheus_client's multiprocess files (PROMETHEUS_MULTIPROC_DIR) and any worker's /metrics aggregates
all of them (a MultiProcessCollector per scrape). HAMi's allocation gauges (reference §8) and our state
gauges are not per-process values: they are computed at scrape time from the shared state by a collector,
so every worker reports the same numbers. Without PROMETHEUS_MULTIPROC_DIR (tests, a single process) a
private registry is used.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from flask import Flask, Response, request
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from prometheus_flask_exporter import PrometheusMetrics

from app.core.model import DeviceUse
from app.state.snapshot import Snapshot
from app.state.status import ReplicaStatus
from app.state.usage import UsageView

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
MIB = 1024 * 1024

FILTER_SECONDS = Histogram(
    "hami_scheduler_filter_duration_seconds", "Time spent in /filter, by phase", ["phase"], buckets=_BUCKETS
)
BIND_SECONDS = Histogram(
    "hami_scheduler_bind_duration_seconds", "Time spent in /bind, by phase", ["phase"], buckets=_BUCKETS
)
WEBHOOK_SECONDS = Histogram(
    "hami_scheduler_webhook_duration_seconds", "Time spent in /webhook", buckets=_BUCKETS
)
FILTER_RESULTS = Counter("hami_scheduler_filter_results", "Filter answers by result", ["result"])
FILTER_DENIALS = Counter("hami_scheduler_filter_denials", "Pods not placed, by main reason", ["reason"])
BIND_RESULTS = Counter("hami_scheduler_bind_results", "Bind answers by result", ["result"])
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
    BIND_SECONDS,
    WEBHOOK_SECONDS,
    FILTER_RESULTS,
    FILTER_DENIALS,
    BIND_RESULTS,
    WEBHOOK_RESULTS,
    LOCK_CONTENTION,
    LOCK_WAIT,
    LOCK_TAKEOVERS,
)


def observe_phases(histogram: Histogram, phases: dict[str, float], total: float) -> None:
    for phase, seconds in phases.items():
        histogram.labels(phase).observe(seconds)
    histogram.labels("total").observe(total)


class StateCollector(Collector):
    """HAMi's gauges (§8, with `zone="vGPU"`) and our state gauges, read from the shared state at scrape."""

    def __init__(
        self,
        read: Callable[[], tuple[Snapshot | None, UsageView, ReplicaStatus]],
        clock: Callable[[], float],
    ) -> None:
        self._read = read
        self._clock = clock

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snapshot, view, status = self._read()
        usage = view.nodes
        now = self._clock()
        labels = ["node", "device_uuid", "device_index", "device_type", "zone"]
        mem_limit = GaugeMetricFamily("hami_gpu_memory_limit_bytes", "GPU memory of a device", labels=labels)
        core_limit = GaugeMetricFamily("hami_gpu_core_limit_ratio", "GPU cores of a device", labels=labels)
        mem_alloc = GaugeMetricFamily(
            "hami_gpu_memory_allocated_bytes",
            "GPU memory allocated on a device",
            labels=["node", "device_uuid", "device_index", "device_cores", "device_type", "zone"],
        )
        shared = GaugeMetricFamily("hami_gpu_shared_count", "Tasks sharing a device", labels=labels)
        core_alloc = GaugeMetricFamily("hami_gpu_core_allocated_ratio", "GPU cores allocated", labels=labels)
        mem_ratio = GaugeMetricFamily(
            "hami_node_gpu_memory_allocated_ratio", "Allocated share of a device's memory", labels=labels
        )
        for record in snapshot.nodes.values() if snapshot else ():
            node = record.devices.name
            node_use = usage.get(node, {})
            for d in record.devices.devices:
                use = node_use.get(d.id, DeviceUse())
                base = [node, d.id, str(d.index), d.type, "vGPU"]
                mem_limit.add_metric(base, d.devmem * MIB)
                core_limit.add_metric(base, d.devcore)
                mem_alloc.add_metric(
                    [node, d.id, str(d.index), str(d.devcore), d.type, "vGPU"], use.mem * MIB
                )
                shared.add_metric(base, use.slots)
                core_alloc.add_metric(base, use.cores)
                if d.devmem > 0:
                    mem_ratio.add_metric(base, use.mem / d.devmem)
        overview = GaugeMetricFamily(
            "hami_node_gpu_overview",
            "GPU memory allocated on a device, with its limits",
            labels=[
                "node",
                "device_uuid",
                "device_index",
                "device_cores",
                "device_memory_limit",
                "device_type",
                "zone",
            ],
        )
        for record in snapshot.nodes.values() if snapshot else ():
            node_use = usage.get(record.devices.name, {})
            for d in record.devices.devices:
                use = node_use.get(d.id, DeviceUse())
                overview.add_metric(
                    [record.devices.name, d.id, str(d.index), str(d.devcore), str(d.devmem), d.type, "vGPU"],
                    use.mem * MIB,
                )
        yield from (mem_limit, core_limit, mem_alloc, shared, core_alloc, mem_ratio, overview)
        yield from self._pods(view)
        yield from self._quotas(snapshot, view)
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

    @staticmethod
    def _pods(view: UsageView) -> Iterator[GaugeMetricFamily]:
        """Per pod and device (collapsed usage, so container_index is always 0 as in HAMi, quirk #39)."""
        labels = ["namespace", "node", "pod", "container_index", "device_uuid", "zone"]
        memory = GaugeMetricFamily("hami_vgpu_memory_allocated_bytes", "GPU memory of a pod", labels=labels)
        cores = GaugeMetricFamily("hami_vgpu_core_allocated_ratio", "GPU cores of a pod", labels=labels)
        for entry in view.entries.values():
            for uuid, use in entry.uses.items():
                names = [entry.namespace, entry.node, entry.name, "0", uuid, "vGPU"]
                memory.add_metric(names, use.mem * MIB)
                cores.add_metric(names, use.cores)
        yield from (memory, cores)

    @staticmethod
    def _quotas(snapshot: Snapshot | None, view: UsageView) -> Iterator[GaugeMetricFamily]:
        limits = snapshot.quota_limits if snapshot else {}
        used = GaugeMetricFamily(
            "hami_resource_quota_used", "Quota used", labels=["namespace", "quota_name", "limit", "zone"]
        )
        limit = GaugeMetricFamily(
            "hami_resource_quota_limit", "Quota limit", labels=["namespace", "quota_name", "zone"]
        )
        for namespace in sorted(limits.keys() | view.quota.keys()):
            names = limits.get(namespace, {}).keys() | view.quota.get(namespace, {}).keys()
            for name in sorted(names):
                value = limits.get(namespace, {}).get(name)
                used.add_metric(
                    [namespace, name, str(value if value is not None else 0), "vGPU"],
                    view.quota.get(namespace, {}).get(name, 0),
                )
                if value is not None:
                    limit.add_metric([namespace, name, "vGPU"], value)
        yield from (used, limit)


def exposition_registry(collector: Collector, private: CollectorRegistry) -> CollectorRegistry:
    """What /metrics exposes. Under Gunicorn (PROMETHEUS_MULTIPROC_DIR) a fresh registry per scrape that
    reads every worker's files plus the shared-state collector; prometheus_flask_exporter's own multiprocess
    endpoint builds a registry holding only the files, which silently dropped HAMi's gauges."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return private
    registry = CollectorRegistry()
    MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    registry.register(collector)
    return registry


def init_metrics(app: Flask, collector: Collector) -> PrometheusMetrics:
    """Flask request metrics plus ours on /metrics, multiprocess-aware."""
    private = CollectorRegistry()
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        for metric in OWN_METRICS:
            private.register(metric)
        private.register(collector)
    # In multiprocess mode the values live in files whatever the registry; `private` only names them.
    metrics = PrometheusMetrics(
        app, path=None, registry=private, group_by="endpoint", excluded_paths=["^/metrics$"]
    )

    @app.get("/metrics")
    def metrics_endpoint() -> Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        body = encoder(exposition_registry(collector, private))
        return Response(body, status=200, headers={"Content-Type": content_type})

    return metrics
