"""Leader election on the real control plane, two replicas as the chart deploys them (worker + Gunicorn +
kube-scheduler each, kube-scheduler with the chart's leader-election settings):

- follow: each worker follows the real kube-scheduler's Lease (`hami-scheduler`), whose holder identity is
  `<pod name>_<uuid>`; only the replica whose kube-scheduler leads is Ready and schedules.
- acquire: each worker holds its own Lease (`hami-scheduler-extender`); every kube-scheduler reaches the
  leader through the Service (a loopback stand-in routing to the Ready replica).

Either way: pods are bound through the leader, the leader is SIGKILLed (worker, Gunicorn, kube-scheduler),
the other replica takes over within the lease duration, and pods created after the kill are bound with no
device handed out twice and no node lock left.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sim.cluster.harness import create_pod, running_cluster
from sim.cluster.realcluster import kill_replica, pod_name, ready_replicas
from sim.cluster.spec import ClusterSpec
from sim.cluster.stack import Stack
from sim.kit import podutil
from sim.kit.kube import Kube
from sim.workload.report import summarize

pytestmark = [pytest.mark.integration, pytest.mark.real]
LEASES = "/apis/coordination.k8s.io/v1/namespaces/hami-system/leases"
TIMINGS = {"leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "1s"}


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.2)


def gpu_pod(name: str) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "2000"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"test": "failover"}},
        "spec": {"containers": [{"name": "main", "image": "cuda", "resources": {"limits": limits}}]},
    }


def schedule(stack: Stack, names: list[str]) -> None:
    kube = stack.kube
    assert kube is not None
    for name in names:
        assert create_pod(stack, gpu_pod(name)) == ""

    def all_running() -> bool:
        pods = {podutil.name(p): p for p in kube.list("/api/v1/namespaces/default/pods")[1]}
        return all(n in pods and podutil.phase(pods[n]) == "Running" for n in names)

    wait_for(all_running, 90, f"{names} to be bound and running")


def holder(kube: Kube, lease: str) -> str:
    return str(kube.get(f"{LEASES}/{lease}")["spec"].get("holderIdentity") or "")


@pytest.fixture(params=["follow", "acquire"], scope="module")
def cluster(
    request: pytest.FixtureRequest,
    real_binaries: object,
    tmp_path_factory: pytest.TempPathFactory,
    from_image: str,
) -> Iterator[Stack]:
    """With --from-image, each replica's containers run from that image (killed as a pod's are)."""
    values = {"replicas": 2, "leaderElection": {"mode": request.param, **TIMINGS}}
    options = ClusterSpec(
        control_plane="real", nodes=3, gpus_per_node=4, chart_values=values, from_image=from_image
    )
    workdir: Path = tmp_path_factory.mktemp(f"leader-{request.param}")
    with running_cluster(workdir, options) as stack:
        yield request.param, stack


def test_the_other_replica_takes_over_after_the_leader_is_killed(cluster: tuple[str, Stack]) -> None:
    mode, stack = cluster
    kube = stack.kube
    assert kube is not None
    leader = wait_for(lambda: ready_replicas(stack), 30, "one Ready replica")
    assert len(leader) == 1, "exactly one replica may decide"
    leader_index = leader[0]
    if mode == "follow":  # the worker follows the real kube-scheduler's Lease
        assert holder(kube, "hami-scheduler").startswith(pod_name(leader_index) + "_")
    else:  # the worker's own Lease; kube-scheduler keeps its own
        assert holder(kube, "hami-scheduler-extender") == pod_name(leader_index)
    schedule(stack, ["before-0", "before-1", "before-2"])
    killed_at = time.monotonic()
    kill_replica(stack, leader_index)
    survivor = 1 - leader_index
    wait_for(lambda: ready_replicas(stack) == [survivor], 40, "the other replica to become Ready")
    takeover = time.monotonic() - killed_at
    assert takeover < 30, takeover
    lease = "hami-scheduler" if mode == "follow" else "hami-scheduler-extender"
    assert holder(kube, lease).startswith(pod_name(survivor))
    schedule(stack, ["after-0", "after-1", "after-2"])
    pods = kube.list("/api/v1/namespaces/default/pods", labelSelector="test=failover")[1]
    report = summarize(pods, kube.list("/api/v1/nodes")[1])
    assert report["pods_bound"] == 6
    assert report["oversubscribed_devices"] == 0 and report["misplaced_devices"] == []
    assert report["bind_phases"] == {"success": 6}

    def no_locks() -> bool:
        return summarize(pods, kube.list("/api/v1/nodes")[1])["node_locks_held"] == 0

    wait_for(no_locks, 30, "every node lock to be released")
