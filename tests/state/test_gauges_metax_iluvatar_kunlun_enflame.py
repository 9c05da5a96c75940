"""HAMi's gauges (reference §8, vendors §2.10 "Metrics: generic") for Metax,
Iluvatar, Kunlunxin and Enflame devices registered on a node get the device gauges with their registered
type as `device_type`, their reservations the per-pod gauges, and their quota resources the quota gauges,
from the devices and ledger rows discovery and the filter produce."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families
from vendor_builders import view

from app.core.inventory import decode_node
from app.core.model import DeviceUse
from app.devices import build_vendors
from app.state import gauges
from app.state.ledger import Entry
from app.state.snapshot import NodeRecord, Snapshot
from app.state.usage import UsageView

MIB = 1024 * 1024
VENDORS = build_vendors(
    {
        "metax": {"resourceCountName": "metax-tech.com/gpu", "resourceVCountName": "metax-tech.com/sgpu"},
        "kunlun": {"resourceCountName": "kunlunxin.com/xpu"},
    },
    frozenset({"iluvatar"}),
)


def test_device_pod_and_quota_gauges_for_metax_iluvatar_kunlun_enflame() -> None:
    sgpu = '[{"uuid":"GPU-1","totalDevCount":16,"totalCompute":100,"totalVRam":32768,"healthy":true}]'
    node = view(
        "n1",
        {
            "metax-tech.com/node-gpu-devices": sgpu,
            "hami.io/node-BI-V150-register": "BI-0,4,32768,100,BI-V150,0,true:",
            "enflame.com/gcu-drs-capacity": (
                '{"devices":[{"index":"0","capacity":6}],"profiles":{"3g.20gb":"1"}}'
            ),
        },
        capacity={"kunlunxin.com/xpu": "1"},
    )
    devices = decode_node(node, VENDORS)
    assert {d.type for d in devices.devices} == {"Metax-SGPU", "BI-V150", "kunlun", "Enflame"}
    use = {
        "GPU-1": DeviceUse(1, 4096, 30, tags=("qos=best-effort",)),
        "n1-enflame-drs-0": DeviceUse(1, 20480, 50),
    }
    usage = UsageView()
    usage.load([Entry("u", "team", "p", "n1", "bound", use, {"metax-tech.com/vmemory": 4096})])
    snapshot = Snapshot(1, {"n1": NodeRecord(devices, 1)}, {}, {"team": {"metax-tech.com/vmemory": 8}}, 1.0)
    found = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families("".join(gauges.render(snapshot, usage)))
        for s in family.samples
    }
    base = {"node": "n1", "zone": "vGPU"}

    def sample(name: str, **labels: str) -> float:
        return found[(name, tuple(sorted({**base, **labels}.items())))]

    gpu1 = {"device_uuid": "GPU-1", "device_index": "0", "device_type": "Metax-SGPU"}
    assert sample("hami_gpu_memory_limit_bytes", **gpu1) == 32768 * MIB
    assert (
        sample("hami_gpu_shared_count", **gpu1) == 1 and sample("hami_gpu_core_allocated_ratio", **gpu1) == 30
    )
    drs = {"device_uuid": "n1-enflame-drs-0", "device_index": "0", "device_type": "Enflame"}
    assert sample("hami_gpu_memory_limit_bytes", **drs) == 20 * 1024 * MIB
    xpu = {"device_uuid": "n1-kunlun-0", "device_index": "0", "device_type": "kunlun"}
    assert sample("hami_gpu_shared_count", **xpu) == 0 and sample("hami_gpu_core_limit_ratio", **xpu) == 100
    assert sample("hami_gpu_memory_limit_bytes", device_uuid="BI-0", device_index="0", device_type="BI-V150")
    pod = {"namespace": "team", "pod": "p", "container_index": "0", "device_uuid": "GPU-1"}
    assert sample("hami_vgpu_memory_allocated_bytes", **pod) == 4096 * MIB
    quota = {"namespace": "team", "quota_name": "metax-tech.com/vmemory", "zone": "vGPU"}
    assert found[("hami_resource_quota_used", tuple(sorted({**quota, "limit": "8"}.items())))] == 4096
