"""The text summary of `python -m bench --control-plane real`: one line per run, then the goals.

The goals (docs/benchmarks.md) are reported, never enforced: a benchmark reports, it does not fail.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

COLUMNS = ("run", "pods/s", "ks algo p50", "ks algo mean", "ks attempt p50", "srv filter p50", "srv bind p50")
CPU_COLUMNS = ("kube-scheduler", "kube-apiserver", "etcd", "service", "worker", "nodes")


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


def table(report: Mapping[str, Any]) -> str:
    phases = report["phases"]
    lines = [list(COLUMNS)] + [_row(name, phase) for name, phase in phases.items()]
    cpu = [["CPU ms/pod", *CPU_COLUMNS]] + [
        [name, *(f"{phase['cpu_ms_per_pod'].get(k, 0.0):.1f}" for k in CPU_COLUMNS)]
        for name, phase in phases.items()
    ]
    out = [
        f"{report['nodes']} nodes x {report['gpus_per_node']} GPUs, {report['pods']} pods per run"
        " (ks = kube-scheduler's histograms, srv = server-side per request, ms)",
        *_render(lines),
        "",
        *_render(cpu),
        "",
    ]
    for key, check in report["targets"].items():
        verdict = "met" if check["met"] else "NOT met"
        out.append(f"  {key:<28} {check['target']:<6} measured {check['measured']}  {verdict}")
    loads = "; ".join(
        f"{name} {' '.join(map(str, load['end']))}" for name, load in report["load_average"].items()
    )
    out.append(f"  load average at the end of each run: {loads}")
    return "\n".join(out)
