"""Writes the chart's Grafana dashboard (`make dashboard`), helm/hami-scheduler/dashboards/*.json.

Why generated: forty panels of hand-written Grafana JSON drift (ids, grid positions, repeated selectors);
here each panel is one line of intent. tests/chart checks that the committed file is exactly this output,
that every expression parses with Prometheus's own parser, and that it names only exported metrics.

Every query selects this installation's series with `namespace="$namespace", job=~"$job"` (the chart's
ServiceMonitor scrapes both processes through the `<release>-metrics` Service). HAMi's gauges come from
every replica's registration worker, so allocation panels take `max by` the device before summing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "helm" / "hami-scheduler" / "dashboards" / "hami-scheduler.json"
S = 'namespace="$namespace",job=~"$job"'
NODE = f'{S},node=~"$node"'
RATE = "$__rate_interval"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def q(expr: str, legend: str = "") -> dict[str, Any]:
    return {"expr": expr, "legendFormat": legend}


def quantiles(metric: str, by: str = "") -> list[dict[str, Any]]:
    group = f"le{', ' + by if by else ''}"
    return [
        q(
            f"histogram_quantile({p}, sum by ({group}) (rate({metric}_bucket{{{S}}}[{RATE}])))",
            f"p{int(p * 100)}",
        )
        for p in (0.5, 0.95, 0.99)
    ]


def phase_p99(metric: str) -> list[dict[str, Any]]:
    return [
        q(f"histogram_quantile(0.99, sum by (le, phase) (rate({metric}_bucket{{{S}}}[{RATE}])))", "{{phase}}")
    ]


def per_device(metric: str, extra: str = "") -> str:
    """One series per device, deduplicated across replicas (every worker renders HAMi's gauges)."""
    return f"max by (node, device_uuid, device_index{extra}) ({metric}{{{NODE}}})"


def free_by_node(used: str, limit: str) -> str:
    """What is left per node: each device's limit less its allocation (never below 0), summed."""
    return (
        f"sum by (node) (clamp_min({per_device(limit, ', device_type')} - "
        f"{per_device(used, ', device_type')}, 0))"
    )


def allocated_share(used: str, limit: str, by: str) -> str:
    return (
        f"sum by ({by}) ({per_device(used, ', device_type')}) / "
        f"sum by ({by}) ({per_device(limit, ', device_type')})"
    )


class Board:
    def __init__(self) -> None:
        self.panels: list[dict[str, Any]] = []
        self.y = 0
        self.x = 0
        self.height = 0

    def row(self, title: str) -> None:
        self._newline()
        self.panels.append(
            {
                "type": "row",
                "title": title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y},
            }
        )
        self.y += 1

    def _newline(self) -> None:
        if self.x:
            self.y += self.height
            self.x, self.height = 0, 0

    def panel(
        self,
        title: str,
        targets: list[dict[str, Any]],
        *,
        kind: str = "timeseries",
        unit: str = "short",
        width: int = 8,
        height: int = 8,
        description: str = "",
        max_value: float | None = None,
    ) -> None:
        if self.x + width > 24:
            self._newline()
        defaults: dict[str, Any] = {"unit": unit}
        if max_value is not None:
            defaults.update({"min": 0, "max": max_value})
        panel: dict[str, Any] = {
            "type": kind,
            "title": title,
            "description": description,
            "datasource": DATASOURCE,
            "gridPos": {"h": height, "w": width, "x": self.x, "y": self.y},
            "fieldConfig": {"defaults": defaults, "overrides": []},
            "options": {},
            "targets": [
                {**t, "refId": chr(ord("A") + i), "datasource": DATASOURCE} for i, t in enumerate(targets)
            ],
        }
        if kind == "table":
            for target in panel["targets"]:
                target.update({"format": "table", "instant": True})
        self.panels.append(panel)
        self.x += width
        self.height = max(self.height, height)


def variable(name: str, label: str, query: str, *, multi: bool = False) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "query": {"query": query, "refId": name},
        "definition": query,
        "refresh": 2,
        "sort": 1,
        "multi": multi,
        "includeAll": multi,
        **({"allValue": ".*"} if multi else {}),
    }


def build() -> dict[str, Any]:
    b = Board()
    b.row("Health")
    b.panel(
        "Leaders",
        [q(f"sum(hami_worker_leader{{{S}}})")],
        kind="stat",
        width=4,
        height=4,
        description="Registration workers that lead: exactly 1 is healthy.",
    )
    b.panel(
        "Synced leader",
        [q(f"sum(hami_worker_synced{{{S}}})")],
        kind="stat",
        width=4,
        height=4,
        description="1 when the leader's ledger and inventory are synced and it decides.",
    )
    b.panel(
        "Inventory age",
        [q(f"min(hami_scheduler_snapshot_age_seconds{{{S}}})")],
        kind="stat",
        unit="s",
        width=4,
        height=4,
        description="Age of the newest published node inventory.",
    )
    b.panel(
        "HAMi gauges age",
        [q(f"min(hami_scheduler_state_metrics_age_seconds{{{S}}})")],
        kind="stat",
        unit="s",
        width=4,
        height=4,
        description="Since the worker last rendered HAMi's gauges.",
    )
    b.panel(
        "Reservations",
        [q(f"max(hami_scheduler_ledger_reservations{{{S}}})")],
        kind="stat",
        width=4,
        height=4,
        description="Pods holding devices in the ledger (bound and in flight).",
    )
    b.panel(
        "Nodes",
        [
            q(f"max(hami_scheduler_nodes_registered{{{S}}})", "registered"),
            q(f"max(hami_scheduler_nodes_unusable{{{S}}})", "unusable"),
        ],
        kind="stat",
        width=4,
        height=4,
    )

    b.row("Scheduling latency")
    b.panel(
        "Filter latency",
        quantiles("hami_scheduler_filter_duration_seconds"),
        unit="s",
        description="Whole /filter requests.",
    )
    b.panel("Filter p99 by phase", phase_p99("hami_scheduler_filter_phase_duration_seconds"), unit="s")
    b.panel("Admission latency", quantiles("hami_scheduler_webhook_duration_seconds"), unit="s")
    b.panel(
        "Bind latency",
        quantiles("hami_scheduler_bind_duration_seconds"),
        unit="s",
        description="Whole /bind requests, lock wait included.",
    )
    b.panel("Bind p99 by phase", phase_p99("hami_scheduler_bind_phase_duration_seconds"), unit="s")
    b.panel("Registration pass", quantiles("hami_worker_registration_sweep_seconds"), unit="s")

    b.row("Decisions")
    b.panel(
        "Filter results",
        [q(f"sum by (result) (rate(hami_scheduler_filter_results_total{{{S}}}[{RATE}]))", "{{result}}")],
        unit="reqps",
    )
    b.panel(
        "Pods not placed, by reason",
        [q(f"sum by (reason) (rate(hami_scheduler_filter_denials_total{{{S}}}[{RATE}]))", "{{reason}}")],
        unit="reqps",
    )
    b.panel(
        "Bind results",
        [
            q(
                f"sum by (result, reason) (rate(hami_scheduler_bind_results_total{{{S}}}[{RATE}]))",
                "{{result}} {{reason}}",
            )
        ],
        unit="reqps",
    )
    b.panel(
        "Admission results",
        [q(f"sum by (result) (rate(hami_scheduler_webhook_results_total{{{S}}}[{RATE}]))", "{{result}}")],
        unit="reqps",
        width=12,
    )
    b.panel(
        "Share of filters that placed nothing",
        [
            q(
                f'sum(rate(hami_scheduler_filter_results_total{{{S},result="unschedulable"}}'
                f"[{RATE}])) / sum(rate(hami_scheduler_filter_results_total{{{S}}}[{RATE}]))",
                "unschedulable",
            )
        ],
        unit="percentunit",
        width=12,
    )

    b.row("Node locks")
    b.panel(
        "Lock contention",
        [
            q(
                f"sum(rate(hami_scheduler_node_lock_contention_total{{{S}}}[{RATE}]))",
                "binds that found the node locked",
            )
        ],
        unit="reqps",
    )
    b.panel("Lock wait", quantiles("hami_scheduler_node_lock_wait_seconds"), unit="s")
    b.panel(
        "Locks taken over and released",
        [
            q(
                f"sum by (why) (rate(hami_scheduler_node_lock_takeovers_total{{{S}}}[{RATE}]))",
                "taken over: {{why}}",
            ),
            q(f"sum(rate(hami_worker_node_locks_released_total{{{S}}}[{RATE}]))", "released by the sweep"),
        ],
        unit="reqps",
    )
    b.panel(
        "Held locks by age",
        [q(f"max by (node) (hami_worker_node_lock_age_seconds{{{S}}})", "{{node}}")],
        unit="s",
        width=24,
    )

    b.row("Leadership and sync")
    b.panel("Leader by pod", [q(f"max by (pod) (hami_worker_leader{{{S}}})", "{{pod}}")], max_value=1)
    b.panel("Synced by pod", [q(f"max by (pod) (hami_worker_synced{{{S}}})", "{{pod}}")], max_value=1)
    b.panel(
        "Worker heartbeat age",
        [q(f"max by (pod) (hami_scheduler_registrar_heartbeat_age_seconds{{{S}}})", "{{pod}}")],
        unit="s",
    )
    b.panel(
        "Watch restarts",
        [
            q(
                f"sum by (resource, reason) (rate(hami_worker_watch_restarts_total{{{S}}}[{RATE}]))",
                "{{resource}} {{reason}}",
            )
        ],
        unit="reqps",
    )
    b.panel(
        "Ledger rebuilds and drift",
        [
            q(f"sum(increase(hami_worker_ledger_rebuilds_total{{{S}}}[{RATE}]))", "rebuilds"),
            q(f"sum(increase(hami_worker_ledger_drift_total{{{S}}}[{RATE}]))", "audits that found drift"),
        ],
    )
    b.panel(
        "Nodes left out",
        [
            q(f"max(hami_worker_nodes_unhealthy{{{S}}})", "unhealthy handshake"),
            q(f"max(hami_worker_nodes_corrupt{{{S}}})", "corrupt annotation"),
        ],
    )

    b.row("GPU allocation (HAMi's gauges)")
    b.panel(
        "Memory allocated by node",
        [
            q(
                allocated_share("hami_gpu_memory_allocated_bytes", "hami_gpu_memory_limit_bytes", "node"),
                "{{node}}",
            )
        ],
        unit="percentunit",
        max_value=1,
    )
    b.panel(
        "Cores allocated by node",
        [
            q(
                allocated_share("hami_gpu_core_allocated_ratio", "hami_gpu_core_limit_ratio", "node"),
                "{{node}}",
            )
        ],
        unit="percentunit",
        max_value=1,
    )
    b.panel(
        "Allocated by device type (vendor)",
        [
            q(
                allocated_share(
                    "hami_gpu_memory_allocated_bytes", "hami_gpu_memory_limit_bytes", "device_type"
                ),
                "memory {{device_type}}",
            ),
            q(
                allocated_share("hami_gpu_core_allocated_ratio", "hami_gpu_core_limit_ratio", "device_type"),
                "cores {{device_type}}",
            ),
        ],
        unit="percentunit",
        max_value=1,
    )
    capacity = (
        "What is left per node: each device's limit less its allocation. The hami.io/device-capacity node "
        "annotation (worker.publishCapacity) gives the same per vendor, leaving out unhealthy, cordoned and "
        "fully shared devices (docs/registration.md)."
    )
    b.panel(
        "Free GPU memory by node",
        [q(free_by_node("hami_gpu_memory_allocated_bytes", "hami_gpu_memory_limit_bytes"), "{{node}}")],
        unit="bytes",
        width=12,
        description=capacity,
    )
    b.panel(
        "Free GPU cores by node",
        [q(free_by_node("hami_gpu_core_allocated_ratio", "hami_gpu_core_limit_ratio"), "{{node}}")],
        width=12,
        description=capacity + " Cores in HAMi's units: 100 per whole card.",
    )
    b.panel(
        "Devices",
        [
            q(per_device("hami_node_gpu_memory_allocated_ratio", ", device_type")),
            q(per_device("hami_gpu_core_allocated_ratio", ", device_type")),
            q(per_device("hami_gpu_shared_count", ", device_type")),
        ],
        kind="table",
        width=24,
        height=10,
        description="Per device: memory share allocated, cores allocated, tasks sharing it.",
    )
    b.panel(
        "GPU memory by pod (top 20)",
        [
            q(
                f"topk(20, sum by (namespace, pod) (max by (namespace, pod, device_uuid) "
                f"(hami_vgpu_memory_allocated_bytes{{{NODE}}})))",
                "{{namespace}}/{{pod}}",
            )
        ],
        unit="bytes",
        width=12,
    )
    b.panel(
        "Quota used and limit",
        [
            q(
                f"max by (namespace, quota_name) (hami_resource_quota_used{{{S}}})",
                "used {{namespace}} {{quota_name}}",
            ),
            q(
                f"max by (namespace, quota_name) (hami_resource_quota_limit{{{S}}})",
                "limit {{namespace}} {{quota_name}}",
            ),
        ],
        width=12,
    )

    for number, panel in enumerate(b.panels, 1):
        panel["id"] = number
    return {
        "uid": "hami-scheduler-py",
        "title": "HAMi scheduler (hami-scheduler-py)",
        "description": "Scheduling latency, decisions, node locks, leadership, GPU allocation",
        "tags": ["hami", "gpu", "scheduler"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-3h", "to": "now"},
        "templating": {
            "list": [
                {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus"},
                variable("namespace", "Namespace", "label_values(hami_worker_leader, namespace)"),
                variable(
                    "job", "Job", 'label_values(hami_worker_leader{namespace="$namespace"}, job)', multi=True
                ),
                variable(
                    "node", "Node", f"label_values(hami_gpu_memory_limit_bytes{{{S}}}, node)", multi=True
                ),
            ]
        },
        "annotations": {"list": []},
        "panels": b.panels,
    }


def render() -> str:
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"wrote {OUT}\n")
