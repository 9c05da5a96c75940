"""HAMi's device gauges cover every vendor's devices (reference S§8; vendors §4: no vendor-specific metrics
beyond AMD's core normalisation): an Ascend chip and a Cambricon card beside an NVIDIA GPU, with the
quota of a vendor's resources."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from app.core.model import DeviceInfo, DeviceUse, NodeDevices
from app.state import gauges
from app.state.ledger import Entry
from app.state.snapshot import NodeRecord, Snapshot
from app.state.usage import UsageView

MIB = 1024 * 1024


def test_gauges_list_every_vendor_device() -> None:
    node = NodeDevices(
        "mixed",
        (
            DeviceInfo("GPU-0", 0, 10, 32768, 100, "NVIDIA A100", 0, "hami-core", True, "NVIDIA"),
            DeviceInfo(
                "npu-0", 0, 4, 65536, 20, "Ascend910B3", 0, "", True, "Ascend910B3", custom={"NetworkID": 0}
            ),
            DeviceInfo("mixed-cambricon-mlu-0", 0, 100, 23808, 100, "MLU", 0, "", True, "MLU"),
        ),
    )
    snapshot = Snapshot(
        1, {"mixed": NodeRecord(node, 1)}, quota_limits={"ns": {"cambricon.com/mlu.smlu.vmemory": 10}}
    )
    view = UsageView()
    uses = {"npu-0": DeviceUse(1, 16384, 0), "mixed-cambricon-mlu-0": DeviceUse(1, 2560, 20)}
    view.load([Entry("u1", "ns", "p", "mixed", "bound", uses, {"cambricon.com/mlu.smlu.vmemory": 2560})])
    text = "".join(gauges.render(snapshot, view))
    samples = {
        (s.name, s.labels.get("device_uuid", ""), s.labels.get("device_type", "")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("hami_gpu_memory_allocated_bytes", "npu-0", "Ascend910B3")] == 16384 * MIB
    assert samples[("hami_gpu_memory_limit_bytes", "npu-0", "Ascend910B3")] == 65536 * MIB
    assert samples[("hami_gpu_core_allocated_ratio", "mixed-cambricon-mlu-0", "MLU")] == 20
    assert samples[("hami_gpu_shared_count", "GPU-0", "NVIDIA A100")] == 0
    assert samples[("hami_vgpu_memory_allocated_bytes", "mixed-cambricon-mlu-0", "")] == 2560 * MIB
    quota = [
        s
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "hami_resource_quota_used"
    ]
    assert [(s.labels["quota_name"], s.value) for s in quota] == [("cambricon.com/mlu.smlu.vmemory", 2560)]
