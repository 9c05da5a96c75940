"""Leader election with the client's ``kubernetes.leaderelection`` on a Lease: one leader, then takeover."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from sim.emulator.testing import EmulatorHandle, wait_for


class _Stopped(Exception):
    """Raised inside a candidate whose process we pretend has died."""


class _StoppableLock(LeaseLock):  # type: ignore[misc]
    """A LeaseLock on our ApiClient that can be made to stop (like a process that froze or died)."""

    def __init__(self, identity: str, api: client.ApiClient) -> None:
        super().__init__("hami-scheduler", "kube-system", identity)
        self.api_instance = client.CoordinationV1Api(api)
        self.stopped = threading.Event()

    def get(self, name: str, namespace: str) -> Any:
        if self.stopped.is_set():
            raise _Stopped
        return super().get(name, namespace)


def _candidate(lock: _StoppableLock, leaders: list[str]) -> threading.Thread:
    """A thread running one candidate with short durations (lease 2 s, retry 1 s: the client's minimum)."""
    config = electionconfig.Config(
        lock=lock,
        lease_duration=2,
        renew_deadline=1.5,
        retry_period=1,
        onstarted_leading=lambda: leaders.append(lock.identity),
        onstopped_leading=lambda: None,
    )
    election = leaderelection.LeaderElection(config)

    def run() -> None:
        with contextlib.suppress(_Stopped):
            election.run()

    return threading.Thread(target=run, daemon=True)


def test_two_candidates_one_leader_then_takeover(sim: EmulatorHandle) -> None:
    leaders: list[str] = []
    with sim.api_client() as api_a, sim.api_client() as api_b:
        locks = {"a": _StoppableLock("a", api_a), "b": _StoppableLock("b", api_b)}
        threads = [_candidate(lock, leaders) for lock in locks.values()]
        try:
            for thread in threads:
                thread.start()
            first = wait_for(lambda: leaders[:1], 5, "a first leader")[0]
            leases = client.CoordinationV1Api(api_a)
            held = leases.read_namespaced_lease("hami-scheduler", "kube-system")
            assert held.spec.holder_identity == first
            wait_for(
                lambda: (
                    leases.read_namespaced_lease("hami-scheduler", "kube-system").metadata.resource_version
                    != held.metadata.resource_version
                ),
                4,
                "the leader to renew",
            )
            assert leaders == [first], "the follower does not lead while the lease is renewed"

            locks[first].stopped.set()
            second = wait_for(lambda: leaders[1:], 8, "the follower to take over")[0]
            assert second != first
            assert (
                leases.read_namespaced_lease("hami-scheduler", "kube-system").spec.holder_identity == second
            )
        finally:
            for lock in locks.values():
                lock.stopped.set()
            for thread in threads:
                thread.join(timeout=10)
    assert not any(t.is_alive() for t in threads)
    renewals = [
        r for r in sim.requests() if r["resource"] == "leases.coordination.k8s.io" and r["verb"] == "update"
    ]
    assert renewals and all(r["status"] in (200, 409) for r in renewals)


def test_lease_replace_with_the_read_object_is_optimistic(sim: EmulatorHandle) -> None:
    with sim.api_client() as api:
        leases = client.CoordinationV1Api(api)
        body = client.V1Lease(
            metadata=client.V1ObjectMeta(name="l"), spec=client.V1LeaseSpec(holder_identity="a")
        )
        leases.create_namespaced_lease("kube-system", body)
        read_by_a = leases.read_namespaced_lease("l", "kube-system")
        read_by_b = leases.read_namespaced_lease("l", "kube-system")
        read_by_a.spec.holder_identity = "a2"
        leases.replace_namespaced_lease("l", "kube-system", read_by_a)
        read_by_b.spec.holder_identity = "b"
        with pytest.raises(ApiException) as caught:
            leases.replace_namespaced_lease("l", "kube-system", read_by_b)
        assert caught.value.status == 409
