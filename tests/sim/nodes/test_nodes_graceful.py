"""Graceful pod deletion as a kubelet does it: the simulated kubelet keeps a terminating Running pod running
(phase Running, its allocation untouched) for its grace period times the harness's scale, at most the cap,
then deletes it with grace 0; a shorter grace in a later DELETE brings the end forward. Against the API
emulator in kube-apiserver's mode (`kubelet_deletions`: nobody but the kubelet finishes a deletion), which
the real control plane's suite (tests/real/test_real_controllers.py) checks on kube-apiserver itself."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sim.emulator.testing import EmulatorOptions, run_emulator, wait_for
from sim.kit import podutil
from sim.kit.kube import Kube, pod_path
from sim.nodes.kubelet import Kubelets, PluginConfig, grace_seconds
from sim.nodes.objects import ClusterSpec, build_cluster, register_nodes

ALLOCATED = "hami.io/vgpu-devices-allocated"


def pod(phase: str, *, deletion_grace: int | None = None, spec_grace: int | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "default", "deletionTimestamp": "2026-01-01T00:00:00Z"}
    if deletion_grace is not None:
        meta["deletionGracePeriodSeconds"] = deletion_grace
    spec: dict[str, Any] = {"containers": [{"name": "main"}]}
    if spec_grace is not None:
        spec["terminationGracePeriodSeconds"] = spec_grace
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


@pytest.mark.parametrize(
    ("manifest", "scale", "cap", "expected"),
    [
        pytest.param(
            pod("Running", deletion_grace=3, spec_grace=30), 1.0, 10.0, 3.0, id="deletion-grace-wins"
        ),
        pytest.param(pod("Running", spec_grace=4), 1.0, 10.0, 4.0, id="spec-grace-without-deletion-grace"),
        pytest.param(pod("Running"), 1.0, 60.0, 30.0, id="kubernetes-default-30s"),
        pytest.param(pod("Running", deletion_grace=3), 0.5, 10.0, 1.5, id="scaled"),
        pytest.param(pod("Running", deletion_grace=30), 1.0, 10.0, 10.0, id="capped"),
        pytest.param(pod("Running", deletion_grace=3), 0.0, 10.0, 0.0, id="scale-zero-is-at-once"),
        pytest.param(pod("Pending", deletion_grace=3), 1.0, 10.0, 0.0, id="never-ran-goes-at-once"),
    ],
)
def test_grace_seconds(manifest: dict[str, Any], scale: float, cap: float, expected: float) -> None:
    config = PluginConfig(finish_deletions=True, grace_scale=scale, grace_cap=cap)
    assert grace_seconds(manifest, config) == pytest.approx(expected)


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[Kube]:
    """An emulator that leaves graceful pod deletions to the kubelet, as kube-apiserver does."""
    options = EmulatorOptions(kubelet_deletions=True, bookmark_interval=0.2)
    with run_emulator(tmp_path / "kube", options=options) as handle:
        client = Kube.from_kubeconfig(handle.kubeconfig)
        try:
            yield client
        finally:
            client.close()


@pytest.fixture
def cluster(kube: Kube) -> ClusterSpec:
    spec = build_cluster(1, seed=1, gpus_per_node=2, zones=1)
    register_nodes(kube, spec)
    return spec


def running_pod(kube: Kube, node: str, name: str) -> None:
    """A plain pod bound to `node` (carrying an allocation annotation the deletion must not touch)."""
    body = {
        "metadata": {"name": name, "annotations": {ALLOCATED: "GPU-0,NVIDIA,1000,0:;"}},
        "spec": {"containers": [{"name": "main", "image": "cuda"}], "terminationGracePeriodSeconds": 30},
    }
    kube.create(pod_path("default"), body)
    binding = {"metadata": {"name": name}, "target": {"kind": "Node", "name": node}}
    kube.create(pod_path("default", name, "binding"), binding)
    wait_for(lambda: podutil.phase(kube.get(pod_path("default", name))) == "Running", 10, f"{name} to run")


def delete(kube: Kube, name: str, grace: int) -> float:
    kube.request(
        "DELETE",
        pod_path("default", name),
        {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": grace},
    )
    return time.monotonic()


def gone_after(kube: Kube, name: str, since: float, timeout: float) -> float:
    """Seconds from `since` until the pod is gone, checking meanwhile that it runs on while terminating."""
    deadline = since + timeout
    while time.monotonic() < deadline:
        current = kube.get_or_none(pod_path("default", name))
        if current is None:
            return time.monotonic() - since
        assert podutil.terminating(current) and podutil.phase(current) == "Running", current["status"]
        assert podutil.annotations_of(current)[ALLOCATED] == "GPU-0,NVIDIA,1000,0:;"
        time.sleep(0.05)
    pytest.fail(f"{name} still there {timeout}s after its deletion")


def test_a_terminating_pod_runs_for_its_scaled_grace_then_goes(kube: Kube, cluster: ClusterSpec) -> None:
    config = PluginConfig(
        allocate_latency=0.0, workers=2, finish_deletions=True, grace_scale=0.5, grace_cap=5
    )
    kubelets = Kubelets(kube, cluster, config).start()
    try:
        running_pod(kube, cluster.nodes[0].name, "victim")
        took = gone_after(kube, "victim", delete(kube, "victim", 2), 30)
        assert took >= 1.0  # 2 s x 0.5, counted from when the kubelet saw the deletion (after `since`)
        assert kubelets.stats.counters["deletions_finished"] == 1
    finally:
        kubelets.stop()


def test_a_shorter_grace_brings_the_end_forward(kube: Kube, cluster: ClusterSpec) -> None:
    config = PluginConfig(
        allocate_latency=0.0, workers=2, finish_deletions=True, grace_scale=1.0, grace_cap=60
    )
    kubelets = Kubelets(kube, cluster, config).start()
    try:
        running_pod(kube, cluster.nodes[0].name, "slow")
        delete(kube, "slow", 50)
        wait_for(
            lambda: podutil.terminating(kube.get(pod_path("default", "slow"))), 10, "the deletion to start"
        )
        time.sleep(0.5)  # the kubelet has scheduled the end 50 s away
        again = delete(kube, "slow", 1)
        shortened = kube.get(pod_path("default", "slow"))["metadata"]
        assert shortened["deletionGracePeriodSeconds"] == 1
        assert gone_after(kube, "slow", again, 20) < 15
    finally:
        kubelets.stop()


def test_without_a_kubelet_the_deletion_waits(kube: Kube, cluster: ClusterSpec) -> None:
    """The emulator in kube-apiserver's mode never finishes a graceful deletion itself."""
    kubelets = Kubelets(kube, cluster, PluginConfig(allocate_latency=0.0, workers=1)).start()
    try:
        running_pod(kube, cluster.nodes[0].name, "left")
    finally:
        kubelets.stop()
    delete(kube, "left", 1)
    time.sleep(2.5)
    left = kube.get(pod_path("default", "left"))
    assert podutil.terminating(left) and left["metadata"]["deletionGracePeriodSeconds"] == 1
    kube.delete(pod_path("default", "left"), grace=0)
    assert kube.get_or_none(pod_path("default", "left")) is None
