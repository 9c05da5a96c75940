"""Simulated MIG nodes (sim/nodes/objects.py, `mig_nodes`) and the device plugin's MIG Allocate
(sim/nodes/migplugin.py): the registration HAMi's plugin publishes in MIG mode, the reserved slices realized
exactly as the scheduler chose them with their runtime identity written back, refusals, and instances freed
with their pod."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from app.core import codec, mig
from app.core.model import ContainerDevice, MigPlacement
from app.devices.nvidia import keys
from sim.kit import podutil
from sim.kit.kube import Kube, node_path, pod_path
from sim.nodes.hamiplugin import TO_ALLOCATE, AllocateError, DevicePlugin, Stats
from sim.nodes.migplugin import MigError, MigInstances
from sim.nodes.objects import ClusterSpec, NodeSpec, build_cluster, parse_models, register_nodes

PHASE = "hami.io/bind-phase"


@pytest.fixture
def cluster(kube: Kube) -> ClusterSpec:
    spec = build_cluster(2, seed=1, gpus_per_node=2, models=parse_models("a100-40,l40s"), mig_nodes=1)
    register_nodes(kube, spec)
    return spec


def entry(container: int, device: int, gpu: str, profile: str, start: int, size: int) -> mig.MigAllocation:
    return mig.MigAllocation(container, device, gpu, profile, MigPlacement(start, size))


def bound_pod(kube: Kube, name: str, node: NodeSpec, groups: str, entries: list[mig.MigAllocation]) -> None:
    """A pod as our /filter and /bind leave it, MIG allocations included, locked and bound."""
    notes = {
        "hami.io/vgpu-node": node.name,
        TO_ALLOCATE: groups,
        "hami.io/vgpu-devices-allocated": groups,
        mig.ANNOTATION: mig.encode(entries),
        PHASE: "allocating",
        "hami.io/bind-time": str(int(time.time())),
    }
    limits = {"nvidia.com/gpu": sum(1 for piece in groups.split(";")[0].split(":") if piece)}
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "cuda", "resources": {"limits": limits}}]
    }
    kube.create(pod_path("default"), {"metadata": {"name": name, "annotations": notes}, "spec": spec})
    lock = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())},default,{name}"
    kube.patch(node_path(node.name), {"metadata": {"annotations": {"hami.io/mutex.lock": lock}}})
    kube.create(
        pod_path("default", name, "binding"), {"metadata": {"name": name}, "target": {"name": node.name}}
    )


def notes_of(kube: Kube, name: str) -> dict[str, str]:
    return podutil.annotations_of(kube.get(pod_path("default", name)))


def test_mig_nodes_register_like_hamis_plugin_in_mig_mode(kube: Kube, cluster: ClusterSpec) -> None:
    mig_node, plain = cluster.nodes
    assert (mig_node.mig, plain.mig) == (True, False)
    registered = kube.get(node_path(mig_node.name))
    devices = codec.decode_register_json(registered["metadata"]["annotations"][keys.REGISTER], "NVIDIA")
    assert [(d.mode, d.count, d.devcore, d.devmem) for d in devices] == [("mig", 7, 100, 40960)] * 2
    profiles = {p.name: p for p in devices[0].mig_profiles}
    assert sorted(profiles) == ["1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"]
    assert profiles["1g.5gb"].memory_mb == 4864 and len(profiles["1g.5gb"].placements) == 7
    assert profiles["3g.20gb"].placements == (MigPlacement(0, 4), MigPlacement(4, 4))
    assert registered["status"]["allocatable"]["nvidia.com/gpu"] == "14"
    assert tuple(dataclasses.replace(d, vendor="") for d in devices) == mig_node.devices
    with pytest.raises(ValueError, match="only 1 are MIG-capable"):
        build_cluster(2, models=parse_models("a100-40,l40s"), mig_nodes=2)


def test_allocate_realizes_the_reserved_slices_and_writes_their_identity(
    kube: Kube, cluster: ClusterSpec
) -> None:
    node = cluster.nodes[0]
    gpu = node.devices[0].id
    groups = f"{gpu},NVIDIA,4864,14:{gpu},NVIDIA,4864,14:;"
    bound_pod(
        kube, "train", node, groups, [entry(0, 0, gpu, "1g.5gb", 6, 1), entry(0, 1, gpu, "1g.5gb", 5, 1)]
    )
    plugin = DevicePlugin(kube, node, Stats())
    served, index = plugin.allocate(2)
    assert (podutil.name(served), index) == ("train", 0)
    notes = notes_of(kube, "train")
    assert notes[PHASE] == "success"
    realized = mig.decode(notes[mig.ANNOTATION])
    instances = [e.instance for e in realized]
    assert [(e.placement.start, e.placement.size) for e in realized] == [(6, 1), (5, 1)]  # as reserved
    assert [(i.gpu_instance_id, i.compute_instance_id) for i in instances if i] == [(0, 0), (1, 0)]
    assert all(i and i.uuid.startswith("MIG-") for i in instances) and len({i for i in instances}) == 2
    assert notes[mig.ANNOTATION].endswith('"gpuInstanceID":1,"computeInstanceID":0}]')
    assert plugin.mig.in_use(gpu) == [MigPlacement(6, 1), MigPlacement(5, 1)]
    assert plugin.stats.counters["mig_allocations"] == 1

    # a slice overlapping one in use is refused: the plugin never picks another placement
    groups = f"{gpu},NVIDIA,20096,42:;"
    bound_pod(kube, "late", node, groups, [entry(0, 0, gpu, "3g.20gb", 4, 4)])
    with pytest.raises(AllocateError, match="overlaps an instance in use"):
        plugin.allocate(1)
    assert notes_of(kube, "late")[PHASE] == "failed"
    assert plugin.mig.release(podutil.uid(served)) == 2
    assert plugin.mig.in_use(gpu) == []


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([], "no MIG allocation for container 0 device 0"),
        ([entry(0, 0, "GPU-x", "1g.5gb", 6, 1)], "no MIG allocation for container 0 device 0"),
        ([entry(0, 0, "G", "2g.10gb", 1, 2)], "offers no MIG profile 2g.10gb"),
        ([entry(0, 0, "G", "9g.99gb", 0, 1)], "offers no MIG profile 9g.99gb"),
    ],
    ids=["missing", "other-gpu", "not-a-placement", "unknown-profile"],
)
def test_realize_refuses_what_the_gpu_cannot_do(
    cluster: ClusterSpec, entries: list[mig.MigAllocation], message: str
) -> None:
    device = cluster.nodes[0].devices[0]
    instances = MigInstances({"G": device})
    with pytest.raises(MigError, match=message):
        instances.realize(
            "uid", {mig.ANNOTATION: mig.encode(entries)}, 0, (ContainerDevice("G", "NVIDIA", 1, 0),)
        )


def test_realize_ignores_groups_without_mig_gpus_and_reuses_a_pods_instance(cluster: ClusterSpec) -> None:
    plain = cluster.nodes[1].devices[0]
    device = cluster.nodes[0].devices[0]
    instances = MigInstances({"P": plain, "G": device})
    assert instances.realize("uid", {}, 0, (ContainerDevice("P", "NVIDIA", 1, 0),)) == ""
    # an init container and an app container given the same slice share one instance (as HAMi's plugin)
    entries = [entry(0, 0, "G", "1g.5gb", 6, 1), entry(1, 0, "G", "1g.5gb", 6, 1)]
    notes = {mig.ANNOTATION: mig.encode(entries)}
    first = mig.decode(instances.realize("uid", notes, 0, (ContainerDevice("G", "NVIDIA", 1, 0),)))
    notes[mig.ANNOTATION] = mig.encode(first)
    second = mig.decode(instances.realize("uid", notes, 1, (ContainerDevice("G", "NVIDIA", 1, 0),)))
    assert second[0].instance == second[1].instance and second[0].instance is not None
    assert instances.in_use("G") == [MigPlacement(6, 1)]
