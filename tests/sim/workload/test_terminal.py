"""What the demo prints (sim/workload/terminal.py): every number in its vendor's units, a vendor column, a
mixed node's devices under their own vendor, and unschedulable reasons whole, wrapped under their column."""

from __future__ import annotations

from typing import Any

from sim.nodes.objects import build_cluster, node_object
from sim.nodes.vendors import parse_vendors
from sim.workload import terminal
from sim.workload.mix import KIND_LABEL

REASON = (
    "0/20 nodes are available: 14 NodeInsufficientDevice, 6 8/8 CardInsufficientMemory. preemption: "
    "0/20 nodes are available: 20 No preemption victims found for incoming pod."
)


def pod(name: str, kind: str, node: str = "", notes: dict[str, str] | None = None) -> dict[str, Any]:
    annotations = dict(notes or {})
    status: dict[str, Any] = {"phase": "Running" if node else "Pending"}
    if not node:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": REASON}
        ]
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {KIND_LABEL: kind},
            "annotations": annotations,
        },
        "spec": {"nodeName": node, "containers": [{"name": "c"}]},
        "status": status,
    }


def cluster() -> tuple[list[dict[str, Any]], dict[str, str]]:
    spec = build_cluster(
        2, seed=3, gpus_per_node=2, zones=1, vendors=parse_vendors("nvidia+hygon,awsneuron+amd")
    )
    mixed, other = spec.nodes
    ids = {
        "gpu0": mixed.devices[0].id,
        "gpu1": mixed.devices[1].id,
        "dcu1": f"{mixed.name}-DCU-1",
        "amd0": f"{other.name}-amd-0",
        "neuron3": f"{other.name}-AWSNeuron-3",
        "mixed": mixed.name,
        "other": other.name,
    }
    return [node_object(n) for n in spec.nodes], ids


def test_a_mixed_nodes_devices_are_told_apart_and_each_vendor_reads_in_its_units() -> None:
    nodes, ids = cluster()
    pods = [
        pod(
            "mixed-1",
            "mixed",
            ids["mixed"],
            {
                "hami.io/vgpu-devices-allocated": f"{ids['gpu1']},NVIDIA,2048,100:;",
                "hami.io/dcu-devices-allocated": f"{ids['dcu1']},DCU,4096,0:;",
            },
        ),
        pod(
            "amd-1", "amd", ids["other"], {"hami.io/amd-devices-allocated": f"{ids['amd0']},AMD,65536,152:;"}
        ),
        pod(
            "neuron-1",
            "awsneuron",
            ids["other"],
            {"hami.io/aws-neuron-devices-allocated": f"{ids['neuron3']},AWSNeuron,0,3:;"},
        ),
        pod("unfit-1", "unfit"),
    ]
    table = terminal.placement_table(pods, nodes, columns=120)
    header, rows = table[0], table[2:]
    assert header.split()[:4] == ["POD", "KIND", "VENDOR", "PHASE"]
    text = "\n".join(rows)
    assert "DCU+NVIDIA" in text and "DCU#1 4096 MiB 0%  NVIDIA#1 2048 MiB 100%" in text  # both #1: named
    assert "#0 65536 MiB 152 CUs" in text  # AMD records compute units, not percent
    assert "#3 NeuronCore 0+1" in text  # a Neuron allocation is a core mask; no memory on the device
    assert all(len(line) <= 120 for line in table)
    unfit = next(line for line in rows if line.startswith("default/unfit-1"))
    wrapped = rows[rows.index(unfit) :]
    column = unfit.index("0/20")
    assert all(line[:column].strip() == "" for line in wrapped[1:])
    assert " ".join(line[column:] for line in wrapped) == REASON  # whole, not cut


def test_the_utilisation_chart_lists_each_vendor_of_a_node_once() -> None:
    nodes, ids = cluster()
    pods = [
        pod(
            "g",
            "fraction",
            ids["mixed"],
            {"hami.io/vgpu-devices-allocated": f"{ids['gpu1']},NVIDIA,8000,30:;"},
        ),
        pod(
            "n",
            "awsneuron",
            ids["other"],
            {"hami.io/aws-neuron-devices-allocated": f"{ids['neuron3']},AWSNeuron,0,1:;"},
        ),
    ]
    chart = terminal.utilisation_chart(pods, nodes)
    start = chart.index(f"{ids['mixed']}  region-1a")
    block = chart[start + 1 : chart.index(f"{ids['other']}  region-1a")]
    headers = [line for line in block if not line.startswith("    ")]
    assert [h.split(":")[0].strip() for h in headers] == ["NVIDIA", "DCU"]
    nvidia = block[1 : block.index(headers[1])]
    assert len(nvidia) == 2 and "tasks  1/10" in nvidia[1] and "30.0%" in nvidia[1]
    neuron = chart[chart.index("  AWSNeuron") + 1 :][:4]
    assert "mem -" in neuron[0]  # Neuron devices account no memory
    assert " 50.0%  tasks  1/2" in neuron[3]  # core 0 of cores 0 and 1 (masks 1 of 3): half, by bits
