"""DRA side by side on the real control plane (kube-apiserver and kube-scheduler 1.37: resource.k8s.io/v1 and
DRAExtendedResource GA; docs/compatibility.md). On 1.34 (HAMI_KUBE_VERSION=1.34) the gate is alpha and off:
the API server drops `extendedResourceName`, nothing collides, and the test checks that pods still place.

One cluster, two nodes of two GPUs registered by the simulated HAMi device plugin. Then, as an operator
installing a DRA driver next to us would:

1. a ResourceSlice of NVIDIA's DRA driver (`gpu.nvidia.com`) publishes the GPUs of gpu-node-01: the
   registration worker sees it, /filter refuses that node for our resources, and the real kube-scheduler
   binds a GPU pod on gpu-node-02;
2. a DeviceClass with `extendedResourceName: nvidia.com/gpu`: kube-scheduler would now also serve
   `nvidia.com/gpu` from ResourceSlices. kubectl's create of a GPU pod prints the webhook's warning (the
   real API server relays AdmissionReview warnings), and the pod stays Pending with our reason in its
   PodScheduled condition (FailedAndUnresolvableNodes from /filter); `inspect` on the live cluster names
   the DeviceClass and the node; the worker's gauges are set.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from test_dra_side_by_side import CLASS, device_class, resource_slice

from app.state.drafacts import MAX_AGE
from sim.cluster.harness import create_pod, running_cluster
from sim.cluster.spec import ClusterSpec
from sim.controlplane.real import free_port
from sim.emulator.testing import wait_for
from sim.kit.kube import pod_path

pytestmark = [pytest.mark.integration, pytest.mark.real]
REPO = Path(__file__).resolve().parents[2]
RESOURCE = "/apis/resource.k8s.io/v1"
DRA_NODE, PLAIN_NODE = "gpu-node-01", "gpu-node-02"
UNMUTATED = "kube-system"  # the chart's webhook never intercepts it: a pod keeps exactly what it asks
PASS = 2.0  # the harness's HAMI_REGISTRATION_INTERVAL: the worker checks DRA after every pass
READ_AGE = MAX_AGE + 0.5  # the worker's gauge is set after the ledger row; Gunicorn re-reads it this soon


def gpu_pod(name: str, limits: dict[str, str] | None = None) -> dict[str, Any]:
    limits = limits or {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "cuda", "resources": {"limits": limits}}]},
    }


def inspect_json(kubeconfig: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "inspect", "--kubeconfig", str(kubeconfig), "-o", "json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and not done.stderr, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_dra_devices_and_extended_resource_names_are_refused(real_binaries: object, tmp_path: Path) -> None:
    metrics = f"http://127.0.0.1:{free_port()}/metrics?hami_gauges=0"
    options = ClusterSpec(
        control_plane="real",
        nodes=2,
        gpus_per_node=2,
        zones=1,
        service_env={"HAMI_WORKER_METRICS_BIND": metrics.split("/")[2]},
    )
    with running_cluster(tmp_path / "cluster", options) as stack:
        kube = stack.kube
        assert kube is not None

        def gauges() -> str:
            with urllib.request.urlopen(metrics, timeout=5) as reply:
                return str(reply.read().decode())

        wait_for(lambda: "hami_worker_dra_available 1.0" in gauges(), 30, "the worker's DRA check")

        # 1. gpu-node-01's GPUs published as DRA devices: that node is refused, the pods bind on the other
        kube.create(f"{RESOURCE}/resourceslices", resource_slice(DRA_NODE))
        wait_for(lambda: "hami_worker_dra_overlapping_nodes 1.0" in gauges(), 30, "the overlap seen")
        time.sleep(READ_AGE)
        for i in range(2):
            assert create_pod(stack, gpu_pod(f"placed-{i}")) == ""

        def bound(name: str) -> str:
            return str(kube.get(f"{pod_path('default')}/{name}")["spec"].get("nodeName") or "")

        for i in range(2):
            assert wait_for(lambda n=f"placed-{i}": bound(n), 60, f"placed-{i} bound") == PLAIN_NODE

        # 2. a DeviceClass serving nvidia.com/gpu: the webhook warns, /filter refuses the pod on every node
        kube.create(f"{RESOURCE}/deviceclasses", device_class())
        if "extendedResourceName" not in kube.get(f"{RESOURCE}/deviceclasses/{CLASS}")["spec"]:
            # 1.34: DRAExtendedResource is alpha and off, the API server drops the field and kube-scheduler
            # serves no extended resource by DRA: nothing collides, our pods are placed as before
            time.sleep(2 * PASS + READ_AGE)
            assert "hami_worker_dra_collisions{" not in gauges()
            assert create_pod(stack, gpu_pod("placed-2")) == ""
            assert wait_for(lambda: bound("placed-2"), 60, "placed-2 bound") == PLAIN_NODE
            return
        collided = 'hami_worker_dra_collisions{resource="nvidia.com/gpu",vendor="NVIDIA"} 1.0'
        wait_for(lambda: collided in gauges(), 30, "the collision seen")
        time.sleep(READ_AGE)
        assert stack.control_plane is not None
        warning = create_warning(stack.control_plane.kubectl(), stack.kubeconfig, "refused")
        assert f"hami-scheduler: nvidia.com/gpu (DeviceClass {CLASS}) is also served by DRA" in warning

        def condition(name: str, namespace: str = "default") -> str:
            pod = kube.get(f"{pod_path(namespace)}/{name}")
            assert not pod["spec"].get("nodeName"), f"{name} bound although DRA serves nvidia.com/gpu"
            conditions = pod.get("status", {}).get("conditions") or []
            return next((c.get("message") or "" for c in conditions if c.get("type") == "PodScheduled"), "")

        # kube-scheduler's own DRA plugin refuses this one before any extender: once a DeviceClass maps one
        # of the pod's extended resources it checks every other one (gpumem) against node allocatable
        message = scheduled_condition(lambda: condition("refused"), "cannot fit")
        assert "0/2 nodes are available: 2 cannot fit resource" in message

        # a pod asking nvidia.com/gpu alone (the webhook would add gpucores) reaches /filter, which refuses it
        direct = gpu_pod("refused-direct", {"nvidia.com/gpu": "1"})
        direct["metadata"]["namespace"] = UNMUTATED
        direct["spec"]["schedulerName"] = "hami-scheduler"
        kube.create(pod_path(UNMUTATED), direct)
        message = scheduled_condition(lambda: condition("refused-direct", UNMUTATED), "served by DRA")
        assert (
            f"0/2 nodes are available: 2 hami-scheduler: nvidia.com/gpu is served by DRA DeviceClass {CLASS}"
            in message
        )
        assert "Preemption is not helpful" in message  # unresolvable: no victim is looked for

        shown = inspect_json(stack.kubeconfig)["dra"]
        assert shown["available"] is True
        assert shown["collisions"] == [{"resource": "nvidia.com/gpu", "vendor": "NVIDIA", "classes": [CLASS]}]
        assert shown["overlaps"] == [{"node": DRA_NODE, "drivers": ["gpu.nvidia.com"], "devices": 2}]


def scheduled_condition(read: Any, needle: str, timeout: float = 30) -> str:
    """The pod's PodScheduled message once it contains `needle`; on timeout the failure shows the last."""
    deadline, message = time.monotonic() + timeout, ""
    while time.monotonic() < deadline:
        message = read()
        if needle in message:
            return str(message)
        time.sleep(0.2)
    raise AssertionError(f"no PodScheduled message with {needle!r} after {timeout}s; last: {message!r}")


def create_warning(kubectl: Path, kubeconfig: Path, name: str) -> str:
    """kubectl create of a GPU pod; its stderr, where kubectl prints the API server's warnings."""
    done = subprocess.run(
        [str(kubectl), "--kubeconfig", str(kubeconfig), "create", "-f", "-"],
        input=json.dumps(gpu_pod(name)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr
