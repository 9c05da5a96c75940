"""docs/metrics.md documents every metric the code registers, and no metric of ours the code no longer has.

What the code registers is read from the source, so a metric added anywhere is seen without a fixture to
update: every call of a prometheus_client metric or metric family (`Counter`, `Gauge`, `Histogram`,
`Summary`, `Info`, `Enum`, `*MetricFamily`, imported from `prometheus_client` or `prometheus_client.core`)
whose name is a string literal, in every module under app/, workers/ and config/ — by the process that
serves it (app/ and config/: the extender; workers/: the registration worker) — plus HAMi's gauges the
worker renders as text (app/state/gauges.py, legacygauges.py). The name checked is the exposed one
(`_total` for a counter, `_info` for an Info). A name built at run time cannot be checked: give metrics
literal names (`process_*` mirrored by app/telemetry.py is documented by its prefix).

The documentation side: the backticked names in the first cell of each table row of docs/metrics.md, per
section (one row per metric is the convention; `library_*` prefixes are accepted for prometheus_client's
and prometheus_flask_exporter's own families, never for ours). A failure says exactly which row to add
where, or which to remove.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from app.state import gauges, legacygauges

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "metrics.md"
SOURCES = {"app": "extender", "config": "extender", "workers": "worker"}
SECTIONS = {
    "extender": "## The extender's metrics",
    "worker": "## The registration worker's metrics",
    "hami": "## HAMi's allocation gauges (reference §8)",
}
KINDS = {
    "Counter": "counter",
    "CounterMetricFamily": "counter",
    "Gauge": "gauge",
    "GaugeMetricFamily": "gauge",
    "Histogram": "histogram",
    "HistogramMetricFamily": "histogram",
    "Summary": "summary",
    "SummaryMetricFamily": "summary",
    "Info": "info",
    "InfoMetricFamily": "info",
    "Enum": "stateset",
    "StateSetMetricFamily": "stateset",
    "UnknownMetricFamily": "unknown",
}
LIBRARY_PREFIXES = ("process_", "python_", "flask_")
OURS = ("hami_scheduler_", "hami_worker_")


@dataclass(frozen=True)
class Registered:
    name: str  # as exposed
    kind: str
    where: str  # path:line
    labels: tuple[str, ...]
    process: str


def exposed(name: str, kind: str) -> str:
    if kind == "counter":
        return name.removesuffix("_total") + "_total"
    if kind == "info":
        return name.removesuffix("_info") + "_info"
    return name


def _prometheus_names(tree: ast.Module) -> dict[str, str]:
    """Local name -> the prometheus_client class it is, from this module's imports."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("prometheus_client"):
            for alias in node.names:
                if alias.name in KINDS:
                    names[alias.asname or alias.name] = alias.name
    return names


def _labels(call: ast.Call) -> tuple[str, ...]:
    candidates = [kw.value for kw in call.keywords if kw.arg in ("labelnames", "labels")]
    if len(call.args) >= 3:
        candidates.append(call.args[2])
    for value in candidates:
        if isinstance(value, ast.List | ast.Tuple):
            return tuple(
                e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
            )
    return ()


def registered() -> Iterator[Registered]:
    """Every literal-named metric of the code, with where it is registered."""
    for folder, process in SOURCES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            local = _prometheus_names(tree)
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                called = (
                    func.id
                    if isinstance(func, ast.Name)
                    else func.attr
                    if isinstance(func, ast.Attribute)
                    else ""
                )
                if called not in local:
                    continue
                first = (
                    node.args[0]
                    if node.args
                    else next((k.value for k in node.keywords if k.arg == "name"), None)
                )
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    kind = KINDS[local[called]]
                    where = f"{path.relative_to(ROOT)}:{node.lineno}"
                    yield Registered(exposed(first.value, kind), kind, where, _labels(node), process)
    for name, _ in gauges.FAMILIES:
        yield Registered(name, "gauge", "app/state/gauges.py", (), "hami")


def documented(text: str) -> dict[str, set[str]]:
    """Section -> the backticked names in the first cell of its table rows."""
    found: dict[str, set[str]] = {key: set() for key in SECTIONS}
    current = ""
    for line in text.splitlines():
        if line.startswith("## "):
            current = next((key for key, title in SECTIONS.items() if line.strip() == title), "")
        elif current and line.startswith("|"):
            first = line.split("|")[1]
            found[current].update(re.findall(r"`([^`]+)`", first))
    return found


def _covered(name: str, names: set[str]) -> bool:
    if name in names:
        return True
    return name.startswith(LIBRARY_PREFIXES) and any(
        n.endswith("*") and name.startswith(n[:-1]) for n in names if n.startswith(LIBRARY_PREFIXES)
    )


def _row(metric: Registered) -> str:
    labels = ", ".join(metric.labels)
    if metric.process == "extender":
        return f"| `{metric.name}` | {metric.kind} | {labels} | <what it measures> | — |"
    return f"| `{metric.name}` | {metric.kind} | {labels} | <what it measures> |"


def undocumented(text: str) -> list[str]:
    """What to add to `text` (docs/metrics.md) for each registered metric it has no row for."""
    doc = documented(text)
    return [
        f"docs/metrics.md has no row for `{m.name}` ({m.kind} registered at {m.where}); add under "
        f"'{SECTIONS[m.process]}':\n    {_row(m)}"
        for m in registered()
        if not _covered(m.name, doc[m.process])
    ]


def unregistered(text: str) -> list[str]:
    """What to remove from `text`: rows of our metrics (hami_scheduler_*, hami_worker_*) no code registers."""
    code = {(m.process, m.name) for m in registered()}
    return [
        f"docs/metrics.md documents `{name}` under '{SECTIONS[process]}', which no code registers: remove "
        "the row, or register the metric where that section says"
        for process, names in sorted(documented(text).items())
        for name in sorted(names)
        if name.startswith(OURS) and (process, name) not in code
    ]


def test_every_registered_metric_has_a_row() -> None:
    assert not (missing := undocumented(DOC.read_text(encoding="utf-8"))), "\n".join(missing)


def test_every_documented_metric_of_ours_is_registered() -> None:
    assert not (stale := unregistered(DOC.read_text(encoding="utf-8"))), "\n".join(stale)


def test_a_missing_or_stale_row_is_named_with_what_to_do() -> None:
    text = DOC.read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `hami_worker_handovers_total`"))
    where = next(m.where for m in registered() if m.name == "hami_worker_handovers_total")
    assert where.startswith("workers/metrics.py:")
    assert undocumented(text.replace(row + "\n", "")) == [
        f"docs/metrics.md has no row for `hami_worker_handovers_total` (counter registered at {where}); "
        "add under '## The registration worker's metrics':\n"
        "    | `hami_worker_handovers_total` | counter |  | <what it measures> |"
    ]
    gone = text.replace(row, row.replace("hami_worker_handovers_total", "hami_worker_handoffs_total"))
    assert unregistered(gone) == [
        "docs/metrics.md documents `hami_worker_handoffs_total` under '## The registration worker's "
        "metrics', which no code registers: remove the row, or register the metric where that section says"
    ]


def test_hamis_legacy_names_are_named() -> None:
    text = DOC.read_text(encoding="utf-8")
    hami = text[text.index(SECTIONS["hami"]) : text.index(SECTIONS["extender"])]
    missing = sorted(n for n in legacygauges.NAMES if f"`{n}`" not in hami)
    assert not missing, f"name these legacy gauges in the paragraph under '{SECTIONS['hami']}': {missing}"


def test_the_scan_sees_metrics_of_every_kind_and_process() -> None:
    """The checks above rest on the scan; it must find the registrations it is meant to find."""
    found = {m.name: m for m in registered()}
    assert found["hami_scheduler_filter_results_total"].kind == "counter"
    assert found["hami_scheduler_allocation_write_duration_seconds"].labels == ("outcome",)
    assert found["hami_worker_handovers_total"].process == "worker"
    assert found["hami_scheduler_leader"].kind == "gauge"  # a family yielded by a collector
    assert found["hami_worker_node_lock_age_seconds"].labels == ("node", "lock")
    assert found["hami_build_info"].process == "extender"
    assert "hami_gpu_memory_limit_bytes" in found
