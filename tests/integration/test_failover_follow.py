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

import time
import uuid
from typing import Any

import pytest
from failover_checks import NODES, assert_ledger_matches_api, assert_refuses, place, ready, report

from app.core.model import DeviceUse
from app.state.ledger import BOUND, Entry

pytestmark = pytest.mark.integration

LEASE_NAME = "kube-scheduler"  # the `scheduler_lease` fixture's
LEASE_SECONDS = 4
RETRY_SECONDS = 1
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


def start_replica(start_service: Any, identity: str) -> Any:
    return start_service(env={**ELECTION, "POD_NAME": identity}, registrar="worker", wait_ready=False)


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
    assert_refuses(a, cluster, "early", expired, request, POD_MEMORY, f" ({expired})")

    # -- kube-scheduler renews: sched-a leads and, synced, is the only Ready replica ----------------------
    lease.hold(holder_a)
    wait_for(lambda: ready(a), 30.0, "sched-a to be Ready")
    for _ in range(10):
        assert (ready(a), ready(b)) == (True, False)
        time.sleep(0.2)
    follower = f"this replica is not the leader (leader: {holder_a})"
    assert b.get("/readyz").body.decode() == f"not ready: {follower}"
    assert_refuses(b, cluster, "probe", follower, request, POD_MEMORY, f" ({follower})")
    place(a, cluster, "placed-by-a", POD_MEMORY)

    # -- renewals stop: unready within one retry period after renewTime + leaseDurationSeconds ------------
    renewed = lease.stop()
    expires = renewed + LEASE_SECONDS
    wait_for(lambda: not ready(a), expires - time.time() + RETRY_SECONDS + 3.0, "sched-a to turn unready")
    unready_at = time.time()
    report(request, "lease expiry -> leader unready", unready_at - expires)
    assert expires - 0.001 <= unready_at <= expires + RETRY_SECONDS  # renewTime has microseconds
    assert a.get("/readyz").body.decode() == f"not ready: {expired}"
    assert_refuses(a, cluster, "after-expiry", expired, request, POD_MEMORY, f" ({expired})")
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
    place(b, cluster, "placed-by-b", POD_MEMORY)
    assert_ledger_matches_api(b, cluster)

    # -- the holder moves straight back while sched-b's Lease is valid: sched-b steps down at once ---------
    moved_at = time.monotonic()
    lease.hold(holder_a)
    wait_for(lambda: not ready(b), RETRY_SECONDS + 2.0, "sched-b to step down")
    report(request, "holder moved away -> old leader unready", time.monotonic() - moved_at)
    wait_for(lambda: ready(a), 30.0, "sched-a to be Ready again")
    assert not ready(b)
    assert_ledger_matches_api(a, cluster)
    place(a, cluster, "placed-by-a-again", POD_MEMORY)
