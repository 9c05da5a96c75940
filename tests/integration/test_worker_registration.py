"""`python -m workers` against the API emulator, both real processes: registration and reconciliation.

One worker without leader election for the module, with a 60 s registration interval, so every change
below can only have been picked up through the watch (HAMi waits for its 15 s tick, quirk #22). Its node
and pod watches are set up to be dropped once and then refused with 410 Expired at their first resume, so
everything after that also proves the recovery.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.k8s.client import Kube, connect
from app.state import snapshot
from app.state.ledger import Ledger
from app.state.snapshot import Snapshot, SnapshotError
from app.state.status import ReplicaStatus
from sim.kit.processes import ChildProcess, start_process

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
REGISTER = "hami.io/node-nvidia-register"
HANDSHAKE = "hami.io/node-handshake"
MERGE = "application/merge-patch+json"
GPU_NODES = [f"gpu-{i}" for i in range(5)]


@dataclass
class WorkerProcess:
    process: ChildProcess
    state_dir: Path
    metrics_port: int

    def status(self) -> ReplicaStatus:
        ledger = Ledger(self.state_dir)
        try:
            return ReplicaStatus.from_rows(ledger.status())
        finally:
            ledger.close()

    def rows(self) -> dict[str, str]:
        ledger = Ledger(self.state_dir)
        try:
            return {e.uid: e.state for e in ledger.all_entries()}
        finally:
            ledger.close()

    def snapshot(self) -> Snapshot | None:
        try:
            return snapshot.read(self.state_dir)
        except SnapshotError:
            return None

    def metric(self, name: str, **labels: str) -> float:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as response:
            text = response.read().decode()
        wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        prefix = f"{name}{{{wanted}}} " if labels else f"{name} "
        return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefix))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_worker(workdir: Path, kubeconfig: Path, env: dict[str, str]) -> WorkerProcess:
    port = free_port()
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("HAMI_") and k not in ("POD_NAME", "POD_NAMESPACE", "KUBECONFIG")
    }
    full = {
        **base,
        "KUBECONFIG": str(kubeconfig),
        "HAMI_STATE_DIR": str(workdir / "state"),
        "HAMI_WORKER_METRICS_BIND": f"127.0.0.1:{port}",
        **env,
    }
    process = start_process(
        [sys.executable, "-m", "workers"], log_path=workdir / "worker.log", env=full, cwd=REPO
    )
    return WorkerProcess(process, workdir / "state", port)


def gpu_node(name: str, gpus: int = 2, *, register: str | None = None) -> dict[str, Any]:
    card = {
        "count": 10,
        "devmem": 32768,
        "devcore": 100,
        "type": "NVIDIA-T4",
        "mode": "hami-core",
        "health": True,
    }
    devices = [{"id": f"GPU-{name}-{i}", "index": i, **card} for i in range(gpus)]
    value = register if register is not None else json.dumps(devices)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": {REGISTER: value}},
        "status": {"allocatable": {"nvidia.com/gpu": str(gpus * 10)}},
    }


def bound_pod(name: str, node: str, *, scheduler: str = "hami-scheduler") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {
                "hami.io/vgpu-node": node,
                "hami.io/vgpu-time": "1700000000",
                "hami.io/vgpu-devices-allocated": f"GPU-{node}-0,NVIDIA,1000,10:;",
            },
        },
        "spec": {
            "schedulerName": scheduler,
            "nodeName": node,
            "containers": [{"name": "c", "image": "cuda"}],
        },
        "status": {"phase": "Running"},
    }


@pytest.fixture(scope="module")
def client(emulator: Any) -> Iterator[Kube]:
    kube = connect(str(emulator.kubeconfig))
    try:
        yield kube
    finally:
        kube.close()


@pytest.fixture(scope="module")
def worker(
    emulator: Any,
    tmp_path_factory: pytest.TempPathFactory,
    wait_for: Callable[..., Any],
    request: pytest.FixtureRequest,
) -> Iterator[WorkerProcess]:
    emulator.reset()
    emulator.seed(
        [gpu_node(n) for n in GPU_NODES]
        + [
            gpu_node("corrupt", register='[{"id": "GPU-x", "count": "ten"}]'),
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cpu"}},
        ]
        + [bound_pod("running", "gpu-0")]
    )
    for resource in ("nodes", "pods"):
        emulator.add_fault(action="drop_watch", after_events=0, resource=resource, count=1)
        emulator.add_fault(action="error", status=410, verb="watch", resource=resource, count=1)
    workdir = tmp_path_factory.mktemp("worker")
    (workdir / "gunicorn-metrics").mkdir()
    env = {"HAMI_REGISTRATION_INTERVAL": "60s", "PROMETHEUS_MULTIPROC_DIR": str(workdir / "gunicorn-metrics")}
    started = start_worker(workdir, emulator.kubeconfig, env)
    try:
        wait_for(lambda: started.status().may_decide(time.time()), 30.0, "the worker to be synced")
        yield started
    finally:
        started.process.stop()
        emulator.clear_faults()
        if getattr(request.node, "_integration_failed", False):
            sys.stderr.write(f"\n--- worker log tail ---\n{started.process.log_tail(60)}\n")


def test_publishes_gpu_nodes_and_leaves_the_corrupt_one_out(worker: WorkerProcess) -> None:
    published = worker.snapshot()
    assert published is not None
    assert sorted(published.nodes) == GPU_NODES
    assert "invalid count field" in published.broken["corrupt"]
    assert "cpu" not in published.broken
    assert worker.status().generation == published.generation
    assert worker.metric("hami_worker_nodes_corrupt") == 1
    assert worker.metric("hami_worker_nodes_registered") == len(GPU_NODES)
    shared = worker.state_dir.parent / "gunicorn-metrics"
    assert list(shared.iterdir()) == [], (
        "the worker's registry is its own, never Gunicorn's multiprocess files"
    )


def test_stamps_the_handshake_on_gpu_nodes_only(emulator: Any, wait_for: Callable[..., Any]) -> None:
    def stamped() -> bool:
        values = [emulator.get("nodes", n)["metadata"]["annotations"].get(HANDSHAKE, "") for n in GPU_NODES]
        return all(v.startswith("Requesting_") for v in values)

    wait_for(stamped, 10.0, "handshakes")
    assert HANDSHAKE not in (emulator.get("nodes", "cpu")["metadata"].get("annotations") or {})


def test_survived_the_dropped_watches_and_the_410s(
    worker: WorkerProcess, emulator: Any, wait_for: Callable[..., Any]
) -> None:
    def fired() -> dict[tuple[str, str], int]:
        return {(r["resource"], r["action"]): r["fired"] for r in emulator.fault_report()["rules"]}

    wait_for(lambda: all(fired().values()), 10.0, "each watch to be dropped, then refused with 410")
    assert fired() == {
        ("nodes", "drop_watch"): 1,
        ("nodes", "error"): 1,
        ("pods", "drop_watch"): 1,
        ("pods", "error"): 1,
    }

    def restarted(resource: str, reason: str) -> float:
        return worker.metric("hami_worker_watch_restarts_total", reason=reason, resource=resource)

    for resource in ("nodes", "pods"):
        for reason in ("dropped", "expired"):
            wait_for(lambda r=resource, why=reason: restarted(r, why), 5.0, f"{resource} {reason} restarts")


def set_register(client: Kube, node: str, value: str | None) -> None:
    client.core.patch_node(node, {"metadata": {"annotations": {REGISTER: value}}}, _content_type=MERGE)


def test_node_added_updated_and_deleted_through_the_watch(
    worker: WorkerProcess, client: Kube, wait_for: Callable[..., Any]
) -> None:
    def published_when(check: Callable[[Snapshot], bool], what: str) -> Snapshot:
        found: Snapshot = wait_for(
            lambda: (s := worker.snapshot()) is not None and check(s) and s, 10.0, what
        )
        return found

    before = published_when(lambda s: True, "a snapshot")
    core: Any = client.core
    core.create_node(gpu_node("late", gpus=1))
    added = published_when(lambda s: "late" in s.nodes, "the new node")
    assert {n: r.rev for n, r in added.nodes.items() if n != "late"} == {
        n: r.rev for n, r in before.nodes.items()
    }

    set_register(
        client, "late", json.dumps([{"id": f"GPU-late-{i}", "index": i, "count": 4} for i in range(3)])
    )
    updated = published_when(lambda s: len(s.nodes["late"].devices.devices) == 3, "three GPUs")
    assert updated.nodes["late"].rev == updated.generation
    assert updated.nodes["gpu-0"].rev == before.nodes["gpu-0"].rev, "only the changed node's rev moves"

    set_register(client, "late", None)
    published_when(lambda s: "late" not in s.nodes, "the node to drop out (quirk #23)")
    set_register(client, "late", json.dumps([{"id": "GPU-late-0", "count": 4}]))
    published_when(lambda s: "late" in s.nodes, "the node to come back")
    client.core.delete_node("late")
    published_when(lambda s: "late" not in s.nodes, "the deleted node to go")


def test_pods_are_reconciled_into_the_ledger(
    worker: WorkerProcess, emulator: Any, client: Kube, wait_for: Callable[..., Any]
) -> None:
    uid = emulator.get("pods", "running", "default")["metadata"]["uid"]
    assert worker.rows() == {uid: "bound"}

    emulator.seed(
        [bound_pod("second", "gpu-1"), bound_pod("foreign", "gpu-1", scheduler="default-scheduler")]
    )
    second = emulator.get("pods", "second", "default")["metadata"]["uid"]
    wait_for(lambda: worker.rows() == {uid: "bound", second: "bound"}, 10.0, "the second pod's row")

    client.core.patch_namespaced_pod_status(
        "second", "default", {"status": {"phase": "Succeeded"}}, _content_type=MERGE
    )
    wait_for(lambda: second not in worker.rows(), 10.0, "the terminal pod's row to go")

    emulator.delete("pods", "running", "default")
    wait_for(lambda: worker.rows() == {}, 10.0, "the deleted pod's row to go")
    assert worker.metric("hami_worker_ledger_rebuilds_total") == 1


def test_sigterm_marks_not_leader_and_exits_zero(worker: WorkerProcess) -> None:
    assert worker.status().leader
    assert worker.process.stop(timeout=15) == 0
    status = worker.status()
    assert (status.leader, status.synced) == (False, False)
