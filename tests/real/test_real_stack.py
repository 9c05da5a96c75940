"""The harness on the real control plane: a GPU pod created with the real kubectl goes through the chart's
webhook and the real kube-scheduler with our extender, gets HAMi's annotations, the simulated device plugin
takes and releases the node lock, and a deletion completes (the fake kubelet finishes it). The chart's RBAC
is what the API server enforces for our ServiceAccount's user. With `worker.publishCapacity` the leader's
capacity annotation is on every GPU node and node status stays the kubelet's."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest

from sim.cluster.stack import Stack
from sim.controlplane.base import EXTENDER
from sim.kit.kube import Kube, KubeError, pod_path

pytestmark = [pytest.mark.integration, pytest.mark.real]
POD = """
apiVersion: v1
kind: Pod
metadata: {name: kubectl-gpu, namespace: default}
spec:
  containers:
    - name: main
      image: cuda
      resources:
        limits: {nvidia.com/gpu: "1", nvidia.com/gpumem: "3000", nvidia.com/gpucores: "30"}
"""


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def kubectl(stack: Stack, *args: str, stdin: str = "") -> str:
    done = subprocess.run(
        [str(stack.control_plane.kubectl()), "--kubeconfig", str(stack.kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_pod_created_with_kubectl_is_scheduled_through_our_extender(real_cluster: Stack) -> None:
    kube = real_cluster.kube
    assert kube is not None
    kubectl(real_cluster, "apply", "-f", "-", stdin=POD)
    path = pod_path("default", "kubectl-gpu")

    def running() -> dict[str, Any] | None:
        pod = kube.get(path)
        return pod if pod["status"].get("phase") == "Running" else None

    pod = wait_for(running, 60, "the pod to run")
    notes = pod["metadata"]["annotations"]
    assert pod["spec"]["schedulerName"] == "hami-scheduler"  # the chart's webhook, called by the API server
    assert notes["hami.io/vgpu-node"] == pod["spec"]["nodeName"]
    assert notes["hami.io/bind-phase"] == "success"
    device = notes["hami.io/vgpu-devices-allocated"].split(":")[0].split(",")
    assert device[1] == "NVIDIA" and int(device[2]) >= 3000  # a whole MIG slice when placed on a MIG node
    node = kube.get(f"/api/v1/nodes/{pod['spec']['nodeName']}")
    assert "hami.io/mutex.lock" not in (node["metadata"].get("annotations") or {})
    events = kube.list("/api/v1/namespaces/default/events", fieldSelector="involvedObject.name=kubectl-gpu")[
        1
    ]
    assert {"Scheduled", "BindingSucceed"} <= {e["reason"] for e in events}
    kubectl(real_cluster, "delete", "pod", "kubectl-gpu", "--wait=true", "--timeout=30s")
    assert kube.get_or_none(path) is None


def test_the_api_server_enforces_the_charts_rbac_for_our_service_account(real_cluster: Stack) -> None:
    assert real_cluster.control_plane is not None
    ours = Kube.from_kubeconfig(real_cluster.control_plane.kubeconfig_for(EXTENDER))
    try:
        assert ours.list("/api/v1/nodes")[1]  # granted by the chart's ClusterRole
        with pytest.raises(KubeError) as denied:
            ours.list("/api/v1/secrets")  # never granted
        assert denied.value.status == 403 and denied.value.reason == "Forbidden"
        with pytest.raises(KubeError) as denied:
            ours.delete("/api/v1/nodes/gpu-node-1")  # nodes: get/list/watch/patch only
        assert denied.value.status == 403
    finally:
        ours.close()


def test_the_capacity_annotation_is_on_every_gpu_node_and_status_untouched(real_cluster: Stack) -> None:
    def annotated() -> list[dict[str, Any]] | None:
        nodes = real_cluster.kube.list("/api/v1/nodes")[1]
        values = [(n["metadata"].get("annotations") or {}).get("hami.io/device-capacity") for n in nodes]
        return nodes if len(nodes) == 4 and all(values) else None

    for node in wait_for(annotated, 30.0, "the capacity annotation on the 4 GPU nodes"):
        figures = json.loads(node["metadata"]["annotations"]["hami.io/device-capacity"])["vendors"]["NVIDIA"]
        assert (figures["devices"], figures["cores"]) == (8, 800), node["metadata"]["name"]
        assert 0 <= figures["memoryFree"] <= figures["memory"] and 0 <= figures["coresFree"] <= 800
        status = node.get("status") or {}
        for field in ("capacity", "allocatable"):
            names = set(status.get(field) or {})
            assert not names & {"nvidia.com/gpumem", "nvidia.com/gpucores", "hami.io/gpumem"}, names
