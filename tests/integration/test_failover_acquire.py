"""Failover of two full replicas in acquire mode (issue 5; ARCHITECTURE.md invariants 1, 3 and 5).

Each replica is what a pod runs: `python -m workers` next to Gunicorn (2 workers), with its own
HAMI_STATE_DIR (the pod's emptyDir) and identity (POD_NAME), both holding for the same 4 s Lease
(renew deadline 3 s, retry 1 s) against the API emulator; the test drives them over real HTTP and the
emulator through the real kubernetes client.

- Exactly one replica is Ready, over several seconds; the follower refuses /filter and /bind with a
  retryable Error in under 1 s and changes nothing.
- Pods are placed through the leader (filter, bind, the device plugin's Allocate steps), one more is left
  in flight (filtered, not bound). Then the leader's whole replica is SIGKILLed (worker, Gunicorn master
  and workers): the other replica is Ready within lease duration + 3 s of the kill; its ledger equals a
  rebuild from a fresh pod list (the in-flight pod included) and its /debug/state usage equals the pods'
  annotations; filling the cluster to exactly full through it oversubscribes no device.
- SIGTERM of the leader's worker releases the Lease: the other replica holds it before the old Lease would
  have expired. Then with the first replica back as a standby, SIGKILL of only the new leader's worker:
  its Gunicorn, still running, is unready no later than the standby is Ready (never two at once), and
  the standby is Ready within lease duration + 3 s.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from failover_checks import NODES, assert_ledger_matches_api, place, ready, report, timed
from kubernetes import client as kclient

pytestmark = pytest.mark.integration

LEASE_SECONDS = 4
RETRY_SECONDS = 1
GPUS, SLOTS, MEMORY = 2, 10, 32768
POD_MEMORY = MEMORY // 2  # two pods fill a GPU: the cluster holds exactly 8
CAPACITY = len(NODES) * GPUS * (MEMORY // POD_MEMORY)
ELECTION = {
    "HAMI_LEADER_ELECT": "true",
    "HAMI_LEADER_ELECT_MODE": "acquire",
    "HAMI_LEADER_ELECT_RESOURCE_NAMESPACE": "default",
    "HAMI_LEASE_DURATION": f"{LEASE_SECONDS}s",
    "HAMI_RENEW_DEADLINE": "3s",
    "HAMI_RETRY_PERIOD": f"{RETRY_SECONDS}s",
    "HAMI_BIND_LOCK_WAIT": "2s",
}


@pytest.fixture
def replicas(
    start_service: Any, emulator: Any, cluster: Any, wait_for: Any, request: pytest.FixtureRequest
) -> Iterator[tuple[Any, Any]]:
    """Two replicas holding for one Lease (named after the test); (leader, follower) once one is Ready."""
    emulator.reset()
    cluster.add_nodes(*(cluster.gpu_node(n, gpus=GPUS, count=SLOTS, memory=MEMORY) for n in NODES))
    lease = request.node.name.replace("_", "-")[:60].rstrip("-")  # a valid Lease name (RFC 1123)
    env = {**ELECTION, "HAMI_LEADER_ELECT_RESOURCE_NAME": lease}
    both = [
        start_service(env={**env, "POD_NAME": f"hami-scheduler-{x}"}, registrar="worker", wait_ready=False)
        for x in "ab"
    ]
    try:
        leader = wait_for(lambda: next((s for s in both if ready(s)), None), 60.0, "a Ready leader")
        follower = both[1] if leader is both[0] else both[0]
        name = leader.env["POD_NAME"]
        wait_for(lambda: follower.status().leader_identity == name, 15.0, "the follower to see the leader")
        yield leader, follower
    finally:
        for service in both:
            service.terminate()  # in parallel
        for service in both:
            service.close()


def assert_not_oversubscribed(cluster: Any) -> dict[str, dict[str, int]]:
    usage: dict[str, dict[str, int]] = cluster.device_usage()
    for uuid, used in usage.items():
        assert used["slots"] <= SLOTS and used["memory"] <= MEMORY and used["cores"] <= 100, (uuid, used)
    return usage


def test_only_the_leader_decides_and_a_killed_leader_fails_over_without_double_booking(
    replicas: tuple[Any, Any], cluster: Any, wait_for: Any, request: pytest.FixtureRequest
) -> None:
    leader, follower = replicas

    # -- exactly one replica is Ready, and stays the only one --------------------------------------------
    for _ in range(15):
        assert (ready(leader), ready(follower)) == (True, False)
        time.sleep(0.2)
    body = follower.get("/readyz").body.decode()
    assert body == f"not ready: this replica is not the leader (leader: {leader.env['POD_NAME']})"

    # -- the follower refuses at once, retryably, and touches nothing ------------------------------------
    probe = cluster.create_pod(cluster.gpu_pod("probe", memory=POD_MEMORY))
    refusal = (
        f"hami-scheduler: this replica is not the leader (leader: {leader.env['POD_NAME']}); retry later"
    )
    answer, filter_seconds = timed(lambda: follower.filter(probe, NODES))
    assert answer["Error"] == refusal and not answer["NodeNames"], answer
    answer, bind_seconds = timed(lambda: follower.bind(probe, NODES[0]))
    assert answer == {"Error": refusal}
    report(request, "follower /filter refusal", filter_seconds)
    report(request, "follower /bind refusal", bind_seconds)
    assert filter_seconds < 1.0 and bind_seconds < 1.0
    untouched = cluster.pod("probe")
    assert "nodeName" not in untouched["spec"] and "hami.io/vgpu-node" not in untouched["metadata"].get(
        "annotations", {}
    )
    assert all(cluster.node_lock(n) is None for n in NODES)
    assert follower.ledger.all_entries() == []

    # -- the leader takes capacity: three pods bound and allocated, one in flight (filtered only) ---------
    for i in range(3):
        place(leader, cluster, f"before-{i}", POD_MEMORY)
    answer = leader.filter(cluster.pod("probe"), NODES)
    assert answer["Error"] == "" and len(answer["NodeNames"]) == 1
    assert_not_oversubscribed(cluster)

    # -- the leader's whole replica dies ------------------------------------------------------------------
    killed_at = time.monotonic()
    pids = leader.kill()
    assert len(pids) >= 3  # the worker, the Gunicorn master and its workers
    wait_for(lambda: ready(follower), LEASE_SECONDS + 3.0, "the other replica to be Ready")
    failover = time.monotonic() - killed_at
    report(request, "kill -> other replica Ready", failover)
    assert failover <= LEASE_SECONDS + 3.0
    new_leader = follower
    status = new_leader.status()
    assert (status.leader, status.synced, status.leader_identity) == (True, True, new_leader.env["POD_NAME"])

    # -- its ledger is the API's truth, the in-flight pod included -----------------------------------------
    assert_ledger_matches_api(new_leader, cluster)
    assert new_leader.ledger.get(cluster.pod("probe")["metadata"]["uid"]).state == "confirmed"

    # -- kube-scheduler's bind of the pod the old leader filtered lands on the new leader -------------------
    probe_node = cluster.pod_annotations("probe")["hami.io/vgpu-node"]
    assert new_leader.bind(cluster.pod("probe"), probe_node) == {"Error": ""}
    assert cluster.allocate(probe_node) == ("default", "probe")
    assert new_leader.ledger.get(cluster.pod("probe")["metadata"]["uid"]).state == "bound"

    # -- fill the cluster to exactly full through the new leader: nothing double-booked --------------------
    placed = 4  # three bound before the kill, one filtered before and bound after it
    while True:
        pod = cluster.create_pod(cluster.gpu_pod(f"after-{placed}", memory=POD_MEMORY))
        answer = new_leader.filter(pod, NODES)
        assert answer["Error"] == "", answer
        if not answer["NodeNames"]:
            break
        node = answer["NodeNames"][0]
        assert new_leader.bind(pod, node) == {"Error": ""}
        assert cluster.allocate(node) == ("default", f"after-{placed}")
        placed += 1
        assert placed <= CAPACITY, "placed more pods than the cluster holds"
    assert placed == CAPACITY
    assert set(answer["FailedNodes"]) == set(NODES)
    usage = assert_not_oversubscribed(cluster)
    assert len(usage) == len(NODES) * GPUS and all(u["memory"] == MEMORY for u in usage.values())
    assert_ledger_matches_api(new_leader, cluster)


def lease_times(coordination: Any, name: str) -> tuple[str, float, float]:
    """(holder, acquireTime, renewTime) of the Lease, times as unix seconds."""
    spec = coordination.read_namespaced_lease(name, "default").spec
    return (
        spec.holder_identity or "",
        spec.acquire_time.timestamp() if spec.acquire_time else 0.0,
        spec.renew_time.timestamp() if spec.renew_time else 0.0,
    )


def test_a_stopped_leader_releases_the_lease_and_a_crashed_worker_hands_over_without_overlap(
    replicas: tuple[Any, Any], kube: Any, wait_for: Any, request: pytest.FixtureRequest
) -> None:
    first, second = replicas
    coordination = kclient.CoordinationV1Api(kube.api_client)
    name = first.env["HAMI_LEADER_ELECT_RESOURCE_NAME"]
    holder, _, renewed = lease_times(coordination, name)
    assert holder == first.env["POD_NAME"]
    expires = renewed + LEASE_SECONDS  # the Lease runs at least this long unless released

    # -- SIGTERM: the worker says follower, releases the Lease, and the other replica takes it at once -----
    stopped_at = time.monotonic()
    assert first.worker is not None
    os.kill(first.worker.pid, signal.SIGTERM)
    wait_for(lambda: not first.worker.alive(), 15.0, "the stopped worker to exit")
    assert first.worker.child.returncode == 0
    status = first.status()
    assert (status.leader, status.synced) == (False, False)
    assert not ready(first)
    wait_for(
        lambda: lease_times(coordination, name)[0] == second.env["POD_NAME"],
        LEASE_SECONDS + 3.0,
        "the takeover",
    )
    took_over = time.monotonic() - stopped_at
    wait_for(lambda: ready(second), 15.0, "the other replica to be Ready")
    report(request, "SIGTERM -> Lease held by the other replica", took_over)
    report(request, "SIGTERM -> other replica Ready", time.monotonic() - stopped_at)
    _, acquired, renewed = lease_times(coordination, name)
    assert acquired < expires, f"acquired at {acquired:.3f}, but the old Lease ran until {expires:.3f}"
    assert took_over < LEASE_SECONDS

    # -- the first replica's worker comes back as a standby; then only the leader's worker crashes: its
    #    Gunicorn keeps running but stops deciding before the standby can lead -----------------------------
    first.start_worker()
    wait_for(lambda: first.status().leader_identity == second.env["POD_NAME"], 30.0, "the standby to run")
    killed_at = time.monotonic()
    second.kill(worker_only=True)
    assert second.process.alive()
    unready_at = ready_at = 0.0
    while not ready_at:
        both = ready(first), ready(second)
        assert both != (True, True), "two replicas Ready at once"
        now = time.monotonic()
        unready_at = unready_at or (now if not both[1] else 0.0)
        ready_at = now if both[0] else 0.0
        assert now - killed_at < LEASE_SECONDS + 3.0, "the standby did not take over in time"
        time.sleep(0.05)
    report(request, "worker SIGKILL -> its Gunicorn unready", unready_at - killed_at)
    report(request, "worker SIGKILL -> standby Ready", ready_at - killed_at)
    assert 0 < unready_at <= ready_at
    assert second.get("/readyz").body.decode().startswith("not ready: no leader: the Lease held by")
