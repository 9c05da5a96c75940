"""AMD's core gauges in percent (reference S§8, vendors §2.11 Metrics): a card whose type starts with `AMD`
(any case) reports a core limit of 100 and `ceil(allocated CUs / CUs x 100)` allocated, per device and per
pod; other vendors' cores stay raw (a Neuron core mask, a DCU percentage)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from app.core.model import DeviceInfo, DeviceUse, NodeDevices
from app.state import gauges
from app.state.ledger import Entry
from app.state.snapshot import NodeRecord, Snapshot
from app.state.usage import UsageView


def samples(text: str) -> dict[tuple[str, str], float]:
    return {
        (s.name, s.labels.get("device_uuid", "")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_amd_cores_in_percent_others_raw() -> None:
    node = NodeDevices(
        "n1",
        (
            DeviceInfo("amd-0", 0, 4, 196608, 304, "AMD Instinct MI300X VF", 0, "hami-core", True, "AMD"),
            DeviceInfo("amd-1", 1, 4, 65536, 0, "amd mi210", 0, "", True, "AMD"),
            DeviceInfo("n1-AWSNeuron-0", 0, 2, 0, 3, "AWSNeuron", 0, "", True, "AWSNeuron"),
        ),
    )
    snapshot = Snapshot(1, {"n1": NodeRecord(node, 1)})
    view = UsageView()
    uses = {
        "amd-0": DeviceUse(1, 16384, 76),
        "amd-1": DeviceUse(1, 10, 0),
        "n1-AWSNeuron-0": DeviceUse(1, 0, 2),
    }
    view.load([Entry("u1", "ns", "p", "n1", "bound", uses, {})])
    found = samples("".join(gauges.render(snapshot, view)))
    assert found[("hami_gpu_core_limit_ratio", "amd-0")] == 100
    assert found[("hami_gpu_core_allocated_ratio", "amd-0")] == 25  # ceil(76 / 304 x 100)
    assert found[("hami_vgpu_core_allocated_ratio", "amd-0")] == 25
    assert found[("hami_gpu_core_limit_ratio", "amd-1")] == 0  # no CUs: HAMi's (0, 0)
    assert found[("hami_gpu_core_allocated_ratio", "amd-1")] == 0
    assert found[("hami_gpu_memory_allocated_bytes", "amd-0")] == 16384 * 1024 * 1024
    assert found[("hami_gpu_core_limit_ratio", "n1-AWSNeuron-0")] == 3  # raw core mask (V§3.10 #4)
    assert found[("hami_gpu_core_allocated_ratio", "n1-AWSNeuron-0")] == 2
    assert found[("hami_vgpu_core_allocated_ratio", "n1-AWSNeuron-0")] == 2
    assert ("hami_node_gpu_memory_allocated_ratio", "n1-AWSNeuron-0") not in found  # Devmem 0 (S§8)


def test_an_amd_ratio_rounds_up() -> None:
    node = NodeDevices("n1", (DeviceInfo("a", 0, 4, 1000, 110, "AMD X", 0, "", True, "AMD"),))
    view = UsageView()
    view.load([Entry("u1", "ns", "p", "n1", "bound", {"a": DeviceUse(1, 0, 1)}, {})])
    found = samples("".join(gauges.render(Snapshot(1, {"n1": NodeRecord(node, 1)}), view)))
    assert found[("hami_gpu_core_allocated_ratio", "a")] == 1  # ceil(0.909...)
