"""The headline figures of `python -m bench --control-plane real` (derived from its three runs) and its
text summary: one line per run, CPU per pod per process, then the goals.

The goals (docs/benchmarks.md) are reported, never enforced: a benchmark reports, it does not fail.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PHASES = ("baseline", "noop", "extender")
Obj = dict[str, Any]

COLUMNS = ("run", "pods/s", "ks algo p50", "ks algo mean", "ks attempt p50", "srv filter p50", "srv bind p50")
CPU_COLUMNS = ("kube-scheduler", "kube-apiserver", "etcd", "service", "worker", "external", "nodes")


def _row(name: str, phase: Mapping[str, Any]) -> list[str]:
    ks = phase["kube_scheduler"]
    server = phase["server"]
    filtering = server.get("/filter") or server.get("/bench/noop") or {}
    return [
        name,
        f"{phase['pods_per_second']:.1f}",
        f"{ks['algorithm']['p50_ms']:.1f}",
        f"{ks['algorithm']['mean_ms']:.1f}",
        f"{ks['attempt_scheduled']['p50_ms']:.1f}",
        f"{filtering.get('p50_ms', 0.0):.2f}" if filtering else "-",
        f"{(server.get('/bind') or {}).get('p50_ms', 0.0):.2f}" if server.get("/bind") else "-",
    ]


def _render(lines: list[list[str]]) -> list[str]:
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return ["  ".join(c.rjust(widths[i]) for i, c in enumerate(line)) for line in lines]


def api_table(phases: Mapping[str, Any], small: float = 0.1) -> list[str]:
    """kube-apiserver's requests per scheduled pod, by verb and resource, one column per run (the
    driver's own requests left out; their sum on the last line). Keys below `small` in every run —
    mostly each kube-scheduler's informers starting — are summed on one line (the report has them all)."""
    per_pod = {name: phase["api_requests"]["per_pod"] for name, phase in phases.items()}
    keys = sorted({k for counts in per_pod.values() for k in counts}, key=lambda k: (k.split(" ", 1)[1], k))
    shown = [k for k in keys if any(counts.get(k, 0.0) >= small for counts in per_pod.values())]
    folded = [k for k in keys if k not in shown]
    lines = [["API requests per pod", *phases]]
    lines += [
        [k, *(f"{counts[k]:.2f}" if k in counts else "-" for counts in per_pod.values())] for k in shown
    ]
    if folded:
        rest = [sum(counts.get(k, 0.0) for k in folded) for counts in per_pod.values()]
        lines.append([f"others < {small:g} each ({len(folded)} keys)", *(f"{v:.2f}" for v in rest)])
    lines.append(["total", *(f"{p['api_requests']['per_pod_total']:.2f}" for p in phases.values())])
    harness = [sum(p["api_requests"]["harness_per_pod"].values()) for p in phases.values()]
    lines.append(["(the driver's own, not above)", *(f"{h:.2f}" for h in harness)])
    return _render_left(lines)


def _render_left(lines: list[list[str]]) -> list[str]:
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return [
        "  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(line))
        for line in lines
    ]


def table(report: Mapping[str, Any]) -> str:
    phases = report["phases"]
    lines = [list(COLUMNS)] + [_row(name, phase) for name, phase in phases.items()]
    cpu = [["CPU ms/pod", *CPU_COLUMNS]] + [
        [name, *(f"{phase['cpu_ms_per_pod'].get(k, 0.0):.1f}" for k in CPU_COLUMNS)]
        for name, phase in phases.items()
    ]
    rate = report.get("arrival_rate")
    mode = f"pods arriving at {rate:g}/s" if rate else "saturated"
    out = [
        f"{report['nodes']} nodes x {report['gpus_per_node']} GPUs, {report['pods']} pods per run, {mode}"
        " (ks = kube-scheduler's histograms, srv = server-side per request, ms)",
        *_render(lines),
        "",
        *_render(cpu),
        "",
        *api_table(phases),
        "",
    ]
    if rate:
        for name, phase in phases.items():
            arrivals, waits = phase["arrivals"], phase["arrivals"]["create_to_bind_ms"]
            out.append(
                f"  {name}: {arrivals['created']} pods created"
                f" (lag p99 {arrivals['lag_ms']['p99_ms']:.1f} ms);"
                f" created to bound p50 {waits['p50_ms']:.1f} ms, p99 {waits['p99_ms']:.1f} ms"
            )
    for key, check in report["targets"].items():
        verdict = "met" if check["met"] else "NOT met"
        out.append(f"  {key:<28} {check['target']:<6} measured {check['measured']}  {verdict}")
    loads = "; ".join(
        f"{name} {' '.join(map(str, load['end']))}" for name, load in report["load_average"].items()
    )
    out.append(f"  load average at the end of each run: {loads}")
    return "\n".join(out)


def headline(size: Obj, phases: dict[str, Obj]) -> Obj:
    """The figures the acceptance names, derived from the runs; `size` the run's settings. Without a noop
    run (an outside extender, bench/real_external.py) the floor ratios are absent, not zero. With an
    arrival rate (latency mode, bench/arrival.py) the pods/s are the rate, so the throughput goal is not
    judged; the algorithm latencies are what to read."""
    runs = [p for p in PHASES if p in phases]
    rate = {p: phases[p]["pods_per_second"] for p in runs}
    algorithm = {p: phases[p]["kube_scheduler"]["algorithm"] for p in runs}
    server = phases["extender"]["server"]
    ratio = round(rate["extender"] / rate["baseline"], 3) if rate["baseline"] else 0.0
    latency_mode = bool(size.get("arrival_rate"))
    checks: Obj = {}
    if not latency_mode:
        checks["extender_throughput_ratio"] = {"target": ">= 0.5", "measured": ratio, "met": ratio >= 0.5}
    figures: Obj = {}
    if "noop" in phases:
        figures, floor_checks = _floor(phases, algorithm)
        checks.update(floor_checks)
    if latency_mode:
        figures["create_to_bind_p50_ms"] = {
            p: phases[p]["arrivals"]["create_to_bind_ms"]["p50_ms"] for p in runs
        }
    return {
        **size,
        "mode": "latency" if latency_mode else "saturated",
        "extender_pods_per_second": rate["extender"],
        "baseline_pods_per_second": rate["baseline"],
        "extender_throughput_ratio": ratio,
        **figures,
        "bind_p50_ms": (server.get("/bind") or {}).get("p50_ms", 0.0),
        "bind_p99_ms": (server.get("/bind") or {}).get("p99_ms", 0.0),
        "ks_algorithm_p50_ms": {p: algorithm[p]["p50_ms"] for p in runs},
        "ks_algorithm_mean_ms": {p: algorithm[p]["mean_ms"] for p in runs},
        "ks_attempt_p50_ms": {p: phases[p]["kube_scheduler"]["attempt_scheduled"]["p50_ms"] for p in runs},
        "cpu_ms_per_pod": {p: phases[p]["cpu_ms_per_pod"] for p in runs},
        "api_requests_per_pod": {p: phases[p]["api_requests"]["per_pod"] for p in runs},
        "api_requests_per_pod_total": {p: phases[p]["api_requests"]["per_pod_total"] for p in runs},
        "load_average": {p: phases[p]["load_average"] for p in runs},
        "targets": checks,
        "correct": all(phases[p]["correctness"]["ok"] for p in runs),
    }


def _floor(phases: dict[str, Obj], algorithm: dict[str, Obj]) -> tuple[Obj, Obj]:
    """Our /filter against the no-op floor measured in the same run: the figures and their goals."""
    server, floor = phases["extender"]["server"], phases["noop"]["server"]
    filter_p50 = (server.get("/filter") or {}).get("p50_ms", 0.0)
    noop_p50 = (floor.get("/bench/noop") or {}).get("p50_ms", 0.0)
    # kube-scheduler's view: its scheduling algorithm (plugins + the extender's /filter); the noop and the
    # extender runs differ only in the extender's work (the run without one scores every feasible node,
    # so it is no floor for the algorithm time: scoring one node after an extender is cheaper)
    ks_extra = round(algorithm["extender"]["mean_ms"] - algorithm["noop"]["mean_ms"], 3)
    server_ratio = round(filter_p50 / noop_p50, 2) if noop_p50 else 0.0
    noop_algorithm = algorithm["noop"]["p50_ms"]
    ks_ratio = round(algorithm["extender"]["p50_ms"] / noop_algorithm, 2) if noop_algorithm else 0.0
    figures = {
        "noop_pods_per_second": phases["noop"]["pods_per_second"],
        "filter_p50_ms": filter_p50,
        "filter_p99_ms": (server.get("/filter") or {}).get("p99_ms", 0.0),
        "noop_p50_ms": noop_p50,
        "filter_noop_ratio": server_ratio,
        "ks_extender_minus_noop_mean_ms": ks_extra,
        "ks_filter_noop_ratio": ks_ratio,
    }
    checks = {
        "filter_noop_ratio": {"target": "<= 2", "measured": server_ratio, "met": 0 < server_ratio <= 2},
        "ks_filter_noop_ratio": {"target": "<= 2", "measured": ks_ratio, "met": 0 < ks_ratio <= 2},
    }
    return figures, checks
