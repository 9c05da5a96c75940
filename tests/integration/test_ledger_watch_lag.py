"""A pod watch that falls behind never makes a live reservation vanish (issue 11, finding 1).

The registration worker's sweep used to delete any ledger row whose pod its informer did not know once the
row was 10 s old, in any state, `bound` included. When the pod watch lags (watch backoff grows to 30 s, a
slow relist of a large cluster, a delayed stream) the reservations of pods created meanwhile vanished, and
the next pod got the same GPU. Here the worker's first pod watch is held up 45 s by the emulator (the list
before it is not), so the worker's informer never sees the pod this test then filters, binds and
allocates through the real service: the row must outlive two sweeps, and a second pod asking for the
whole GPU must not get it. Real processes: the emulator, Gunicorn and `python -m workers`.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

pytestmark = pytest.mark.integration

NODE = "gpu-lag"
MEMORY = 32768
WATCH_DELAY = 45.0  # longer than any grace period of the sweep (GONE_GRACE 10 s + a 10 s sweep period)
OBSERVE = 25.0  # two sweeps after the row became older than the grace


def test_a_lagging_pod_watch_does_not_hand_out_a_bound_gpu_twice(
    start_service: Any, cluster: Any, emulator: Any, wait_for: Any
) -> None:
    emulator.reset()
    cluster.add_nodes(cluster.gpu_node(NODE, gpus=1, memory=MEMORY))
    emulator.add_fault(action="delay", delay=WATCH_DELAY, verb="watch", resource="pods", count=1)
    service = start_service(registrar="worker")
    wait_for(lambda: service.debug_state(NODE)["registered"], 30, f"{NODE} registered")

    first = cluster.create_pod(cluster.gpu_pod("first", memory=MEMORY))
    uid = first["metadata"]["uid"]
    assert service.filter(first, [NODE])["NodeNames"] == [NODE]
    assert service.bind(first, NODE) == {"Error": ""}
    assert cluster.allocate(NODE) == ("default", "first")
    bound_at = time.monotonic()
    assert service.ledger.get(uid).state == "bound"

    while time.monotonic() - bound_at < OBSERVE and service.ledger.get(uid) is not None:
        time.sleep(0.2)
    assert emulator.fault_report()["rules"][0]["fired"] == 1, "the worker's pod watch was not held up"
    watches = [r for r in emulator.requests() if r["verb"] == "watch" and r["resource"] == "pods"]
    assert watches == [], "the held-up watch ended early: the informer may have caught up"
    row = service.ledger.get(uid)
    assert row is not None and row.state == "bound", "the bound pod's reservation vanished"

    second = cluster.create_pod(cluster.gpu_pod("second", memory=MEMORY))
    answer = service.filter(second, [NODE])
    assert answer["NodeNames"] in (None, []), answer
    usage = cluster.device_usage()[f"GPU-{NODE}-0"]
    assert usage == {"slots": 1, "memory": MEMORY, "cores": 0}
    service.close()
