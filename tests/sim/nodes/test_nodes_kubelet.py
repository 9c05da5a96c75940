"""The simulated GPU nodes against the API emulator: the registration they publish and HAMi's device-plugin
Allocate contract (pop container groups, bind-phase success/failed, node lock release, GetPendingPod
fallback), plus the kubelet's Running/Succeeded/Failed transitions."""

from __future__ import annotations

import time
from typing import Any

import pytest

from app.core import codec
from sim.emulator.testing import wait_for
from sim.kit import podutil
from sim.kit.kube import Kube, node_path, pod_path
from sim.nodes.hamiplugin import TO_ALLOCATE, AllocateError, DevicePlugin, Stats
from sim.nodes.kubelet import Kubelets, PluginConfig
from sim.nodes.objects import ClusterSpec, build_cluster, register_nodes

LOCK = "hami.io/mutex.lock"
PHASE = "hami.io/bind-phase"


@pytest.fixture
def cluster(kube: Kube) -> ClusterSpec:
    spec = build_cluster(2, seed=1, gpus_per_node=2, zones=2)
    register_nodes(kube, spec)
    return spec


def container(name: str, gpus: int = 0) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": gpus, "nvidia.com/gpumem": 1000} if gpus else {}
    return {"name": name, "image": "cuda", "resources": {"limits": limits}}


def bound_pod(
    kube: Kube,
    name: str,
    node: str,
    *,
    containers: list[dict[str, Any]],
    init: list[dict[str, Any]] | None = None,
    to_allocate: str = "",
    lock: bool = True,
    extra: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A pod as our /bind leaves it: allocation annotations, bind-phase allocating, node lock, bound."""
    spec: dict[str, Any] = {"containers": containers, "schedulerName": "hami-scheduler"}
    if init:
        spec["initContainers"] = init
    notes = dict(extra or {})
    if to_allocate:
        notes.update(
            {
                "hami.io/vgpu-node": node,
                TO_ALLOCATE: to_allocate,
                "hami.io/vgpu-devices-allocated": to_allocate,
                PHASE: "allocating",
                "hami.io/bind-time": str(int(time.time())),
            }
        )
    kube.create(pod_path("default"), {"metadata": {"name": name, "annotations": notes}, "spec": spec})
    if lock:
        value = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())},default,{name}"
        kube.patch(node_path(node), {"metadata": {"annotations": {LOCK: value}}})
    binding = {"metadata": {"name": name}, "target": {"kind": "Node", "name": node}}
    kube.create(pod_path("default", name, "binding"), binding)
    return kube.get(pod_path("default", name))


def pod_notes(kube: Kube, name: str) -> dict[str, str]:
    return podutil.annotations_of(kube.get(pod_path("default", name)))


def node_lock(kube: Kube, node: str) -> str | None:
    return podutil.annotations_of(kube.get(node_path(node))).get(LOCK)


def test_registered_nodes_look_like_hami_device_plugin_nodes(kube: Kube, cluster: ClusterSpec) -> None:
    nodes = {podutil.name(n): n for n in kube.list(node_path())[1]}
    assert sorted(nodes) == ["gpu-node-01", "gpu-node-02"]
    node = nodes["gpu-node-02"]
    devices = codec.decode_register_json(
        node["metadata"]["annotations"]["hami.io/node-nvidia-register"], "NVIDIA"
    )
    assert [(d.index, d.count, d.devcore, d.mode, d.health) for d in devices] == [
        (0, 10, 100, "hami-core", True),
        (1, 10, 100, "hami-core", True),
    ]
    assert (
        devices[0].type == cluster.nodes[1].model.name and devices[0].devmem == cluster.nodes[1].model.memory
    )
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "20"  # 2 GPUs x split count 10
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == "gpu-node-02"
    assert labels["topology.kubernetes.io/zone"] == "region-1b"
    assert labels["topology.kubernetes.io/region"] == "region-1"
    assert nodes["gpu-node-01"]["metadata"]["labels"]["topology.kubernetes.io/zone"] == "region-1a"
    assert build_cluster(2, seed=1, gpus_per_node=2, zones=2) == cluster  # the seed fixes the GPU UUIDs


def test_allocate_pops_one_container_group_per_call_then_succeeds_and_unlocks(
    kube: Kube, cluster: ClusterSpec
) -> None:
    node = cluster.nodes[0]
    a, b = (d.id for d in node.devices)
    groups = f"{a},NVIDIA,1000,0:;;{a},NVIDIA,2000,0:{b},NVIDIA,2000,0:;"
    bound_pod(
        kube,
        "train",
        node.name,
        init=[container("prepare", 1)],
        containers=[container("proxy"), container("main", 2)],
        to_allocate=groups,
    )
    plugin = DevicePlugin(kube, node, Stats())

    served, index = plugin.allocate(1)
    assert (podutil.name(served), index) == ("train", 0)
    notes = pod_notes(kube, "train")
    assert (
        notes[TO_ALLOCATE] == f";;{a},NVIDIA,2000,0:{b},NVIDIA,2000,0:;;"
    )  # erased, one `;` more (quirk 43)
    assert notes[PHASE] == "allocating" and node_lock(kube, node.name) is not None

    served, index = plugin.allocate(2)
    assert index == 2  # the main container: init 0, proxy 1, main 2
    notes = pod_notes(kube, "train")
    assert "NVIDIA" not in notes[TO_ALLOCATE]
    assert notes[PHASE] == "success"
    assert notes["hami.io/vgpu-devices-allocated"] == groups  # kept for the scheduler
    assert node_lock(kube, node.name) is None
    assert plugin.stats.counters["lock_released"] == 1


def test_unknown_device_fails_the_allocation_and_releases_the_lock(kube: Kube, cluster: ClusterSpec) -> None:
    node = cluster.nodes[0]
    bound_pod(kube, "bad", node.name, containers=[container("main", 1)], to_allocate="GPU-nope,NVIDIA,10,0:;")
    plugin = DevicePlugin(kube, node, Stats())
    with pytest.raises(AllocateError, match="GPU-nope not found"):
        plugin.allocate(1)
    assert pod_notes(kube, "bad")[PHASE] == "failed"
    assert node_lock(kube, node.name) is None


def test_device_count_must_match_the_container_request(kube: Kube, cluster: ClusterSpec) -> None:
    node = cluster.nodes[0]
    one = f"{node.devices[0].id},NVIDIA,10,0:;"
    bound_pod(kube, "short", node.name, containers=[container("main", 2)], to_allocate=one)
    with pytest.raises(AllocateError, match="device number not matched"):
        DevicePlugin(kube, node, Stats()).allocate(2)
    assert pod_notes(kube, "short")[PHASE] == "failed"
    assert node_lock(kube, node.name) is None


def test_pending_pod_fallback_without_a_lock(kube: Kube, cluster: ClusterSpec) -> None:
    node, other = cluster.nodes
    groups = f"{node.devices[1].id},NVIDIA,10,0:;"
    bound_pod(kube, "unlocked", node.name, containers=[container("main", 1)], to_allocate=groups, lock=False)
    # bound elsewhere with a matching vgpu-node: never this node's pod
    bound_pod(
        kube, "elsewhere", other.name, containers=[container("main", 1)], to_allocate=groups, lock=False
    )
    plugin = DevicePlugin(kube, node, Stats())
    assert podutil.name(plugin.pending_pod()) == "unlocked"
    served, _ = plugin.allocate(1)
    assert podutil.name(served) == "unlocked"
    assert pod_notes(kube, "unlocked")[PHASE] == "success"
    assert plugin.stats.counters["pending_pod_fallback"] == 2
    with pytest.raises(AllocateError, match=f"no binding pod found on node {node.name}"):
        plugin.pending_pod()  # the only candidate left is no longer `allocating`


def test_a_lock_held_by_another_pod_is_not_released(kube: Kube, cluster: ClusterSpec) -> None:
    node = cluster.nodes[0]
    value = "2026-01-01T00:00:00Z,default,someone-else"
    kube.patch(node_path(node.name), {"metadata": {"annotations": {LOCK: value}}})
    plugin = DevicePlugin(kube, node, Stats())
    assert plugin.release_lock("default", "me") is False
    assert node_lock(kube, node.name) == value
    assert plugin.release_lock("default", "someone-else") is True
    assert node_lock(kube, node.name) is None


def test_kubelets_run_allocate_and_report_pod_phases(kube: Kube, cluster: ClusterSpec) -> None:
    node = cluster.nodes[1]
    kubelets = Kubelets(kube, cluster, PluginConfig(allocate_latency=0.0, workers=2)).start()
    try:
        kubelets.informer.synced.wait(5)
        gpu = f"{node.devices[0].id},NVIDIA,1000,0:;{node.devices[1].id},NVIDIA,1000,0:;"
        bound_pod(
            kube,
            "job",
            node.name,
            init=[container("prepare", 1)],
            containers=[container("main", 1)],
            to_allocate=gpu,
            extra={podutil.RUN_SECONDS: "0.5"},
        )
        bound_pod(kube, "plain", node.name, containers=[container("web")], lock=False)
        bound_pod(
            kube,
            "broken",
            cluster.nodes[0].name,
            containers=[container("main", 1)],
            to_allocate="GPU-missing,NVIDIA,1,0:;",
        )

        def phase(name: str) -> str:
            return podutil.phase(kube.get(pod_path("default", name)))

        wait_for(lambda: phase("job") == "Running", 10, "the GPU pod to run")
        job = kube.get(pod_path("default", "job"))
        assert podutil.annotations_of(job)[PHASE] == "success"
        assert job["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
        assert job["status"]["containerStatuses"][0]["state"]["running"]
        wait_for(lambda: phase("plain") == "Running", 10, "the GPU-less pod to run")
        wait_for(lambda: phase("broken") == "Failed", 10, "the pod whose Allocate failed")
        broken = kube.get(pod_path("default", "broken"))
        assert broken["status"]["reason"] == "UnexpectedAdmissionError"
        assert podutil.annotations_of(broken)[PHASE] == "failed"
        wait_for(lambda: phase("job") == "Succeeded", 10, "the GPU pod to finish after run-seconds")
        assert phase("plain") == "Running"  # no run-seconds: runs until deleted
        assert all(node_lock(kube, n.name) is None for n in cluster.nodes)
        counters = kubelets.stats.counters
        assert counters["allocate_ok"] == 2 and counters["pods_failed_admission"] == 1
        assert counters["pods_succeeded"] == 1 and counters["allocation_incomplete"] == 0
    finally:
        kubelets.stop()


def test_a_status_the_api_does_not_answer_is_sent_again(sim: Any) -> None:
    """An API outage (5xx) while the kubelet reports a pod's admission: it keeps sending the status, as
    the kubelet's status manager does; given up at once, the pod stayed Pending with its node locked (the
    real-control-plane storm lost pods so around a kube-apiserver restart)."""
    kube = Kube.from_kubeconfig(sim.kubeconfig)  # no retries of its own: the kubelet's loop must do it
    try:
        spec = build_cluster(1, seed=1, gpus_per_node=2, zones=1)
        register_nodes(kube, spec)
        node = spec.nodes[0]
        kubelets = Kubelets(kube, spec, PluginConfig(allocate_latency=0.0, workers=1)).start()
        try:
            kubelets.informer.synced.wait(5)
            sim.add_fault(
                action="error", status=503, verb="patch", resource="pods", subresource="status", count=3
            )
            gpu = f"{node.devices[0].id},NVIDIA,1000,0:;"
            bound_pod(kube, "outage", node.name, containers=[container("main", 1)], to_allocate=gpu)
            wait_for(
                lambda: podutil.phase(kube.get(pod_path("default", "outage"))) == "Running",
                15,
                "the pod to run once the API answers again",
            )
            assert kubelets.stats.counters["pods_running"] == 1
            assert sim.faults()["rules"][0]["fired"] == 3
        finally:
            kubelets.stop()
    finally:
        kube.close()
