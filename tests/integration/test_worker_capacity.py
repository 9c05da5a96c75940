"""`python -m workers` against the API emulator, both real processes: the `hami.io/device-capacity` node
annotation (HAMI_PUBLISH_CAPACITY, workers/capacity.py).

On: every registered GPU node gets its totals and free figures (free from the ledger: a pod bound to the
node lowers it), the value follows a newly bound pod, and nothing is written again while nothing changes
(counted in the emulator's request log). Off: no node gets one, and one left by an earlier run is removed.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_worker_registration import WorkerProcess, bound_pod, gpu_node, start_worker

pytestmark = pytest.mark.integration

KEY = "hami.io/device-capacity"
NODES = ["cap-0", "cap-1"]
INTERVAL = "1s"


def capacity(emulator: Any, node: str) -> dict[str, Any] | None:
    value = (emulator.get("nodes", node)["metadata"].get("annotations") or {}).get(KEY)
    return json.loads(value) if value is not None else None


def nvidia(document: dict[str, Any] | None) -> dict[str, int] | None:
    return document["vendors"]["NVIDIA"] if document is not None else None


def figures(free_memory: int, free_cores: int) -> dict[str, int]:
    """Two GPUs of 32768 MiB, 100 cores and 10 slots each (test_worker_registration.gpu_node)."""
    return {
        "devices": 2,
        "devicesFree": 2,
        "memory": 65536,
        "memoryFree": free_memory,
        "cores": 200,
        "coresFree": free_cores,
    }


def node_patches(emulator: Any) -> list[dict[str, Any]]:
    return [r for r in emulator.requests() if r["resource"] == "nodes" and r["verb"] == "patch"]


@pytest.fixture
def start(
    emulator: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[[bool], WorkerProcess]]:
    """Starts one worker (no election: the leader) with the capacity value on or off; stops it after."""
    started: list[WorkerProcess] = []

    def run(publish: bool) -> WorkerProcess:
        env = {"HAMI_REGISTRATION_INTERVAL": INTERVAL, "HAMI_PUBLISH_CAPACITY": str(publish).lower()}
        worker = start_worker(tmp_path / str(len(started)), emulator.kubeconfig, env)
        started.append(worker)
        return worker

    try:
        yield run
    finally:
        for worker in started:
            worker.process.stop()
            if getattr(request.node, "_integration_failed", False):
                sys.stderr.write(f"\n--- worker log tail ---\n{worker.process.log_tail(60)}\n")


def test_published_updated_on_a_bind_and_not_rewritten(
    emulator: Any, start: Callable[[bool], WorkerProcess], wait_for: Callable[..., Any]
) -> None:
    emulator.reset()
    # the bound pod takes 1000 MiB and 10 cores of GPU-cap-0-0; the CPU node is not ours to annotate
    emulator.seed(
        [gpu_node(n) for n in NODES]
        + [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cpu"}}, bound_pod("first", "cap-0")]
    )
    worker = start(True)
    wait_for(lambda: nvidia(capacity(emulator, "cap-1")) == figures(65536, 200), 30.0, "cap-1's annotation")
    wait_for(lambda: nvidia(capacity(emulator, "cap-0")) == figures(64536, 190), 10.0, "cap-0's annotation")
    assert capacity(emulator, "cap-0")["version"] == 1  # type: ignore[index]
    assert capacity(emulator, "cpu") is None

    emulator.seed([bound_pod("second", "cap-1")])
    wait_for(lambda: nvidia(capacity(emulator, "cap-1")) == figures(64536, 190), 10.0, "the bind counted")
    assert nvidia(capacity(emulator, "cap-0")) == figures(64536, 190)

    emulator.clear_requests()
    time.sleep(4.5)  # four capacity steps at a 1 s interval, nothing changed
    assert node_patches(emulator) == [], "an unchanged value was written again"
    assert worker.metric("hami_worker_capacity_patches_total", result="ok") == 3  # cap-0, cap-1, cap-1
    assert worker.metric("hami_worker_capacity_patches_total", result="error") == 0


def test_off_publishes_nothing_and_removes_a_stale_annotation(
    emulator: Any, start: Callable[[bool], WorkerProcess], wait_for: Callable[..., Any]
) -> None:
    emulator.reset()
    stale = gpu_node("cap-0")
    stale["metadata"]["annotations"][KEY] = '{"version":1,"vendors":{}}'
    emulator.seed([stale, gpu_node("cap-1"), bound_pod("first", "cap-0")])
    worker = start(False)
    wait_for(lambda: capacity(emulator, "cap-0") is None, 30.0, "the stale annotation to be removed")
    wait_for(lambda: worker.rows() != {}, 10.0, "the ledger to be rebuilt")
    emulator.clear_requests()
    time.sleep(3.5)  # three steps
    assert capacity(emulator, "cap-1") is None
    assert node_patches(emulator) == []
    assert worker.metric("hami_worker_capacity_patches_total", result="ok") == 1
