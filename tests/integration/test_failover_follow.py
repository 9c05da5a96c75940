"""Follow mode with full replicas (issue 5; ARCHITECTURE.md invariant 5).

Each replica is `python -m workers` next to Gunicorn (2 workers) with its own HAMI_STATE_DIR and POD_NAME,
following the Lease the test writes as the co-located kube-scheduler would (holder `<pod>_<uuid>`,
leaseDurationSeconds 4, renewed every second by a thread), against the API emulator over real HTTP.

- A Lease held by `<our identity>_<uuid>` whose renewTime is already older than its duration does not
  make us leader, however recently we saw it (HAMi quirk #42); renewed, it does, and after sync only that
  replica is Ready; the other (holder is another pod) answers /readyz 503 and refuses /filter in < 1 s.
- When the renewals stop, the leader is unready within one retry period of renewTime +
  leaseDurationSeconds (not earlier); moving the holder to the other replica makes that one Ready after a
  rebuild of its ledger from the API (a row only a rebuild removes is gone), and it then decides; moved
  straight back while valid, the holder that lost it steps down within a retry period.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
import urllib3

from app.core.model import DeviceUse
from app.state.ledger import BOUND, Entry
from workers.reconcile import compare, same

pytestmark = pytest.mark.integration

T = TypeVar("T")
LEASE_NAME = "kube-scheduler"  # the `scheduler_lease` fixture's
LEASE_SECONDS = 4
RETRY_SECONDS = 1
NODES = ["gpu-a", "gpu-b"]
POD_MEMORY = 8192
ELECTION = {
    "HAMI_LEADER_ELECT": "true",
    "HAMI_LEADER_ELECT_MODE": "follow",
    "HAMI_LEADER_ELECT_RESOURCE_NAME": LEASE_NAME,
    "HAMI_LEADER_ELECT_RESOURCE_NAMESPACE": "default",
    "HAMI_LEASE_DURATION": f"{LEASE_SECONDS}s",
    "HAMI_RENEW_DEADLINE": "3s",
    "HAMI_RETRY_PERIOD": f"{RETRY_SECONDS}s",
    "HAMI_BIND_LOCK_WAIT": "2s",
}


def holder_of(identity: str) -> str:
    return f"{identity}_{uuid.uuid4()}"


def timed(call: Callable[[], T]) -> tuple[T, float]:
    started = time.perf_counter()
    result = call()
    return result, time.perf_counter() - started


def ready(service: Any) -> bool:
    try:
        return bool(service.get("/readyz").status == 200)
    except urllib3.exceptions.HTTPError:
        return False


def report(request: pytest.FixtureRequest, name: str, seconds: float) -> None:
    request.node.user_properties.append((name, round(seconds, 3)))
    sys.stdout.write(f"\n[measured] {request.node.name}: {name} = {seconds:.3f} s\n")


def start_replica(start_service: Any, identity: str) -> Any:
    return start_service(env={**ELECTION, "POD_NAME": identity}, registrar="worker", wait_ready=False)


def place(service: Any, cluster: Any, name: str) -> str:
    pod = cluster.create_pod(cluster.gpu_pod(name, memory=POD_MEMORY))
    answer = service.filter(pod, NODES)
    assert answer["Error"] == "" and len(answer["NodeNames"] or []) == 1, answer
    node = str(answer["NodeNames"][0])
    assert service.bind(pod, node) == {"Error": ""}
    assert cluster.allocate(node) == ("default", name)
    return node


def assert_refuses(service: Any, cluster: Any, name: str, why: str, request: pytest.FixtureRequest) -> None:
    """/filter and /bind answer `why` as a retryable Error within 1 s and change nothing."""
    pod = cluster.create_pod(cluster.gpu_pod(name, memory=POD_MEMORY))
    answer, filter_seconds = timed(lambda: service.filter(pod, NODES))
    assert answer["Error"] == f"hami-scheduler: {why}; retry later" and not answer["NodeNames"], answer
    bound, bind_seconds = timed(lambda: service.bind(pod, NODES[0]))
    assert bound == {"Error": f"hami-scheduler: {why}; retry later"}
    report(request, f"/filter refusal ({why})", filter_seconds)
    report(request, f"/bind refusal ({why})", bind_seconds)
    assert filter_seconds < 1.0 and bind_seconds < 1.0
    after = cluster.pod(name)
    assert "nodeName" not in after["spec"]
    assert not any(k.startswith("hami.io/") for k in after["metadata"].get("annotations") or {})
    assert service.ledger.get(pod["metadata"]["uid"]) is None
    assert all(cluster.node_lock(n) is None for n in NODES)


def served_usage(service: Any) -> dict[str, dict[str, int]]:
    """GPU UUID -> the usage the replica serves decisions from (/debug/state), for used devices."""
    usage = {}
    for node in NODES:
        for device in service.debug_state(node)["devices"]:
            if any(device["used"].values()):
                usage[device["uuid"]] = device["used"]
    return usage


def assert_ledger_matches_api(service: Any, cluster: Any) -> None:
    """Invariant 3: the ledger equals a rebuild from a fresh pod list, and the usage the replica serves
    equals what the pods' annotations hold."""
    rebuilt = {e.uid: e for e in cluster.rebuild_ledger()}
    live = {e.uid: e for e in service.ledger.all_entries()}
    assert not compare(rebuilt.values(), live.values())
    assert live.keys() == rebuilt.keys() and all(same(rebuilt[u], live[u]) for u in live), (rebuilt, live)
    assert served_usage(service) == cluster.device_usage()


def test_follow_mode_leads_by_the_lease_renew_time_and_hands_over(
    start_service: Any,
    emulator: Any,
    cluster: Any,
    scheduler_lease: Any,
    wait_for: Any,
    request: pytest.FixtureRequest,
) -> None:
    lease = scheduler_lease
    emulator.reset()
    cluster.add_nodes(*(cluster.gpu_node(n, gpus=2) for n in NODES))
    holder_a = holder_of("sched-a")
    stale = time.time() - LEASE_SECONDS - 2
    lease.write(holder_a, stale)  # ours by name, but expired before we ever saw it (quirk #42)
    a, b = start_replica(start_service, "sched-a"), start_replica(start_service, "sched-b")
    for replica in (a, b):
        wait_for(lambda r=replica: r.status().leader_identity == holder_a, 60.0, "the Lease to be seen")
    expired = f"no leader: the Lease held by {holder_a} expired, as last seen by the registration worker"
    assert not a.status().leader and not ready(a)
    assert a.get("/readyz").body.decode() == f"not ready: {expired}"
    assert_refuses(a, cluster, "early", expired, request)

    # -- kube-scheduler renews: sched-a leads and, synced, is the only Ready replica ----------------------
    lease.hold(holder_a)
    wait_for(lambda: ready(a), 30.0, "sched-a to be Ready")
    for _ in range(10):
        assert (ready(a), ready(b)) == (True, False)
        time.sleep(0.2)
    follower = f"this replica is not the leader (leader: {holder_a})"
    assert b.get("/readyz").body.decode() == f"not ready: {follower}"
    assert_refuses(b, cluster, "probe", follower, request)
    place(a, cluster, "placed-by-a")

    # -- renewals stop: unready within one retry period after renewTime + leaseDurationSeconds ------------
    renewed = lease.stop()
    expires = renewed + LEASE_SECONDS
    wait_for(lambda: not ready(a), expires - time.time() + RETRY_SECONDS + 3.0, "sched-a to turn unready")
    unready_at = time.time()
    report(request, "lease expiry -> leader unready", unready_at - expires)
    assert expires - 0.001 <= unready_at <= expires + RETRY_SECONDS  # renewTime has microseconds
    assert a.get("/readyz").body.decode() == f"not ready: {expired}"
    assert_refuses(a, cluster, "after-expiry", expired, request)
    wait_for(lambda: not a.status().leader, RETRY_SECONDS + 2.0, "sched-a's worker to say follower")
    assert not a.status().synced

    # -- the holder moves to sched-b: Ready after a rebuild of its ledger from the API ---------------------
    # A row the API knows nothing about, dated in the future so the sweep leaves it: only a rebuild drops it.
    uses = {f"GPU-{NODES[0]}-0": DeviceUse(1, 1, 1)}
    b.ledger.upsert(
        [Entry("ghost", "default", "ghost", NODES[0], BOUND, uses, updated_at=time.time() + 3600)]
    )
    moved_at = time.monotonic()
    lease.hold(holder_of("sched-b"))
    wait_for(lambda: ready(b), 30.0, "sched-b to be Ready")
    report(request, "holder moved -> sched-b Ready", time.monotonic() - moved_at)
    assert not ready(a)
    assert b.ledger.get("ghost") is None
    assert_ledger_matches_api(b, cluster)
    place(b, cluster, "placed-by-b")
    assert_ledger_matches_api(b, cluster)

    # -- the holder moves straight back while sched-b's Lease is valid: sched-b steps down at once ---------
    moved_at = time.monotonic()
    lease.hold(holder_a)
    wait_for(lambda: not ready(b), RETRY_SECONDS + 2.0, "sched-b to step down")
    report(request, "holder moved away -> old leader unready", time.monotonic() - moved_at)
    wait_for(lambda: ready(a), 30.0, "sched-a to be Ready again")
    assert not ready(b)
    assert_ledger_matches_api(a, cluster)
    place(a, cluster, "placed-by-a-again")
