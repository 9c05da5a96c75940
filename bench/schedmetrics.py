"""What the real-control-plane benchmark reads about latency: kube-scheduler's own histograms, ours, and the
per-request server-side durations `bench/gunicorn_timing.py` writes.

kube-scheduler (v1.34) has no extender-specific metric: the extender's /filter call runs inside
`scheduler_scheduling_algorithm_duration_seconds` (with the Filter and Score plugins), its /bind inside
`scheduler_scheduling_attempt_duration_seconds{result="scheduled"}` (algorithm + binding cycle), and the
framework's Bind plugin (the default binder, when no extender binds) in
`scheduler_framework_extension_point_duration_seconds{extension_point="Bind"}`. The no-op and the extender
runs of one benchmark differ only in the extender's work, so their algorithm durations compare our /filter
with the floor as kube-scheduler saw them (means: exact; percentiles: histogram estimates, buckets
doubling from 1 ms); the run without an extender is no floor for it: kube-scheduler then scores every
feasible node, after an extender only the one node it answered. Each run has a fresh kube-scheduler, so
its counters start at zero; our service keeps running, so its histograms are read as before/after deltas.
"""

from __future__ import annotations

import contextlib
import math
import ssl
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import urllib3

from bench import summary

Obj = dict[str, Any]
Scrape = summary.Scrape
KUBE_SCHEDULER = ("scheduler_",)
OURS = ("hami_scheduler_filter_", "hami_scheduler_bind_", "hami_scheduler_node_lock")
TIMED_PATHS = ("/filter", "/bind", "/bench/noop", "/webhook")


def get(url: str, ca_file: str | None = None) -> urllib3.BaseHTTPResponse:
    """GET `url` (kube-scheduler's self-signed secure port when `ca_file` is None)."""
    context = ssl.create_default_context(cafile=ca_file) if ca_file else ssl._create_unverified_context()
    with urllib3.PoolManager(ssl_context=context, retries=False, timeout=60.0) as http:
        return http.request("GET", url)


def scrape(url: str, wanted: tuple[str, ...], ca_file: str | None = None) -> Scrape:
    """GET `url` and parse it (see `get`)."""
    response = get(url, ca_file)
    if response.status != 200:
        raise RuntimeError(f"GET {url}: HTTP {response.status}")
    return summary.parse_metrics(response.data.decode(), wanted)


def settled_scrape(url: str, bound: int, timeout: float = 10.0) -> Scrape:
    """kube-scheduler's metrics (`url`: its secure port) once they count every bound pod: it records a pod
    as scheduled after its binding cycle returned, a moment after a watch showed the pod bound."""
    deadline = time.monotonic() + timeout
    while True:
        scrape_ = scrape(url + "/metrics", KUBE_SCHEDULER)
        scheduled = sum(
            v
            for (n, labels), v in scrape_.items()
            if n == "scheduler_schedule_attempts_total" and dict(labels).get("result") == "scheduled"
        )
        if scheduled >= bound or time.monotonic() > deadline:
            return scrape_
        time.sleep(0.2)


def wait_ready(url: str, timeout: float = 120.0) -> None:
    """Until kube-scheduler's /readyz (`url`: its secure port) answers 200 — its informers synced — so
    the first pod of a paced run does not wait behind its start-up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(urllib3.exceptions.HTTPError, OSError):
            if get(url + "/readyz").status == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"kube-scheduler at {url} not ready after {timeout:g}s")


def _matches(labels: tuple[tuple[str, str], ...], wanted: Mapping[str, str]) -> bool:
    present = dict(labels)
    return all(present.get(k) == v for k, v in wanted.items())


def _sum(scrape_: Scrape, name: str, labels: Mapping[str, str]) -> float:
    return sum(v for (n, ls), v in scrape_.items() if n == name and _matches(ls, labels))


def _buckets(scrape_: Scrape, name: str, labels: Mapping[str, str]) -> dict[float, float]:
    found: dict[float, float] = {}
    for (metric, ls), value in scrape_.items():
        if metric == f"{name}_bucket" and _matches(ls, labels):
            bound = float(dict(ls)["le"])
            found[bound] = found.get(bound, 0.0) + value
    return found


def histogram(after: Scrape, name: str, before: Scrape | None = None, **labels: str) -> Obj:
    """n, mean and p50/p90/p99 (Prometheus' histogram_quantile interpolation) in ms of the histogram
    `name` (without `_bucket`), summed over the series matching `labels`, as `after - before`."""
    before = before or {}
    earlier = _buckets(before, name, labels)
    cumulative = sorted((b, v - earlier.get(b, 0.0)) for b, v in _buckets(after, name, labels).items())
    count = _sum(after, f"{name}_count", labels) - _sum(before, f"{name}_count", labels)
    total = _sum(after, f"{name}_sum", labels) - _sum(before, f"{name}_sum", labels)
    result: Obj = {"n": int(count), "mean_ms": round(1000 * total / count, 3) if count else 0.0}
    for q in (50, 90, 99):
        result[f"p{q}_ms"] = _quantile(cumulative, count, q / 100)
    return result


def _quantile(cumulative: list[tuple[float, float]], count: float, q: float) -> float:
    if count <= 0 or not cumulative:
        return 0.0
    rank, lower, below = q * count, 0.0, 0.0
    for bound, seen in cumulative:
        if seen >= rank:
            if math.isinf(bound):
                return round(1000 * lower, 3)  # above the largest finite bucket: its bound, as Prometheus
            width = seen - below
            share = (rank - below) / width if width > 0 else 1.0
            return round(1000 * (lower + (bound - lower) * share), 3)
        lower, below = bound, seen
    return round(1000 * lower, 3)


def kube_scheduler_view(scrape_: Scrape) -> Obj:
    """The latencies and attempt counts of one kube-scheduler run (its counters start at zero)."""
    attempts: dict[str, int] = {}
    for (metric, labels), value in scrape_.items():
        if metric == "scheduler_schedule_attempts_total":
            result = dict(labels).get("result", "")
            attempts[result] = attempts.get(result, 0) + int(value)
    points = {
        point: histogram(
            scrape_, "scheduler_framework_extension_point_duration_seconds", extension_point=point
        )
        for point in ("PreFilter", "PreScore", "Score", "Reserve", "Permit", "PreBind", "Bind")
    }
    return {
        "attempts": attempts,
        "algorithm": histogram(scrape_, "scheduler_scheduling_algorithm_duration_seconds"),
        "attempt_scheduled": histogram(
            scrape_, "scheduler_scheduling_attempt_duration_seconds", result="scheduled"
        ),
        "pod_scheduling_sli": histogram(scrape_, "scheduler_pod_scheduling_sli_duration_seconds"),
        "extension_points": {k: v for k, v in points.items() if v["n"]},
    }


def ours_view(before: Scrape, after: Scrape) -> Obj:
    """Our service's own /filter and /bind histograms and phase means over a run."""
    return {
        "filter": histogram(after, "hami_scheduler_filter_duration_seconds", before),
        "bind": histogram(after, "hami_scheduler_bind_duration_seconds", before),
        **summary.service_breakdown(before, after),
    }


def server_timings(folder: Path, since: float, until: float) -> Obj:
    """Per path, the server-side durations (ms) Gunicorn's workers logged between two Unix times."""
    samples: dict[str, list[float]] = {path: [] for path in TIMED_PATHS}
    for file in sorted(folder.glob("*.tsv")) if folder.is_dir() else []:
        for line in file.read_text().splitlines():
            parts = line.split("\t")
            if len(parts) != 3 or parts[1] not in samples:
                continue
            if since <= float(parts[0]) <= until:
                samples[parts[1]].append(float(parts[2]))
    return {path: summary.latency(values) for path, values in samples.items() if values}
