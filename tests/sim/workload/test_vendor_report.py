"""The demo's verdict over every vendor (sim/workload/report.py): devices of Ascend, Cambricon and NVIDIA
nodes as the vendors register or derive them, loads from each vendor's allocation annotation, bound pods
counted per vendor, both kinds of node lock, and two pods on one NeuronCore (sim/workload/devicerules.py) as
the storm sees them."""

from __future__ import annotations

from typing import Any

from sim.chaos import check
from sim.nodes.objects import build_cluster, node_object
from sim.nodes.vendors import parse_vendors
from sim.workload import report


def bound(name: str, node: str, notes: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "labels": {}, "annotations": notes},
        "spec": {"nodeName": node, "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }


def test_every_vendor_is_counted() -> None:
    spec = build_cluster(
        2, seed=1, gpus_per_node=1, zones=1, vendors=parse_vendors("nvidia+cambricon,ascend910b3")
    )
    nodes = [node_object(n) for n in spec.nodes]
    nodes[0]["metadata"]["annotations"]["cambricon.com/dsmlu.lock"] = "2026-01-01T00:00:00Z"
    gpu = spec.nodes[0].devices[0].id
    mlu = f"{spec.nodes[0].name}-cambricon-mlu-0"
    npu = f"{spec.nodes[1].name}-Ascend910B3-0"
    both = {
        "hami.io/vgpu-devices-allocated": f"{gpu},NVIDIA,1000,0:;",
        "hami.io/cambricon-mlu-devices-allocated": f"{mlu},MLU,2560,50:;",
    }
    ascend = {"hami.io/Ascend910B3-devices-allocated": f"{npu},Ascend910B3,70000,0:;"}
    pods = [bound("both", spec.nodes[0].name, both), bound("npu", spec.nodes[1].name, ascend)]
    summary = report.summarize(pods, nodes)
    assert summary["pods_bound_by_vendor"] == {"Ascend910B3": 1, "MLU": 1, "NVIDIA": 1}
    assert summary["gpus"] == 1 + 4 + 8  # one GPU, four MLUs, eight NPUs
    assert [(o["device"], o["over"]) for o in summary["oversubscribed"]] == [
        (npu, ["memory"])
    ]  # 70000 > 65536
    assert summary["locked_nodes"] == [spec.nodes[0].name]


def test_the_storm_verdict_counts_two_pods_on_one_neuroncore_within_every_sum() -> None:
    """Finding 2's shape: two leaders gave core 0 of one Neuron device to two pods. Slots (2 of 2), the core
    sum (1 + 1 of the mask 3): within every sum — oversubscribed by the Neuron rule alone."""
    spec = build_cluster(1, seed=1, gpus_per_node=1, zones=1, vendors=parse_vendors("awsneuron"))
    nodes = [node_object(n) for n in spec.nodes]
    name = spec.nodes[0].name
    core0 = {"hami.io/aws-neuron-devices-allocated": f"{name}-AWSNeuron-0,AWSNeuron,0,1:;"}
    core1 = {"hami.io/aws-neuron-devices-allocated": f"{name}-AWSNeuron-0,AWSNeuron,0,2:;"}
    same = check.oversubscription([bound("a", name, core0), bound("b", name, core0)], nodes)
    assert [(o["device"], o["over"], o["pods"]) for o in same] == [
        (f"{name}-AWSNeuron-0", ["core-mask"], ["default/a", "default/b"])
    ]
    assert check.oversubscription([bound("a", name, core0), bound("b", name, core1)], nodes) == []
