"""Leader election of `python -m workers` against the API emulator, all real processes.

acquire: two workers race for a 4 s Lease; exactly one says leader; `kill -9` of it hands over within the
lease duration + 3 s, and the new leader rebuilds its ledger from the API before it says synced.
follow: a Lease written by the test as kube-scheduler would (`<identity>_<uuid>`) makes the worker leader;
when the renewals stop, it says leader=False within one retry period after the expiry (plus slack).
Each worker has its own HAMI_STATE_DIR, as each replica has its own emptyDir.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from app.core.model import DeviceUse
from app.k8s.client import Kube, connect
from app.state.ledger import BOUND, Entry, Ledger
from app.state.status import ReplicaStatus
from sim.kit.processes import ChildProcess, start_process

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LEASE_SECONDS = 4
RETRY_SECONDS = 1
ELECTION = {
    "HAMI_LEADER_ELECT": "true",
    "HAMI_LEADER_ELECT_RESOURCE_NAMESPACE": "default",
    "HAMI_LEASE_DURATION": f"{LEASE_SECONDS}s",
    "HAMI_RENEW_DEADLINE": "3s",
    "HAMI_RETRY_PERIOD": f"{RETRY_SECONDS}s",
    "HAMI_REGISTRATION_INTERVAL": "5s",
}


@dataclass
class WorkerProcess:
    name: str
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

    def metric(self, name: str) -> float:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as response:
            text = response.read().decode()
        return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(f"{name} "))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def start_worker(
    emulator: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[[str, dict[str, str]], WorkerProcess]]:
    started: list[WorkerProcess] = []

    def start(name: str, env: dict[str, str]) -> WorkerProcess:
        port = free_port()
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("HAMI_") and k not in ("POD_NAME", "POD_NAMESPACE", "KUBECONFIG")
        }
        full = {
            **base,
            "KUBECONFIG": str(emulator.kubeconfig),
            "HAMI_STATE_DIR": str(tmp_path / name),
            "HAMI_WORKER_METRICS_BIND": f"127.0.0.1:{port}",
            "POD_NAME": name,
            **env,
        }
        process = start_process(
            [sys.executable, "-m", "workers"], log_path=tmp_path / f"{name}.log", env=full, cwd=REPO
        )
        worker = WorkerProcess(name, process, tmp_path / name, port)
        started.append(worker)
        return worker

    try:
        yield start
    finally:
        for worker in started:
            worker.process.stop(timeout=15)
        if getattr(request.node.getparent(pytest.Module), "_integration_failed", False):  # set by conftest
            for worker in started:
                sys.stderr.write(f"\n--- {worker.name} log tail ---\n{worker.process.log_tail(60)}\n")


@pytest.fixture(scope="module")
def client(emulator: Any) -> Iterator[Kube]:
    kube = connect(str(emulator.kubeconfig))
    try:
        yield kube
    finally:
        kube.close()


def bound_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {
                "hami.io/vgpu-node": "gpu-0",
                "hami.io/vgpu-devices-allocated": "GPU-0,NVIDIA,1000,10:;",
            },
        },
        "spec": {"schedulerName": "hami-scheduler", "nodeName": "gpu-0", "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }


def test_acquire_mode_one_leader_and_failover_after_kill_9(
    emulator: Any, start_worker: Callable[..., WorkerProcess], wait_for: Callable[..., Any]
) -> None:
    emulator.reset()
    emulator.seed([bound_pod("running")])
    uid = emulator.get("pods", "running", "default")["metadata"]["uid"]
    env = {
        **ELECTION,
        "HAMI_LEADER_ELECT_MODE": "acquire",
        "HAMI_LEADER_ELECT_RESOURCE_NAME": "acquire-lease",
    }
    a, b = start_worker("worker-a", env), start_worker("worker-b", env)

    def leaders() -> list[WorkerProcess]:
        return [w for w in (a, b) if w.status().leader]

    first = wait_for(
        lambda: leaders() and leaders()[0].status().synced and leaders()[0], 30.0, "a synced leader"
    )
    other = b if first is a else a
    wait_for(lambda: other.status().heartbeat > 0, 30.0, "the other worker to run")
    for _ in range(10):  # a few retry periods: never two leaders
        assert len(leaders()) == 1
        time.sleep(0.2)
    status = other.status()
    assert (status.leader, status.synced, status.leader_identity) == (False, False, first.name)
    assert other.metric("hami_worker_ledger_rebuilds_total") == 0

    # A row the API knows nothing about, written where only a rebuild can remove it (a future write time
    # keeps it from the sweep): the new leader must rebuild from the API, not trust its follower ledger.
    ledger = Ledger(other.state_dir)
    try:
        ledger.upsert(
            [
                Entry(
                    "ghost",
                    "default",
                    "ghost",
                    "gpu-0",
                    BOUND,
                    {"GPU-0": DeviceUse(1, 1, 1)},
                    updated_at=time.time() + 3600,
                )
            ]
        )
    finally:
        ledger.close()

    os.kill(first.process.pid, signal.SIGKILL)
    wait_for(lambda: other.status().leader, LEASE_SECONDS + 3.0, "the standby to take over")
    wait_for(lambda: other.status().synced, 10.0, "the new leader to sync")
    assert other.rows() == {uid: BOUND}
    assert other.metric("hami_worker_ledger_rebuilds_total") == 1
    assert other.status().leader_identity == other.name


def lease(holder: str, renewed: float) -> dict[str, Any]:
    stamp = datetime.fromtimestamp(renewed, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "kube-scheduler-lease", "namespace": "default"},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": LEASE_SECONDS,
            "renewTime": stamp,
            "acquireTime": stamp,
        },
    }


def test_follow_mode_tracks_kube_schedulers_lease(
    emulator: Any, client: Kube, start_worker: Callable[..., WorkerProcess], wait_for: Callable[..., Any]
) -> None:
    emulator.reset()
    holder = "sched-c_0f3e7a52-9b1d-4c5e-8a47-6d2b1e9f0c11"
    coordination: Any = client.coordination
    coordination.create_namespaced_lease("default", lease(holder, time.time()))
    env = {
        **ELECTION,
        "HAMI_LEADER_ELECT_MODE": "follow",
        "HAMI_LEADER_ELECT_RESOURCE_NAME": "kube-scheduler-lease",
    }
    worker = start_worker("sched-c", env)

    def renewed_and_synced() -> bool:  # kube-scheduler renews while the worker starts (slow under load)
        coordination.patch_namespaced_lease(
            "kube-scheduler-lease",
            "default",
            {"spec": lease(holder, time.time())["spec"]},
            _content_type="application/merge-patch+json",
        )
        return worker.status().synced

    wait_for(renewed_and_synced, 30.0, "leader and synced", step=0.5)
    assert worker.status().leader_identity == holder

    for _ in range(3):  # kube-scheduler renews
        renewed = time.time()
        coordination.patch_namespaced_lease(
            "kube-scheduler-lease",
            "default",
            {"spec": lease(holder, renewed)["spec"]},
            _content_type="application/merge-patch+json",
        )
        time.sleep(RETRY_SECONDS)
    assert worker.status().leader
    assert worker.status().lease_expires_at == pytest.approx(renewed + LEASE_SECONDS, abs=0.01)

    expires = renewed + LEASE_SECONDS
    wait_for(
        lambda: not worker.status().leader, expires - time.time() + RETRY_SECONDS + 3.0, "leadership to lapse"
    )
    assert time.time() >= expires - 0.5, "not before the lease expired"
    assert not worker.status().synced

    coordination.patch_namespaced_lease(
        "kube-scheduler-lease",
        "default",
        {"spec": lease(holder, time.time())["spec"]},
        _content_type="application/merge-patch+json",
    )
    wait_for(lambda: worker.status().synced, 10.0, "leader again after a renewal")
    coordination.patch_namespaced_lease(
        "kube-scheduler-lease",
        "default",
        {"spec": lease("sched-d_1234", time.time())["spec"]},
        _content_type="application/merge-patch+json",
    )
    wait_for(lambda: not worker.status().leader, 5.0, "follower when another holds the Lease")
