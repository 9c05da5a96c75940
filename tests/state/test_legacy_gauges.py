"""HAMi's legacy metric names (HAMI_LEGACY_METRICS, HAMi's --legacy-metrics; app/state/legacygauges.py):
rendered after the new families only when asked, with HAMi's names and label names, and each sample the
same number as its new twin (reference §8, HAMi cmd/scheduler/metrics.go)."""

from __future__ import annotations

import pytest
from core_builders import gpu, node
from gauge_builders import Samples, samples, state
from prometheus_client.parser import text_string_to_metric_families

from app.core.model import DeviceUse, MigInstance, MigPlacement, MigSlice
from app.state import gauges, legacygauges
from app.state.ledger import Entry
from app.state.snapshot import NodeRecord, Snapshot
from app.state.usage import UsageView

ZONE = ("zone", "vGPU")

# legacy name -> (new name, label renames legacy -> new)
DEVICE = {
    "nodeid": "node",
    "deviceuuid": "device_uuid",
    "deviceidx": "device_index",
    "devicetype": "device_type",
}
WITH_CORES = {**DEVICE, "devicecores": "device_cores"}
TWINS = {
    "GPUDeviceMemoryLimit": ("hami_gpu_memory_limit_bytes", DEVICE),
    "GPUDeviceCoreLimit": ("hami_gpu_core_limit_ratio", DEVICE),
    "GPUDeviceMemoryAllocated": (
        "hami_gpu_memory_allocated_bytes",
        WITH_CORES,
    ),
    "GPUDeviceSharedNum": ("hami_gpu_shared_count", DEVICE),
    "GPUDeviceCoreAllocated": ("hami_gpu_core_allocated_ratio", DEVICE),
    "nodeGPUOverview": (
        "hami_node_gpu_overview",
        {**WITH_CORES, "devicememorylimit": "device_memory_limit"},
    ),
    "vGPUMemoryAllocated": (
        "hami_vgpu_memory_allocated_bytes",
        {
            "podnamespace": "namespace",
            "nodename": "node",
            "podname": "pod",
            "containeridx": "container_index",
            "deviceuuid": "device_uuid",
        },
    ),
    "QuotaUsed": (
        "hami_resource_quota_used",
        {"quotanamespace": "namespace", "quotaName": "quota_name", "limit": "limit"},
    ),
}
TWINS["vGPUCoreAllocated"] = ("hami_vgpu_core_allocated_ratio", TWINS["vGPUMemoryAllocated"][1])


def both(snapshot: Snapshot | None, view: UsageView) -> Samples:
    return samples("".join(gauges.render(snapshot, view, legacygauges.render)))


def renamed(found: Samples, legacy: str) -> Samples:
    new, labels = TWINS[legacy]
    result: Samples = {}
    for (name, pairs), value in found.items():
        if name == legacy:
            mapped = tuple(sorted((labels.get(k, k), v) for k, v in pairs))
            result[(new, mapped)] = value
    return result


def test_off_by_default() -> None:
    names = {name for name, _ in samples("".join(gauges.render(*state())))}
    assert names and not names & legacygauges.NAMES


@pytest.mark.parametrize("legacy", sorted(TWINS), ids=str)
def test_each_legacy_family_is_its_new_twin_renamed(legacy: str) -> None:
    found = both(*state())
    twin = renamed(found, legacy)
    new = TWINS[legacy][0]
    assert twin, f"{legacy}: no samples"
    assert twin == {key: value for key, value in found.items() if key[0] == new}


def test_memory_percentage_has_no_device_type_and_skips_memoryless_devices() -> None:
    found = both(*state())
    ratio = {pairs: v for (name, pairs), v in found.items() if name == "nodeGPUMemoryPercentage"}
    assert ratio == {
        (("deviceidx", "0"), ("deviceuuid", "GPU-1"), ("nodeid", "n1"), ZONE): 4000 / 32768,
        (("deviceidx", "0"), ("deviceuuid", "GPU-3"), ("nodeid", "n2"), ZONE): 1.0,
    }


def test_mig_instances_are_named_profile_dash_gpu_instance() -> None:
    device = gpu("GPU-M", 0, mode="mig", type="A100-SXM4-40GB")
    held = MigSlice("1g.5gb", MigPlacement(0, 1), MigInstance("MIG-a", 7, 0))
    pending = MigSlice("2g.10gb", MigPlacement(2, 2))  # not realized yet: no sample, as in HAMi
    view = UsageView()
    view.load([Entry("u", "ns", "p", "m", "bound", {"GPU-M": DeviceUse(2, 0, 0, 2, (held, pending))})])
    found = both(Snapshot(1, {"m": NodeRecord(node("m", device), 1)}), view)
    mig = {pairs: v for (name, pairs), v in found.items() if name == "nodeGPUMigInstance"}
    assert mig == {
        (("deviceidx", "0"), ("deviceuuid", "GPU-M"), ("migname", "1g.5gb-7"), ("nodeid", "m"), ZONE): 1
    }


def test_every_legacy_family_once_after_the_new_ones() -> None:
    text = "".join(gauges.render(*state(), legacygauges.render))
    names = [f.name for f in text_string_to_metric_families(text)]
    assert names == [name for name, _ in gauges.FAMILIES] + [name for name, _ in legacygauges.FAMILIES]
