"""A leader whose registration worker dies while its Gunicorn keeps serving (issue 5; invariant 5).

One replica — `python -m workers` next to Gunicorn (2 workers), real HTTP, the API emulator — leads and
decides; then only its worker is SIGKILLed, as its container crashing would. Gunicorn must stop deciding,
with a clear reason, before anything it reads can be stale, and never answer a decision meanwhile:

- without election (the default: a single replica): nothing but the worker's heartbeat says it is gone;
  the replica is unready once the heartbeat is older than HEARTBEAT_MAX_AGE (`the registration worker is
  not running`);
- in follow mode, with kube-scheduler still renewing its Lease: the Lease validity the dead worker last
  wrote runs out first, so the replica is unready within the lease duration of the kill (`no leader: the
  Lease ... expired, as last seen ...`), and the heartbeat reason follows.

/filter and /bind then answer that reason as a retryable Error in < 1 s and change nothing; restarting
the worker (same identity and state dir) brings it back Ready, with a ledger equal to a rebuild from the
API, deciding again.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from failover_checks import NODES, assert_ledger_matches_api, assert_refuses, place, ready, report

from app.state.status import HEARTBEAT_MAX_AGE

pytestmark = pytest.mark.integration

LEASE_SECONDS = 4  # the `scheduler_lease` fixture's
POD_MEMORY = 8192
FOLLOW = {
    "HAMI_LEADER_ELECT": "true",
    "HAMI_LEADER_ELECT_MODE": "follow",
    "HAMI_LEADER_ELECT_RESOURCE_NAME": "kube-scheduler",
    "HAMI_LEADER_ELECT_RESOURCE_NAMESPACE": "default",
    "HAMI_LEASE_DURATION": f"{LEASE_SECONDS}s",
    "HAMI_RENEW_DEADLINE": "3s",
    "HAMI_RETRY_PERIOD": "1s",
}
HEARTBEAT_GONE = "the registration worker is not running"


@pytest.mark.parametrize("election", ["none", "follow"])
def test_a_leader_whose_worker_dies_turns_unready_and_recovers_on_restart(
    election: str,
    start_service: Any,
    emulator: Any,
    cluster: Any,
    scheduler_lease: Any,
    wait_for: Any,
    request: pytest.FixtureRequest,
) -> None:
    emulator.reset()
    cluster.add_nodes(*(cluster.gpu_node(n, gpus=2) for n in NODES))
    env = {"POD_NAME": "sched-c"}
    if election == "follow":
        holder = f"sched-c_{uuid.uuid4()}"
        scheduler_lease.hold(holder)  # kube-scheduler keeps running in the pod throughout
        env.update(FOLLOW)
        first_reason = (
            f"no leader: the Lease held by {holder} expired, as last seen by the registration worker"
        )
        bound = LEASE_SECONDS + 3.0
    else:
        env["HAMI_LEADER_ELECT"] = "false"
        first_reason, bound = HEARTBEAT_GONE, HEARTBEAT_MAX_AGE + 3.0
    replica = start_service(env=env, registrar="worker")
    try:
        place(replica, cluster, "before", POD_MEMORY)

        killed_at = time.monotonic()
        replica.kill(worker_only=True)
        assert replica.process.alive()
        wait_for(lambda: not ready(replica), bound, "the replica to turn unready")
        report(request, "worker SIGKILL -> unready", time.monotonic() - killed_at)
        assert replica.get("/readyz").body.decode() == f"not ready: {first_reason}"
        assert_refuses(replica, cluster, "while-down", first_reason, request, POD_MEMORY)
        if election == "none":
            assert time.monotonic() - killed_at >= HEARTBEAT_MAX_AGE - 2.0  # the heartbeat, nothing earlier

        restarted_at = time.monotonic()
        replica.start_worker()
        wait_for(lambda: ready(replica), 30.0, "the replica to be Ready again")
        report(request, "worker restart -> Ready", time.monotonic() - restarted_at)
        # the restarted worker reports the generation readers serve, though it had nothing new to publish
        assert replica.status().generation == replica.debug_state()["generation"] > 0
        assert_ledger_matches_api(replica, cluster)
        place(replica, cluster, "after", POD_MEMORY)
        assert_ledger_matches_api(replica, cluster)
    finally:
        replica.close()
