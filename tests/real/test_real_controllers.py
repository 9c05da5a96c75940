"""What the real control plane's kube-controller-manager and the simulated kubelets' graceful deletion give
the harness (sim.controlplane.controllermanager, sim.nodes.kubelet), on whichever version the session runs
(HAMI_KUBE_VERSION; docs/real-control-plane.md "Which suites run on which version"):

- a PodDisruptionBudget's status is computed for pods on the simulated nodes (expectedPods, currentHealthy,
  desiredHealthy, disruptionsAllowed) and the eviction API honours it: one eviction allowed, the next
  refused with kube-apiserver's budget message;
- deleting a namespace finishes (its running pod terminated by its kubelet, its objects gone);
- the garbage collector deletes a dependent with its owner; a ResourceQuota gets its status, so pods can be
  created in its namespace;
- a pod with terminationGracePeriodSeconds: 3 stays Running, with its deletionTimestamp and HAMi's
  allocation, for about 3 s x the harness's grace scale, then is gone;
- the control plane's kubectl is its own version's.
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import pytest

from sim.cluster.harness import create_pod
from sim.cluster.spec import ClusterSpec
from sim.cluster.stack import Stack
from sim.emulator.testing import wait_for
from sim.kit import podutil
from sim.kit.kube import Kube, KubeError, pod_path

pytestmark = [pytest.mark.integration, pytest.mark.real, pytest.mark.versions("1.34", "1.37", "1.38")]
GRACE_SCALE = ClusterSpec().grace_scale  # small_cluster's (tests/real/conftest.py)
BUDGETS = "/apis/policy/v1/namespaces/{}/poddisruptionbudgets"


@pytest.fixture(scope="module")
def stack(small_cluster: Stack) -> Stack:
    return small_cluster


def kube_of(stack: Stack) -> Kube:
    assert stack.kube is not None
    return stack.kube


def namespace(kube: Kube, name: str) -> str:
    kube.create("/api/v1/namespaces", {"metadata": {"name": name}})
    return name


def plain_pod(kube: Kube, ns: str, name: str, node: str, grace: int = 1) -> None:
    """A pod without devices placed on a simulated node (its kubelet reports it Running and Ready)."""
    body = {
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": grace,
            "containers": [{"name": "main", "image": "nginx"}],
        },
    }
    kube.create(pod_path(ns), body)


def running(kube: Kube, ns: str, name: str) -> bool:
    pod = kube.get_or_none(pod_path(ns, name))
    return pod is not None and podutil.phase(pod) == "Running"


def nodes(kube: Kube) -> list[str]:
    return sorted(n["metadata"]["name"] for n in kube.list("/api/v1/nodes")[1])


def test_a_budget_gets_its_status_and_the_eviction_api_honours_it(stack: Stack) -> None:
    kube = kube_of(stack)
    ns = namespace(kube, "budgets")
    for index in range(3):
        plain_pod(kube, ns, f"web-{index}", nodes(kube)[index % 2])
    wait_for(lambda: all(running(kube, ns, f"web-{i}") for i in range(3)), 60, "the three pods to run")
    budget = {
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
    }
    kube.create(BUDGETS.format(ns), budget)

    def status() -> dict[str, Any]:
        return dict(kube.get(f"{BUDGETS.format(ns)}/web").get("status") or {})

    current = wait_for(
        lambda: (s := status()).get("currentHealthy") == 3 and s.get("observedGeneration") == 1 and s,
        60,
        "the disruption controller to compute the budget's status",
    )
    assert current["expectedPods"] == 3 and current["desiredHealthy"] == 2
    assert current["disruptionsAllowed"] == 1
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-0"}}
    kube.create(f"{pod_path(ns, 'web-0')}/eviction", eviction)
    wait_for(lambda: status().get("disruptionsAllowed") == 0, 60, "the budget to count the eviction")
    second = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-1"}}
    with pytest.raises(KubeError) as refused:
        kube.create(f"{pod_path(ns, 'web-1')}/eviction", second)
    assert refused.value.status == 429 and "disruption budget" in refused.value.message
    wait_for(lambda: kube.get_or_none(pod_path(ns, "web-0")) is None, 60, "the evicted pod to go")
    assert (
        wait_for(lambda: (s := status()).get("currentHealthy") == 2 and s, 60, "two healthy")["expectedPods"]
        == 2
    )


def test_deleting_a_namespace_finishes(stack: Stack) -> None:
    kube = kube_of(stack)
    ns = namespace(kube, "going")
    plain_pod(kube, ns, "runner", nodes(kube)[0], grace=2)
    kube.create(f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "settings"}})
    wait_for(lambda: running(kube, ns, "runner"), 60, "the pod to run")
    kube.delete(f"/api/v1/namespaces/{ns}")
    assert kube.get(f"/api/v1/namespaces/{ns}")["status"]["phase"] == "Terminating"
    wait_for(lambda: kube.get_or_none(f"/api/v1/namespaces/{ns}") is None, 120, "the namespace to go")


def test_owners_take_their_dependents_and_quotas_get_their_status(stack: Stack) -> None:
    kube = kube_of(stack)
    ns = namespace(kube, "owned")
    configmaps = f"/api/v1/namespaces/{ns}/configmaps"
    owner = kube.create(configmaps, {"metadata": {"name": "owner"}})
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    kube.create(configmaps, {"metadata": {"name": "dependent", "ownerReferences": [reference]}})
    kube.delete(f"{configmaps}/owner")
    wait_for(lambda: kube.get_or_none(f"{configmaps}/dependent") is None, 60, "the garbage collector")

    quotas = f"/api/v1/namespaces/{ns}/resourcequotas"
    kube.create(quotas, {"metadata": {"name": "pods"}, "spec": {"hard": {"pods": "2"}}})
    wait_for(lambda: (kube.get(f"{quotas}/pods").get("status") or {}).get("hard"), 60, "the quota's status")
    plain_pod(kube, ns, "counted", nodes(kube)[0])
    wait_for(
        lambda: (kube.get(f"{quotas}/pods").get("status") or {}).get("used", {}).get("pods") == "1",
        60,
        "the quota to count the pod",
    )


def test_a_deleted_pod_runs_for_its_grace_period_then_goes(stack: Stack) -> None:
    kube = kube_of(stack)
    gpu = {
        "metadata": {"name": "graceful", "namespace": "default"},
        "spec": {
            "terminationGracePeriodSeconds": 3,
            "containers": [
                {"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
            ],
        },
    }
    assert create_pod(stack, gpu) == ""
    wait_for(lambda: running(kube, "default", "graceful"), 60, "the GPU pod to run")
    allocation = podutil.annotations_of(kube.get(pod_path("default", "graceful")))[
        "hami.io/vgpu-devices-allocated"
    ]
    started = time.monotonic()
    kube.delete(pod_path("default", "graceful"))
    seen_terminating = False
    while (pod := kube.get_or_none(pod_path("default", "graceful"))) is not None:
        assert podutil.terminating(pod) and podutil.phase(pod) == "Running", pod["status"]
        assert podutil.annotations_of(pod)["hami.io/vgpu-devices-allocated"] == allocation
        assert pod["metadata"]["deletionGracePeriodSeconds"] == 3
        seen_terminating = True
        assert time.monotonic() - started < 60, "the kubelet never finished the deletion"
        time.sleep(0.1)
    took = time.monotonic() - started
    assert seen_terminating
    assert took >= 3 * GRACE_SCALE  # the kubelet counts from when it saw the deletion, after `started`


def test_the_control_planes_kubectl_is_its_own_version(stack: Stack) -> None:
    assert stack.control_plane is not None
    kubectl = stack.control_plane.kubectl()
    done = subprocess.run(
        [str(kubectl), "--kubeconfig", str(stack.kubeconfig), "version", "-o", "json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    versions = json.loads(done.stdout)
    server = stack.control_plane.versions()["kube-apiserver"]
    assert versions["clientVersion"]["gitVersion"] == versions["serverVersion"]["gitVersion"] == server
    assert "WARNING" not in done.stderr  # kubectl warns about a version skew beyond one minor
