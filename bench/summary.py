"""Turning one benchmark run into report keys: Prometheus scrapes, phase breakdowns, targets, the table.

The acceptance targets (docs/benchmarks.md) are checked on the largest size of the run; whether a target
is met is reported, never enforced — a benchmark reports, it does not fail the build.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

Obj = dict[str, Any]
Scrape = dict[tuple[str, tuple[tuple[str, str], ...]], float]

# (report key, comparison, limit, what the doc calls it)
TARGETS: tuple[tuple[str, str, float, str], ...] = (
    ("filter_p99_ms", "<=", 20.0, "filter p99 <= 20 ms"),
    ("filter_noop_ratio", "<=", 3.0, "filter p50 <= 3 x the no-op floor p50"),
    ("pods_per_second", ">=", 180.0, ">= 180 pods/s filter+bind end to end"),
    ("registration_sweep_s", "<=", 1.0, "registration sweep <= 1 s"),
    ("worker_rss_mb", "<=", 200.0, "Gunicorn worker RSS <= 200 MB"),
)
TARGET_SIZE = (5000, 8, 20000, 2)  # nodes, GPUs per node, running pods, workers: where the targets apply
TABLE_KEYS = (
    ("nodes", "nodes"),
    ("running_pods", "running"),
    ("pods", "pods"),
    ("filter_p50_ms", "filter p50"),
    ("filter_p99_ms", "filter p99"),
    ("noop_p50_ms", "noop p50"),
    ("noop_quiet_p50_ms", "quiet noop"),
    ("filter_noop_ratio", "ratio"),
    ("bind_p50_ms", "bind p50"),
    ("bind_p99_ms", "bind p99"),
    ("webhook_p99_ms", "webhook p99"),
    ("pods_per_second", "pods/s"),
    ("startup_s", "ready s"),
    ("registration_sweep_s", "sweep s"),
    ("worker_rss_mb", "RSS MB"),
)


def percentile(samples: Sequence[float], q: float) -> float:
    """Nearest rank (q in 0..100), rounded to µs; 0 without samples."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    rank = max(1, -(-int(q * len(ordered)) // 100))
    return round(ordered[min(rank, len(ordered)) - 1], 3)


def latency(samples: Sequence[float]) -> Obj:
    return {
        "n": len(samples),
        "p50_ms": percentile(samples, 50),
        "p90_ms": percentile(samples, 90),
        "p99_ms": percentile(samples, 99),
        "max_ms": round(max(samples), 3) if samples else 0.0,
        "mean_ms": round(sum(samples) / len(samples), 3) if samples else 0.0,
    }


WANTED = (
    "hami_scheduler_filter_duration",
    "hami_scheduler_bind_duration",
    "hami_scheduler_node_lock",
    "hami_worker_",
)


def parse_metrics(text: str, wanted: tuple[str, ...] = WANTED) -> Scrape:
    """The samples of the families the benchmark reads (`wanted` prefixes) of a Prometheus text exposition,
    keyed by (name, sorted labels). Other lines are dropped before parsing: at 5,000 nodes the service's
    HAMi gauges are 340,000 samples, which prometheus_client's parser needs tens of seconds for."""
    kept = []
    for line in text.splitlines():
        name = line.split(" ", 3)[2] if line.startswith("# ") and line.count(" ") >= 2 else line
        if name.startswith(wanted):
            kept.append(line)
    values: Scrape = {}
    for family in text_string_to_metric_families("\n".join(kept) + "\n"):
        for sample in family.samples:
            values[(sample.name, tuple(sorted(sample.labels.items())))] = float(sample.value)
    return values


def _delta(before: Scrape, after: Scrape, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


def phases(before: Scrape, after: Scrape, histogram: str) -> Obj:
    """Mean milliseconds per call of each `phase` of a histogram over the window (sum/count deltas)."""
    names = {dict(labels).get("phase", "") for name, labels in after if name == f"{histogram}_count"}
    result: Obj = {}
    for phase in sorted(names - {""}):
        count = _delta(before, after, f"{histogram}_count", phase=phase)
        total = _delta(before, after, f"{histogram}_sum", phase=phase)
        if count > 0:
            result[phase] = {"calls": int(count), "mean_ms": round(1000 * total / count, 3)}
    return result


def service_breakdown(before: Scrape, after: Scrape) -> Obj:
    """Server-side filter/bind phase means and the node-lock figures over the measured window."""
    waits = _delta(before, after, "hami_scheduler_node_lock_wait_seconds_count")
    waited = _delta(before, after, "hami_scheduler_node_lock_wait_seconds_sum")
    return {
        "filter_phases": phases(before, after, "hami_scheduler_filter_phase_duration_seconds"),
        "bind_phases": phases(before, after, "hami_scheduler_bind_phase_duration_seconds"),
        "lock_contended_binds": int(_delta(before, after, "hami_scheduler_node_lock_contention_total")),
        "lock_wait_mean_ms": round(1000 * waited / waits, 3) if waits else 0.0,
    }


def sweep_stats(scrape: Scrape) -> tuple[int, float]:
    """(passes, total seconds) of the worker's registration-pass histogram."""
    count = scrape.get(("hami_worker_registration_sweep_seconds_count", ()), 0.0)
    total = scrape.get(("hami_worker_registration_sweep_seconds_sum", ()), 0.0)
    return int(count), total


def targets(result: Mapping[str, Any]) -> Obj:
    """Each acceptance target with the measured value and whether it was met."""
    size = (
        result.get("nodes"),
        result.get("gpus_per_node"),
        result.get("running_pods"),
        result.get("workers"),
    )
    checks: Obj = {}
    for key, op, limit, label in TARGETS:
        value = result.get(key)
        met = None
        if isinstance(value, int | float):
            met = value <= limit if op == "<=" else value >= limit
        checks[key] = {"target": f"{op} {limit:g}", "what": label, "measured": value, "met": met}
    return {"at_target_size": size == TARGET_SIZE, "checks": checks}


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    header = [label for _, label in TABLE_KEYS]
    lines = [header]
    for row in rows:
        cells = []
        for key, _ in TABLE_KEYS:
            value = row.get(key)
            cells.append(f"{value:.2f}" if isinstance(value, float) else str(value))
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(c.rjust(widths[i]) for i, c in enumerate(line)) for line in lines)
