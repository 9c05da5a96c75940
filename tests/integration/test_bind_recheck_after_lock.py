"""The bind re-check runs once the node lock is held, against the node's pods as the API shows them
(issue 11, finding 9).

Two replicas that both believe they lead — a deposed leader's last binds overlap the new leader's, since
leader election is no fence — each filter one pod onto the same GPU: each ledger knows only its own pod,
so each decision fits on its own and together they claim 40000 of 32768 MiB. Both binds then wait for
the node lock, which a third pod holds while the device plugin allocates for it. When the re-check ran
before the lock and against the replica's own ledger, both passed it while waiting and both pods were
bound: the GPU was oversubscribed for real. Now the bind that gets the lock second sees the first pod
bound on the node and fails with a clear Error. Real processes: the emulator and two Gunicorn services,
each with its own state directory.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import pytest

from app.core import nodelock

pytestmark = pytest.mark.integration

NODE = "gpu-two-leaders"
GPU = f"GPU-{NODE}-0"
MEMORY, SHARE = 32768, 20000


def test_two_leaders_overlapping_decisions_are_not_both_bound(
    start_service: Any, cluster: Any, emulator: Any, wait_for: Any
) -> None:
    emulator.reset()
    cluster.add_nodes(cluster.gpu_node(NODE, gpus=1, memory=MEMORY))
    env = {"HAMI_BIND_LOCK_WAIT": "25s"}
    old, new = (start_service(registrar="standin", env=env) for _ in range(2))
    for service in (old, new):
        wait_for(lambda service=service: service.debug_state(NODE)["registered"], 15, "registered")

    # The device plugin is allocating for a third pod: it holds the node's lock.
    holder = cluster.gpu_pod("holder", gpus=0)
    holder["spec"]["nodeName"] = NODE
    holder["metadata"]["annotations"] = {"hami.io/bind-phase": "allocating"}
    cluster.create_pod(holder)
    cluster.set_node_lock(NODE, nodelock.format_lock(datetime.now(UTC), "default", "holder"))

    pods = {}
    for service, name in ((old, "by-old-leader"), (new, "by-new-leader")):
        pod = cluster.create_pod(cluster.gpu_pod(name, memory=SHARE))
        assert service.filter(pod, [NODE])["NodeNames"] == [NODE]  # each ledger knows only its own pod
        pods[name] = (service, pod)
    assert sum(u["memory"] for u in cluster.device_usage().values()) == 2 * SHARE

    with ThreadPoolExecutor(2) as pool:
        binds = {name: pool.submit(service.bind, pod, NODE) for name, (service, pod) in pods.items()}
        wait_for(lambda: _lock_reads(emulator) >= 4, 20, "both binds to wait for the node lock")
        time.sleep(0.5)
        assert not any(b.done() for b in binds.values()), "a bind did not wait for the held lock"
        assert cluster.release_lock(NODE, "default", "holder")
        first = wait_for(lambda: next((n for n, b in binds.items() if b.done()), None), 30, "a bind")
        assert binds[first].result() == {"Error": ""}
        assert cluster.allocate(NODE) == ("default", first)  # releases the lock: the other bind goes on
        second = next(n for n in binds if n != first)
        answer = binds[second].result(timeout=40)

    assert "no longer fits on node" in answer["Error"], answer
    assert f"{GPU} would hold {2 * SHARE} of {MEMORY} memory" in answer["Error"]
    assert "nodeName" not in cluster.pod(second)["spec"]
    assert cluster.node_lock(NODE) is None
    bound = [
        p for p in cluster.pods() if p["spec"].get("nodeName") == NODE and p["metadata"]["name"] != "holder"
    ]
    assert [p["metadata"]["name"] for p in bound] == [first]


def _lock_reads(emulator: Any) -> int:
    """GETs of the node so far: each waiting bind reads it on every attempt to take the lock."""
    return sum(1 for r in emulator.requests() if r["verb"] == "get" and r["path"] == f"/api/v1/nodes/{NODE}")
