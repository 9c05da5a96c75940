"""The simulated plugins of other protocols (sim.nodes.vendorplugins) under the storm's API faults: an
injected 409 on the Cambricon dsmlu plugin's unconditioned lock removal is retried, as HAMi's own release of
that lock is, and any API error the kubelet's Allocate meets fails the pod cleanly instead of leaving it
Pending forever (the CI storm lost `cambricon-006` so: the 409 escaped the admission, the pod stayed bound,
`allocating`, never admitted)."""

from __future__ import annotations

from typing import Any

from sim.emulator.testing import wait_for
from sim.kit import podutil
from sim.kit.kube import Kube, node_path, pod_path
from sim.nodes.kubelet import Kubelets, PluginConfig
from sim.nodes.objects import build_cluster, register_nodes
from sim.nodes.vendorplugins import ASSIGNED, DSMLU_LOCK, PROFILE, RELEASE_TRIES
from sim.nodes.vendors import parse_vendors


def _mlu_pod(kube: Kube, name: str, node: str) -> None:
    limits = {"cambricon.com/vmlu": "1", "cambricon.com/mlu.smlu.vmemory": "8"}
    annotations = {ASSIGNED: "false", PROFILE: "0_10_8", "hami.io/bind-time": "1"}
    kube.create(
        "/api/v1/namespaces/default/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "annotations": annotations},
            "spec": {
                "nodeName": node,
                "containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}],
            },
        },
    )


def _phase(kube: Kube, name: str) -> str:
    return podutil.phase(kube.get(pod_path("default", name)))


def test_dsmlu_lock_removal_conflicts_are_retried_and_api_errors_fail_the_pod(sim: Any) -> None:
    kube = Kube.from_kubeconfig(sim.kubeconfig)
    try:
        spec = build_cluster(1, seed=1, gpus_per_node=1, zones=1, vendors=parse_vendors("cambricon"))
        register_nodes(kube, spec)
        node = spec.nodes[0].name
        kubelets = Kubelets(kube, spec, PluginConfig(allocate_latency=0.0, workers=1)).start()
        try:
            kubelets.informer.synced.wait(5)
            kube.patch(node_path(node), {"metadata": {"annotations": {DSMLU_LOCK: "2026-11-29T00:00:00Z"}}})
            sim.add_fault(action="error", status=409, verb="patch", resource="nodes", count=RELEASE_TRIES - 1)
            _mlu_pod(kube, "retried", node)
            wait_for(lambda: _phase(kube, "retried") == "Running", 15, "the MLU pod to run")
            annotations = podutil.annotations_of(kube.get(node_path(node)))
            assert DSMLU_LOCK not in annotations and sim.clear_faults() == 1

            sim.add_fault(action="error", status=409, verb="patch", resource="nodes", count=RELEASE_TRIES)
            _mlu_pod(kube, "refused", node)
            wait_for(lambda: _phase(kube, "refused") == "Failed", 15, "the pod whose Allocate met a 409")
            status = kube.get(pod_path("default", "refused"))["status"]
            assert status["reason"] == "UnexpectedAdmissionError" and "409" in status["message"]
        finally:
            kubelets.stop()
    finally:
        kube.close()
