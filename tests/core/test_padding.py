"""Padding on mixed-vendor nodes (issue 19, scope item 5; docs/compatibility.md, decision core).

HAMi pads, after each container, an empty group under every device type on the chosen node, so a vendor
the pod asks nothing of still gets its allocation list — one `;` per container — when its
`PatchAnnotations` writes for any non-empty list (`len(devlist) > 0`). We write the same bytes for those
lists, and never the keys a device plugin uses to find or configure its pods (Enflame DRS's
`enflame.com/gcu-assigned`, Cambricon's `CAMBRICON_DSMLU_*`, Kunlun's `BAIDU_COM_DEVICE_IDX`, ...): on a
pod without such devices those would make that plugin take the pod for its own. Nodes are the demo's
mixes (sim.nodes.objects with sim.nodes.vendors parts), decoded and decided by the core as the filter does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from app.core.decision import Policies, allocation_annotations, decide, pod_context
from app.core.inventory import decode_node
from sim.nodes.objects import build_cluster, node_object
from sim.workload.report import VENDORS


@dataclass(frozen=True)
class Case:
    id: str
    kinds: tuple[str, ...]  # the node's parts (sim.nodes.vendors; "nvidia" adds NVIDIA GPUs)
    containers: tuple[dict[str, str], ...]  # each container's limits, in order (init containers first)
    padded: dict[str, str]  # the other vendors' lists, exactly
    absent: tuple[str, ...] = ()  # plugin keys the padding must not write
    requested: tuple[str, ...] = ()  # keys of the requested vendor that must be there (unchanged rules)
    init: int = 0  # how many of `containers` are init containers


GPU = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}
CASES = [
    Case(
        "nvidia-pod-on-nvidia+hygon",
        ("nvidia", "hygon"),
        (GPU, {}),
        {"hami.io/dcu-devices-to-allocate": ";;", "hami.io/dcu-devices-allocated": ";;"},
        requested=("hami.io/vgpu-devices-to-allocate", "hami.io/vgpu-devices-allocated"),
    ),
    Case(
        "hygon-pod-on-nvidia+hygon",
        ("nvidia", "hygon"),
        ({"hygon.com/dcunum": "1"},),
        {"hami.io/vgpu-devices-to-allocate": ";", "hami.io/vgpu-devices-allocated": ";"},
        absent=("hami.io/vgpu-mig-allocations",),
        requested=("hami.io/dcu-devices-allocated",),
    ),
    Case(
        "nvidia-pod-with-a-gpu-less-init-container-on-nvidia+hygon",
        ("nvidia", "hygon"),
        ({}, GPU),
        {"hami.io/dcu-devices-to-allocate": ";;", "hami.io/dcu-devices-allocated": ";;"},
        init=1,
    ),
    Case(
        "neuron-pod-on-neuron+amd",
        ("awsneuron", "amd"),
        ({"aws.amazon.com/neuron": "1"},),
        {"hami.io/amd-devices-to-allocate": ";", "hami.io/amd-devices-allocated": ";"},
        requested=("AWS_NEURON_IDS", "NEURON_ALLOCATED", "hami.io/aws-neuron-devices-allocated"),
    ),
    Case(
        "amd-pod-on-neuron+amd",
        ("awsneuron", "amd"),
        ({"amd.com/gpu": "1"}, {}),
        {"hami.io/aws-neuron-devices-allocated": ";;"},
        absent=("AWS_NEURON_IDS", "NEURON_ALLOC_TIME", "NEURON_ALLOCATED", "aws.amazon.com/predicate-node"),
        requested=("hami.io/amd-devices-allocated",),
    ),
    Case(
        "kunlun-pod-on-kunlun+enflame-drs",
        ("kunlun", "enflame-drs"),
        ({"kunlunxin.com/xpu": "1"},),
        {"hami.io/enflame-vgpu-devices-allocated": ";"},
        absent=(
            "enflame.com/gcu-assigned",
            "enflame.com/gcu-assigned-time",
            "enflame.com/gcu-assigned-index",
            "enflame.com/gcu-assigned-id",
            "enflame.com/gcu-assigned-minor",
            "enflame.com/gcu-request-size",
            "assigned-containers",
        ),
        requested=("hami.io/kunlun-allocated", "BAIDU_COM_DEVICE_IDX"),
    ),
    Case(
        "enflame-drs-pod-on-kunlun+enflame-drs",
        ("kunlun", "enflame-drs"),
        ({"enflame.com/drs-gcu": "1"},),
        {"hami.io/kunlun-allocated": ";"},
        absent=("BAIDU_COM_DEVICE_IDX",),
        requested=("hami.io/enflame-vgpu-devices-allocated", "enflame.com/gcu-assigned"),
    ),
    Case(
        "nvidia-pod-on-nvidia+cambricon",  # HAMi 2.x indexes devlist[0][0] here: an empty list panics
        ("nvidia", "cambricon"),
        (GPU,),
        {
            "hami.io/cambricon-mlu-devices-to-allocate": ";",
            "hami.io/cambricon-mlu-devices-allocated": ";",
        },
        absent=("CAMBRICON_DSMLU_ASSIGNED", "CAMBRICON_DSMLU_PROFILE"),
    ),
    Case(
        "nvidia-pod-on-nvidia+mthreads",  # Moore Threads writes no to-allocate list at all (V§3.7 #1)
        ("nvidia", "mthreads"),
        (GPU,),
        {"hami.io/mthreads-vgpu-devices-allocated": ";"},
        absent=(
            "hami.io/mthreads-vgpu-devices-to-allocate",
            "mthreads.com/gpu-index",
            "mthreads.com/predicate-node",
            "mthreads.com/predicate-time",
        ),
    ),
]


def _pod(case: Case) -> dict[str, Any]:
    containers = [
        {"name": f"c{i}", "image": "x", "resources": {"limits": limits} if limits else {}}
        for i, limits in enumerate(case.containers)
    ]
    spec: dict[str, Any] = {"schedulerName": "hami-scheduler", "containers": containers[case.init :]}
    if case.init:
        spec["initContainers"] = containers[: case.init]
    return {"metadata": {"name": "p", "namespace": "default", "uid": "u-1"}, "spec": spec}


def _decided(case: Case) -> tuple[dict[str, str], set[str]]:
    """The annotations the filter writes for the pod on the node, and the vendors with devices there."""
    spec = build_cluster(1, vendors=[case.kinds], gpus_per_node=2).nodes[0]
    node = decode_node(node_object(spec), VENDORS)
    pod = _pod(case)
    ctx = pod_context(pod, VENDORS, Policies(), {})
    winner = decide(ctx, [spec.name], {spec.name: node}, {}, VENDORS).winner
    assert winner is not None and winner.devices is not None, "the pod does not fit the node"
    now = 1700000000
    annotations = allocation_annotations(winner.node, winner.devices, VENDORS, now, pod, now * 10**9)
    return annotations, {d.vendor for d in node.devices}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_vendor_on_the_node_gets_its_empty_lists_and_nothing_else(case: Case) -> None:
    annotations, on_node = _decided(case)
    assert {k: annotations.get(k) for k in case.padded} == case.padded
    assert not set(case.absent) & set(annotations), sorted(set(case.absent) & set(annotations))
    assert set(case.requested) <= set(annotations), sorted(set(case.requested) - set(annotations))
    elsewhere = {k for v in VENDORS if v.key not in on_node for k in (d.name for d in v.pod_keys)}
    assert not elsewhere & set(annotations), "a vendor without devices on the node wrote something"
