"""The monitoring assets (issue: day-two operators): the Grafana dashboard ConfigMap and the PrometheusRule.

Off by default. When enabled: the dashboard is the committed dashboards/hami-scheduler.json (exactly what
scripts/dashboard.py writes), valid JSON in a ConfigMap with the sidecar's label; the rules are the alerts
docs/metrics.md lists. Every PromQL expression of both — Grafana's variables replaced as Grafana does
before sending a query — parses with Prometheus's own parser (tools/promql, built by `make tools`), and
names only metrics the two processes export (collected from their registries and collectors here).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.registry import Collector

from app.metrics import OWN_METRICS, ReplicaCollector, process_collectors
from app.state import gauges, legacygauges
from app.state.status import ReplicaStatus
from app.state.usage import UsageView
from workers.metrics import LockAges, WorkerMetrics

REPO = Path(__file__).resolve().parents[2]
PROMQL_CHECK = Path(os.environ.get("PROMQL_CHECK") or REPO / ".tools" / "bin" / "promql-check")
DASHBOARD = REPO / "helm" / "hami-scheduler" / "dashboards" / "hami-scheduler.json"
ENABLED = {"monitoring.dashboard.enabled": True, "monitoring.rules.enabled": True}
# Grafana replaces these before a query reaches Prometheus.
GRAFANA = {
    "$__rate_interval": "1m",
    "$__interval": "30s",
    "$namespace": "hami-system",
    "$job": ".*",
    "$node": ".*",
}
ALERTS = {
    "HamiSchedulerNoLeader",
    "HamiSchedulerTwoLeaders",
    "HamiSchedulerNotSynced",
    "HamiSchedulerWorkerStalled",
    "HamiSchedulerInventoryStale",
    "HamiSchedulerGaugesStale",
    "HamiSchedulerFilterErrors",
    "HamiSchedulerBindSlow",
    "HamiSchedulerNodeLockHeldTooLong",
    "HamiSchedulerWebhookFailures",
    "HamiSchedulerDraCollision",
}


def _samples(collector: Collector) -> set[str]:
    """The sample names a collector can expose (counters with _total, histograms with their series)."""
    names = set()
    registry = CollectorRegistry()
    registry.register(collector)
    for family in registry.collect():
        if family.type == "counter":
            names.update({f"{family.name}_total", f"{family.name}_created"})
        elif family.type == "histogram":
            names.update({f"{family.name}_{s}" for s in ("bucket", "sum", "count", "created")})
        else:
            names.add(family.name)
    return names


def exported() -> set[str]:
    """Every metric name the extender and the registration worker export."""
    replica = ReplicaCollector(lambda: (None, UsageView(), ReplicaStatus()), lambda: 0.0, lambda: 0.0)
    collectors: list[Collector] = [*OWN_METRICS, replica, *process_collectors(False)]
    collectors.append(LockAges(lambda: [], lambda: 0.0))
    names = set().union(*(_samples(c) for c in collectors))
    for family in WorkerMetrics().registry.collect():
        names |= _samples(_Fixed(family))
    return names | set(gauges.NAMES) | set(legacygauges.NAMES)


class _Fixed(Collector):
    def __init__(self, family: Any) -> None:
        self.family = family

    def collect(self) -> Any:
        yield self.family


def grafana(expr: str) -> str:
    for variable, value in GRAFANA.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"an unreplaced Grafana variable in {expr}"
    return expr


def promql_check(stdin: Any, *args: str) -> Any:
    """Run tools/promql (`make tools` builds it, and rebuilds it when its source changes)."""
    if not PROMQL_CHECK.is_file():
        pytest.fail(f"{PROMQL_CHECK} not found: run `make tools` (it builds tools/promql)", pytrace=False)
    done = subprocess.run(
        [str(PROMQL_CHECK), *args],
        input=json.dumps(stdin),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode in (0, 1), f"{done.stderr} (an old build? run `make tools`)"
    return json.loads(done.stdout)


def check(queries: list[dict[str, str]]) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = promql_check(queries)
    return results


def check_rules(spec: dict[str, Any]) -> list[str]:
    """The errors of Prometheus's own rule-file loader (model/rulefmt, strict) for a PrometheusRule's spec."""
    errors: list[str] = promql_check(spec, "--rules")
    return errors


def dashboard_queries(board: dict[str, Any]) -> list[dict[str, str]]:
    queries = []
    for panel in board["panels"]:
        for target in panel.get("targets", ()):
            queries.append(
                {"name": f"panel {panel['title']!r} {target['refId']}", "expr": grafana(target["expr"])}
            )
    for variable in board["templating"]["list"]:
        query = variable.get("query")
        if isinstance(query, dict):
            inner = re.fullmatch(r"label_values\((?:(.*), )?(\w+)\)", query["query"])
            assert inner, f"variable {variable['name']}: {query['query']}"
            queries.append({"name": f"variable {variable['name']}", "expr": grafana(inner.group(1) or "up")})
    return queries


def rule_queries(rule: dict[str, Any]) -> list[dict[str, str]]:
    return [
        {"name": f"alert {r['alert']}", "expr": r["expr"]}
        for group in rule["spec"]["groups"]
        for r in group["rules"]
    ]


def test_off_by_default(render: Any) -> None:
    manifests = render()
    assert not manifests.has("ConfigMap", "hami-scheduler-dashboard")
    assert not manifests.has("PrometheusRule")


def test_committed_dashboard_is_the_generators_output() -> None:
    spec = importlib.util.spec_from_file_location("dashboard", REPO / "scripts" / "dashboard.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert DASHBOARD.read_text(encoding="utf-8") == module.render(), "run `make dashboard`"


def test_dashboard_config_map(render: Any) -> None:
    config_map = render(
        "default", {**ENABLED, "monitoring.dashboard.annotations": {"grafana_folder": "GPU"}}
    ).one("ConfigMap", "hami-scheduler-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["annotations"] == {"grafana_folder": "GPU"}
    board = json.loads(config_map["data"]["hami-scheduler.json"])
    assert board == json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert board["uid"] and board["schemaVersion"] >= 36
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    titles = {p["title"] for p in board["panels"]}
    for needed in (
        "Filter p99 by phase",
        "Bind p99 by phase",
        "Pods not placed, by reason",
        "Lock contention",
        "Leader by pod",
        "Synced by pod",
        "Memory allocated by node",
        "Allocated by device type (vendor)",
        "Devices",
    ):
        assert needed in titles


def test_dashboard_in_another_namespace(render: Any) -> None:
    overrides = {**ENABLED, "monitoring.dashboard.namespace": "monitoring"}
    config_map = render("default", overrides).one("ConfigMap", "hami-scheduler-dashboard")
    assert config_map["metadata"]["namespace"] == "monitoring"


def test_rules(render: Any) -> None:
    overrides = {
        **ENABLED,
        "monitoring.rules.labels": {"release": "kps"},
        "monitoring.rules.alertLabels": {"team": "gpu"},
    }
    rule = render("default", overrides).one("PrometheusRule", "hami-scheduler")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1" and rule["metadata"]["labels"]["release"] == "kps"
    rules = [r for group in rule["spec"]["groups"] for r in group["rules"]]
    assert {r["alert"] for r in rules} == ALERTS
    for r in rules:
        assert set(r) == {"alert", "expr", "for", "labels", "annotations"}, r["alert"]
        assert r["labels"]["severity"] in ("critical", "warning") and r["labels"]["team"] == "gpu"
        assert r["annotations"]["summary"] and r["annotations"]["description"]
        assert 'job="hami-scheduler-metrics",namespace="hami-system"' in r["expr"], r["alert"]


def test_rule_selector_and_thresholds_are_values(render: Any) -> None:
    overrides = {
        **ENABLED,
        "monitoring.rules.selector": 'cluster="eu-1"',
        "monitoring.rules.bindP99Seconds": 2.5,
    }
    rules = {
        r["alert"]: r
        for g in render("default", overrides).one("PrometheusRule")["spec"]["groups"]
        for r in g["rules"]
    }
    assert 'hami_worker_leader{cluster="eu-1"}' in rules["HamiSchedulerNoLeader"]["expr"]
    assert rules["HamiSchedulerBindSlow"]["expr"].endswith("> 2.5")


def test_every_expression_parses_and_names_only_exported_metrics(render: Any) -> None:
    manifests = render("default", ENABLED)
    board = json.loads(manifests.one("ConfigMap", "hami-scheduler-dashboard")["data"]["hami-scheduler.json"])
    queries = dashboard_queries(board) + rule_queries(manifests.one("PrometheusRule"))
    assert len(queries) > 50
    results = check(queries)
    assert [r for r in results if r["error"]] == []
    known = exported() | {"up"}
    unknown = {name for r in results for name in r["metrics"] if name not in known}
    assert unknown == set()
    used = {name for r in results for name in r["metrics"]}
    assert {"hami_gpu_memory_allocated_bytes", "hami_scheduler_bind_duration_seconds_bucket"} <= used


def test_the_checker_rejects_what_prometheus_rejects() -> None:
    results = check(
        [{"name": "bad", "expr": "sum(rate(x[5m])"}, {"name": "good", "expr": 'x{a="b"} / on (c) y'}]
    )
    assert results[0]["error"].startswith("1:") and results[1] == {
        "name": "good",
        "error": "",
        "metrics": ["x", "y"],
    }


def test_the_rules_load_in_prometheus(render: Any) -> None:
    """kubernetes-validate has no schema for the Operator's PrometheusRule: its spec is the rule-file format
    the Operator hands to Prometheus, so Prometheus's loader checks it, field names included."""
    rule = render("default", {**ENABLED, "monitoring.rules.alertLabels": {"team": "gpu"}}).one(
        "PrometheusRule"
    )
    assert check_rules(rule["spec"]) == []


@pytest.mark.parametrize(
    ("rule", "fragment"),
    [
        pytest.param({"alert": "A", "expr": "up", "fro": "5m"}, "field fro not found", id="unknown-field"),
        pytest.param(
            {"alert": "A", "expr": "up", "annotations": {"summary": "{{ $value | nosuchfunc }}"}},
            'function "nosuchfunc" not defined',
            id="bad-template",
        ),
        pytest.param({"alert": "A", "expr": "sum(up"}, "could not parse expression", id="bad-expression"),
        pytest.param({"expr": "up"}, "one of 'record' or 'alert' must be set", id="neither-alert-nor-record"),
    ],
)
def test_the_rule_loader_rejects_what_prometheus_rejects(rule: dict[str, Any], fragment: str) -> None:
    errors = check_rules({"groups": [{"name": "g", "rules": [rule]}]})
    assert len(errors) == 1 and fragment in errors[0], errors
