"""`kubectl drain` of the serving leader's node on the real control plane completes with the chart's budget.

Two replicas as the chart deploys them (worker + Gunicorn + the real kube-scheduler each, the chart's
leader-election settings shortened to 4 s / 3 s / 1 s), run as the pods of the chart's Deployment on two
nodes (`sim.cluster.replicapods`: Ready from /readyz, SIGTERM to every container when the pod is evicted, the
budget's status computed as the disruption controller does — the test control plane runs no
kube-controller-manager). The real kube-apiserver's eviction API enforces the chart's PodDisruptionBudget
and the real `kubectl drain` cordons the leader's node and evicts, retrying refusals every 5 s.

- acquire: the cordoned leader releases its Lease (workers/handover.py); the standby takes it and becomes
  Ready; the old leader is no longer Ready, so the budget lets the eviction through.
- follow: the real kube-scheduler holds the Lease. The cordoned leader reports not ready while it keeps
  deciding, the eviction goes through, and on SIGTERM its kube-scheduler releases the Lease
  (ReleaseOnCancel); the standby's kube-scheduler acquires it and its worker follows.

Before the cordon the eviction of the leader is refused. After the drain the new leader schedules a GPU
pod through its kube-scheduler. The failover time (drain start to the standby Ready) and the drain time
are printed (`-s`) and written to docs/install.md.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from sim.cluster.harness import create_pod, running_cluster
from sim.cluster.realcluster import pod_name, ready_replicas
from sim.cluster.replicapods import PODS, ReplicaPods
from sim.cluster.spec import ClusterSpec
from sim.controlplane.base import RELEASE_NAMESPACE
from sim.emulator.testing import wait_for
from sim.kit import podutil
from sim.kit.kube import KubeError

pytestmark = [pytest.mark.integration, pytest.mark.real, pytest.mark.kubectl]
NODES = ("cp-a", "cp-b")
TIMINGS = {"leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "1s"}
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{RELEASE_NAMESPACE}/leases"


def gpu_pod(name: str) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "2000"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "cuda", "resources": {"limits": limits}}]},
    }


@pytest.mark.parametrize("mode", ["acquire", "follow"])
def test_drain_of_the_leaders_node_completes(mode: str, real_binaries: object, tmp_path: Path) -> None:
    values = {"replicas": 2, "leaderElection": {"mode": mode, **TIMINGS}}
    options = ClusterSpec(
        control_plane="real", nodes=1, gpus_per_node=2, chart_values=values, replica_nodes=NODES
    )
    with running_cluster(tmp_path, options) as stack, ReplicaPods(stack, values, NODES) as pods:
        kube = stack.kube
        assert kube is not None
        (leader,) = wait_for(lambda: ready_replicas(stack), 30, "one Ready replica")
        standby = 1 - leader
        leader_pod, standby_pod = pod_name(leader), pod_name(standby)
        wait_for(lambda: leader_pod in pods.ready_since, 10, "the leader's pod to be Ready")
        wait_for(
            lambda: pods.budget_status().get("currentHealthy") == 1, 10, "the budget to count the leader"
        )
        # The budget protects the serving leader: an eviction without the cordon is refused.
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": leader_pod}}
        with pytest.raises(KubeError) as refused:
            kube.create(f"{PODS}/{leader_pod}/eviction", eviction)
        assert refused.value.status == 429 and "disruption budget" in refused.value.message

        started = time.monotonic()
        drain = subprocess.Popen(
            [
                str(stack.control_plane.kubectl()),  # the kubectl of this Kubernetes version
                "--kubeconfig",
                str(stack.kubeconfig),
                "drain",
                NODES[leader],
                "--force",
                "--ignore-daemonsets",
                "--timeout=90s",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_for(lambda: ready_replicas(stack) == [standby], 40, "the standby to become Ready")
            failover = time.monotonic() - started
            out, err = drain.communicate(timeout=120)
        finally:
            if drain.poll() is None:
                drain.kill()
                drain.wait()
        took = time.monotonic() - started
        assert drain.returncode == 0, err
        assert f"pod/{leader_pod} evicted" in out and leader_pod in pods.stopped
        print(
            f"\n[real {mode}] drain start -> standby Ready {failover:.1f} s, drain completed in {took:.1f} s"
        )
        assert kube.get_or_none(f"{PODS}/{leader_pod}") is None
        lease = "hami-scheduler" if mode == "follow" else "hami-scheduler-extender"
        holder = str(kube.get(f"{LEASES}/{lease}")["spec"].get("holderIdentity") or "")
        assert holder.startswith(standby_pod), holder
        wait_for(lambda: standby_pod in pods.ready_since, 10, "the standby's pod to be Ready")
        # The new leader decides: a GPU pod goes through its kube-scheduler and our extender.
        assert create_pod(stack, gpu_pod("after-drain")) == ""

        def running() -> bool:
            pod = kube.get_or_none("/api/v1/namespaces/default/pods/after-drain")
            return pod is not None and podutil.phase(pod) == "Running"

        wait_for(running, 60, "the pod created after the drain to run")
