"""HAMi's gauges rendered as text (app/state/gauges.py): valid exposition format, exactly the samples the
prometheus_client collector that built them at scrape time produced (kept below as the reference), label
escaping, the atomic file, and how readers tell a stale file."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from gauge_builders import CORES, MEM, samples, state
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from app.core.model import DeviceUse
from app.state import gauges
from app.state.snapshot import Snapshot
from app.state.usage import UsageView

MIB = 1024 * 1024


class Reference(Collector):
    """The HAMi part of the scrape-time collector this renderer replaced (app/metrics.py before), as is."""

    def __init__(self, snapshot: Snapshot | None, view: UsageView) -> None:
        self.snapshot, self.view = snapshot, view

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snapshot, view = self.snapshot, self.view
        labels = ["node", "device_uuid", "device_index", "device_type", "zone"]
        with_cores = ["node", "device_uuid", "device_index", "device_cores", "device_type", "zone"]
        overview_labels = [*with_cores[:4], "device_memory_limit", "device_type", "zone"]
        families = {
            name: GaugeMetricFamily(name, "h", labels=names)
            for name, names in [
                ("hami_gpu_memory_limit_bytes", labels),
                ("hami_gpu_core_limit_ratio", labels),
                ("hami_gpu_memory_allocated_bytes", with_cores),
                ("hami_gpu_shared_count", labels),
                ("hami_gpu_core_allocated_ratio", labels),
                ("hami_node_gpu_memory_allocated_ratio", labels),
                ("hami_node_gpu_overview", overview_labels),
            ]
        }
        for record in snapshot.nodes.values() if snapshot else ():
            name = record.devices.name
            for d in record.devices.devices:
                use = view.nodes.get(name, {}).get(d.id, DeviceUse())
                base = [name, d.id, str(d.index), d.type, "vGPU"]
                families["hami_gpu_memory_limit_bytes"].add_metric(base, d.devmem * MIB)
                families["hami_gpu_core_limit_ratio"].add_metric(base, d.devcore)
                families["hami_gpu_memory_allocated_bytes"].add_metric(
                    [name, d.id, str(d.index), str(d.devcore), d.type, "vGPU"], use.mem * MIB
                )
                families["hami_gpu_shared_count"].add_metric(base, use.slots)
                families["hami_gpu_core_allocated_ratio"].add_metric(base, use.cores)
                if d.devmem > 0:
                    families["hami_node_gpu_memory_allocated_ratio"].add_metric(base, use.mem / d.devmem)
                families["hami_node_gpu_overview"].add_metric(
                    [name, d.id, str(d.index), str(d.devcore), str(d.devmem), d.type, "vGPU"], use.mem * MIB
                )
        yield from families.values()
        pod_labels = ["namespace", "node", "pod", "container_index", "device_uuid", "zone"]
        memory = GaugeMetricFamily("hami_vgpu_memory_allocated_bytes", "h", labels=pod_labels)
        cores = GaugeMetricFamily("hami_vgpu_core_allocated_ratio", "h", labels=pod_labels)
        for entry in view.entries.values():
            for uuid, use in entry.uses.items():
                names = [entry.namespace, entry.node, entry.name, "0", uuid, "vGPU"]
                memory.add_metric(names, use.mem * MIB)
                cores.add_metric(names, use.cores)
        yield from (memory, cores)
        limits = snapshot.quota_limits if snapshot else {}
        used = GaugeMetricFamily(
            "hami_resource_quota_used", "h", labels=["namespace", "quota_name", "limit", "zone"]
        )
        limit = GaugeMetricFamily(
            "hami_resource_quota_limit", "h", labels=["namespace", "quota_name", "zone"]
        )
        for namespace in sorted(limits.keys() | view.quota.keys()):
            for name in sorted(limits.get(namespace, {}).keys() | view.quota.get(namespace, {}).keys()):
                value = limits.get(namespace, {}).get(name)
                used.add_metric(
                    [namespace, name, str(value if value is not None else 0), "vGPU"],
                    view.quota.get(namespace, {}).get(name, 0),
                )
                if value is not None:
                    limit.add_metric([namespace, name, "vGPU"], value)
        yield from (used, limit)


def reference_text(snapshot: Snapshot | None, view: UsageView) -> str:
    registry = CollectorRegistry()
    registry.register(Reference(snapshot, view))
    return generate_latest(registry).decode()


def rendered(snapshot: Snapshot | None, view: UsageView) -> str:
    return "".join(gauges.render(snapshot, view))


def test_the_same_samples_as_the_scrape_time_collector() -> None:
    snapshot, view = state()
    text = rendered(snapshot, view)
    assert samples(text) == samples(reference_text(snapshot, view))
    assert samples(rendered(None, UsageView())) == samples(reference_text(None, UsageView())) == {}


def test_hami_names_labels_and_values() -> None:
    found = samples(rendered(*state()))
    device = (("device_index", "0"), ("device_type", "NVIDIA A100"), ("device_uuid", "GPU-1"), ("node", "n1"))
    zone = (("zone", "vGPU"),)
    assert found[("hami_gpu_memory_limit_bytes", (*device, *zone))] == 32768 * MIB
    assert found[("hami_gpu_core_limit_ratio", (*device, *zone))] == 100
    with_cores = (("device_cores", "100"), *device, *zone)
    assert found[("hami_gpu_memory_allocated_bytes", with_cores)] == 4000 * MIB
    assert found[("hami_gpu_shared_count", (*device, *zone))] == 2
    assert found[("hami_gpu_core_allocated_ratio", (*device, *zone))] == 10
    assert found[("hami_node_gpu_memory_allocated_ratio", (*device, *zone))] == 4000 / 32768
    overview = (("device_cores", "100"), *device[:1], ("device_memory_limit", "32768"), *device[1:], *zone)
    assert found[("hami_node_gpu_overview", overview)] == 4000 * MIB
    pod = (("container_index", "0"), ("device_uuid", "GPU-2"), ("namespace", "team"), ("node", "n1"))
    assert found[("hami_vgpu_memory_allocated_bytes", (*pod, ("pod", "pod-b"), *zone))] == 0
    assert found[("hami_vgpu_core_allocated_ratio", (*pod, ("pod", "pod-b"), *zone))] == 5
    quota = (("limit", "50000"), ("namespace", "team"), ("quota_name", MEM), *zone)
    assert found[("hami_resource_quota_used", quota)] == 4000
    assert found[("hami_resource_quota_limit", (("namespace", "team"), ("quota_name", MEM), *zone))] == 50000
    unlimited = (("limit", "0"), ("namespace", "other"), ("quota_name", MEM), *zone)
    assert found[("hami_resource_quota_used", unlimited)] == 81920
    assert (
        found[
            (
                "hami_resource_quota_used",
                (("limit", "10"), ("namespace", "idle"), ("quota_name", CORES), *zone),
            )
        ]
        == 0
    )
    assert not any(
        name == "hami_node_gpu_memory_allocated_ratio" and ("device_uuid", "GPU-2") in labels
        for name, labels in found
    )


def test_every_family_once_with_help_and_type_first() -> None:
    text = rendered(*state())
    families = list(text_string_to_metric_families(text))
    assert [f.name for f in families] == [name for name, _ in gauges.FAMILIES]
    assert all(f.type == "gauge" and f.documentation for f in families)
    lines = text.splitlines()
    for name, _ in gauges.FAMILIES:
        first = lines.index(f"# HELP {name} {dict(gauges.FAMILIES)[name]}")
        assert lines[first + 1] == f"# TYPE {name} gauge"
        own = [i for i, line in enumerate(lines) if line.startswith((f"{name}{{", f"{name} "))]
        assert own == list(range(first + 2, first + 2 + len(own))), f"{name}: samples not together"
    empty = list(text_string_to_metric_families(rendered(None, UsageView())))
    assert [f.name for f in empty] == [name for name, _ in gauges.FAMILIES]


@pytest.mark.parametrize(
    "odd",
    ['quote"d', "back\\slash", "new\nline", 'all\\"\n\\n"', "trailing\\"],
    ids=["quote", "backslash", "newline", "all", "trailing-backslash"],
)
def test_odd_label_values_are_escaped(odd: str) -> None:
    snapshot, view = state(node_name=f"node-{odd}", device_type=f"type-{odd}", namespace=f"ns-{odd}")
    text = rendered(snapshot, view)
    found = samples(text)
    assert found == samples(reference_text(snapshot, view))
    labels = [dict(labels) for _, labels in found]
    assert {f"node-{odd}", "n2"} == {d["node"] for d in labels if "node" in d}
    assert f"type-{odd}" in {d.get("device_type") for d in labels}
    assert f"ns-{odd}" in {d.get("namespace") for d in labels}
    assert len(text.splitlines()) == len(found) + 2 * len(gauges.FAMILIES)  # no raw newline inside a value


def test_escape() -> None:
    assert gauges.escape("plain") == "plain"
    assert gauges.escape('a"b\\c\nd') == 'a\\"b\\\\c\\nd'


def test_write_is_atomic_and_leaves_no_temporary(tmp_path: Path) -> None:
    snapshot, view = state(device_type="NVIDIA Ä100 «utf-8»")
    size = gauges.write(tmp_path, snapshot, view)
    content = (tmp_path / gauges.GAUGES_FILE).read_text(encoding="utf-8")
    assert content == rendered(snapshot, view) and size == len(content.encode())
    assert sorted(p.name for p in tmp_path.iterdir()) == [gauges.GAUGES_FILE]
    with open(tmp_path / gauges.GAUGES_FILE, "rb") as before:
        gauges.write(tmp_path, None, UsageView())  # a reader that opened the old file keeps reading it
        assert before.read().decode() == content
    assert samples((tmp_path / gauges.GAUGES_FILE).read_text(encoding="utf-8")) == {}


def test_a_failed_render_keeps_the_published_file(tmp_path: Path) -> None:
    gauges.write(tmp_path, *state())
    published = (tmp_path / gauges.GAUGES_FILE).read_bytes()

    def broken(snapshot: Snapshot | None, view: UsageView) -> Iterator[str]:
        yield "# HELP half written\n"
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        gauges.write(tmp_path, None, UsageView(), broken)  # fails after the first families were written
    assert sorted(p.name for p in tmp_path.iterdir()) == [gauges.GAUGES_FILE]
    assert (tmp_path / gauges.GAUGES_FILE).read_bytes() == published


def test_staleness(tmp_path: Path) -> None:
    now = time.time()
    assert math.isnan(gauges.age(tmp_path, now))
    assert gauges.open_fresh(tmp_path, now, 60) is None
    assert gauges.touch(tmp_path) is False  # nothing to confirm: the renderer renders instead
    gauges.write(tmp_path, *state())
    path = tmp_path / gauges.GAUGES_FILE
    os.utime(path, (now - 100, now - 100))
    assert gauges.age(tmp_path, now) == pytest.approx(100, abs=1)
    assert gauges.open_fresh(tmp_path, now, 60) is None  # older than the bound: left out
    with gauges.open_fresh(tmp_path, now, 120) as fresh:  # type: ignore[union-attr]
        assert fresh.read() == path.read_bytes()
    assert gauges.touch(tmp_path) is True
    assert gauges.age(tmp_path, time.time()) < 5
    assert gauges.max_age(10) == 60 and gauges.max_age(30) == 90
