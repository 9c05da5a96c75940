"""The leading registration worker releases abandoned node locks (workers/locksweep.py) — real worker
process, real Gunicorn, the emulator.

A lock left by a pod that no longer exists (a bind killed between taking the lock and the device plugin's
Allocate, the pod then deleted) is released within a few sweep intervals although no bind ever comes to
that node again; a lock whose holder is busy binding is left alone; the worker counts what it released.
"""

from __future__ import annotations

import urllib.request
from datetime import UTC, datetime
from typing import Any

import pytest

from app.core.nodelock import format_lock

pytestmark = pytest.mark.integration

ABANDONED, BUSY = "gpu-abandoned", "gpu-busy"


@pytest.fixture(scope="module")
def service(start_service: Any, cluster: Any, emulator: Any, wait_for: Any) -> Any:
    emulator.reset()
    cluster.add_nodes(cluster.gpu_node(ABANDONED, gpus=1), cluster.gpu_node(BUSY, gpus=1))
    svc = start_service(registrar="worker", env={"HAMI_LOCK_SWEEP_INTERVAL": "1s"})
    wait_for(lambda: svc.debug_state()["nodes"] == 2, 15, "both nodes registered")
    return svc


def _counter(service: Any, name: str) -> float:
    bind = service.worker_env["HAMI_WORKER_METRICS_BIND"]
    with urllib.request.urlopen(f"http://{bind}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    lines = [line for line in text.splitlines() if line.startswith(f"{name}_total ")]
    return float(lines[0].split()[1]) if lines else 0.0


def _released(service: Any) -> float:
    return _counter(service, "hami_worker_node_locks_released")


def test_an_abandoned_lock_is_released_and_a_busy_one_kept(service: Any, cluster: Any, wait_for: Any) -> None:
    now = datetime.now(UTC)
    busy = cluster.create_pod(cluster.gpu_pod("busy"))
    cluster.patch_pod_annotations("busy", "default", {"hami.io/vgpu-node": BUSY})  # filtered there, binding
    busy_lock = format_lock(now, "default", busy["metadata"]["name"])
    cluster.set_node_lock(BUSY, busy_lock)
    cluster.set_node_lock(ABANDONED, format_lock(now, "default", "deleted-pod"))

    wait_for(lambda: cluster.node_lock(ABANDONED) is None, 20, "the abandoned lock to be released")
    # the worker counts a release after its PATCH has returned, so the count may trail the API by a moment
    wait_for(lambda: _released(service) >= 1, 10, "the release to be counted")
    assert _released(service) == 1
    sweeps = _counter(service, "hami_worker_lock_sweeps")
    wait_for(lambda: _counter(service, "hami_worker_lock_sweeps") >= sweeps + 3, 20, "three more sweeps")
    assert cluster.node_lock(BUSY) == busy_lock
    assert _released(service) == 1
