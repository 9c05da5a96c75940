"""The migration from HAMi's scheduler, played end to end (docs/install.md "Migrating", steps 2 and 3).

The cluster is the one of tests/integration/migration_scenario.py, in HAMi's exact formats: pods HAMi placed
(running, bound and `allocating` under a HAMi lock, stopped between its patch and its binding, an Istio-style
pod with HAMi's padding quirk), pods of an older HAMi scheduler name (`hami-vgpu`, adopted), and HAMi's
kube-scheduler Lease in `kube-system`, last renewed just before HAMi's scheduler stopped. Our stack starts in
follow mode on that same Lease, as the runbook installs it:

1. while HAMi's Lease is valid our replica is a standby (not Ready, "not the leader") yet already counts
   every pod HAMi placed;
2. our kube-scheduler takes the Lease once it expired; the worker rebuilds and the replica becomes Ready;
3. the kube-scheduler (here the simulated one; on the real control plane kube-scheduler itself) and the
   simulated kubelets with HAMi's device-plugin behaviour start, and sixteen half-GPU pods are created.

Then: no GPU is oversubscribed (computed from the pods' own annotations, whatever their scheduler name), the
new pods got exactly the free capacity (nine), no node lock is left, every pod HAMi placed is where it was
with the same allocation (the running ones not even written), the pod HAMi left mid-bind under our name is
bound again, the one of the adopted name HAMi never bound is still Pending, and the leader's ledger equals a
rebuild from the API. On `main` before adoption this test fails: the `hami-vgpu` pods' GPUs are given out
again.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import migration_scenario as scenario
import pytest
from failover_checks import ready

from sim.kube import Kube, node_path
from sim.processes import ChildProcess, start_process
from workers.reconcile import compare

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
HAMI_HOLDER = f"hami-scheduler-6d4b9c7f5-x7k2p_{uuid.UUID(int=7)}"
OUR_POD = "hami-py-hami-scheduler-0"
LEASE_SECONDS = 6  # kube-scheduler's default is 15 s; shorter keeps the test short
PATIENCE = ("--unschedulable-timeout", "3", "--max-unschedulable", "3", "--initial-backoff", "0.5")


@pytest.fixture
def api(emulator: Any) -> Iterator[Kube]:
    emulator.reset()
    kube = Kube.from_kubeconfig(emulator.kubeconfig, pool_size=8)
    try:
        yield kube
    finally:
        kube.close()


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Callable[[str, list[str]], ChildProcess]]:
    """Start `python -m sim ...` actors; every one is stopped by PID at the end, also on failure."""
    started: list[ChildProcess] = []

    def start(name: str, argv: list[str]) -> ChildProcess:
        started.append(
            start_process([sys.executable, "-m", *argv], log_path=tmp_path / f"{name}.log", cwd=REPO)
        )
        return started[-1]

    try:
        yield start
    finally:
        for process in started:
            if not process.alive():  # it should have run until now
                sys.stderr.write(f"\n--- exited early ({process.returncode}):\n{process.log_tail(30)}\n")
            process.stop(10.0)


def pods_named(kube: Kube, prefix: str = "") -> dict[str, dict[str, Any]]:
    _, items = kube.list(f"/api/v1/namespaces/{scenario.NAMESPACE}/pods")
    return {p["metadata"]["name"]: p for p in items if p["metadata"]["name"].startswith(prefix)}


def settled(pod: dict[str, Any]) -> bool:
    """Bound and admitted by its kubelet, or given up on by the scheduler."""
    rejected = "sim.hami.io/rejected" in (pod["metadata"].get("annotations") or {})
    return rejected or (bool(pod["spec"].get("nodeName")) and pod.get("status", {}).get("phase") == "Running")


def locks(kube: Kube) -> dict[str, str]:
    _, nodes = kube.list(node_path())
    found = {
        n["metadata"]["name"]: (n["metadata"].get("annotations") or {}).get(scenario.LOCK) for n in nodes
    }
    return {name: lock for name, lock in found.items() if lock}


def test_migration_from_hami_keeps_every_allocation(
    api: Kube,
    emulator: Any,
    start_service: Any,
    cluster: Any,
    lease_holders: Any,
    processes: Callable[[str, list[str]], ChildProcess],
    wait_for: Any,
) -> None:
    seeded = scenario.seed(api)
    assert locks(api) == seeded.locks
    hami_lease = lease_holders(name="hami-scheduler", namespace="kube-system", duration=LEASE_SECONDS)
    hami_lease.hold(HAMI_HOLDER)  # HAMi's kube-scheduler, leading until HAMi's scheduler is stopped

    # 1. ours starts on HAMi's Lease: a standby that already counts HAMi's pods
    service = start_service(
        registrar="worker",
        wait_ready=False,
        env={
            "HAMI_SCHEDULER_NAME": scenario.OURS,
            "HAMI_ADOPT_SCHEDULER_NAMES": scenario.ADOPT,
            "HAMI_LEADER_ELECT": "true",
            "HAMI_LEADER_ELECT_MODE": "follow",
            "HAMI_LEADER_ELECT_RESOURCE_NAME": "hami-scheduler",
            "HAMI_LEADER_ELECT_RESOURCE_NAMESPACE": "kube-system",
            "POD_NAME": OUR_POD,
            "POD_NAMESPACE": "kube-system",
            "HAMI_SCHEDULER_ROLE_LABEL": "false",
            "HAMI_LOCK_SWEEP_INTERVAL": "1s",
        },
    )
    counted = {"train-a", "istio-a", "small-a", "legacy-a", "legacy-b", "infer-a"}  # the bound ones
    wait_for(lambda: counted <= {e.name for e in service.ledger.all_entries()}, 30, "HAMi's pods counted")
    standby = f"not the leader (leader: {HAMI_HOLDER})"
    wait_for(lambda: standby in service.get("/readyz").body.decode(), 30, "a standby behind HAMi's leader")

    # 2. HAMi's scheduler stops (no release: the worst case); our kube-scheduler takes the Lease once it
    # expired; the worker rebuilds and we lead
    hami_expiry = hami_lease.stop() + LEASE_SECONDS
    while time.time() < hami_expiry:
        assert not ready(service)
        time.sleep(0.2)
    ours = lease_holders(name="hami-scheduler", namespace="kube-system", duration=LEASE_SECONDS)
    ours.hold(f"{OUR_POD}_{uuid.UUID(int=42)}")
    service.wait_ready(60.0)
    rebuilt = cluster.rebuild_ledger(schedulers=(scenario.OURS, scenario.OLD))
    assert not compare(rebuilt, service.ledger.all_entries())
    assert {e.name: e.state for e in rebuilt} == {**dict.fromkeys(counted, "bound"), "midbind": "confirmed"}

    # 3. the scheduler, a stream of new GPU pods, and the kubelets with HAMi's device plugin
    processes(
        "scheduler",
        ["sim", "scheduler", "--kubeconfig", str(emulator.kubeconfig), "--extender", service.url, *PATIENCE],
    )
    for index in range(scenario.STREAM):
        api.create(f"/api/v1/namespaces/{scenario.NAMESPACE}/pods", scenario.new_pod(index))
    time.sleep(1.0)  # binds meet HAMi's locks before the device plugin has released them
    spec_args = [
        "--nodes",
        str(scenario.NODES),
        "--seed",
        str(scenario.SEED),
        "--models",
        "v100:2",
        "--zones",
        "1",
    ]
    processes(
        "nodes", ["sim", "nodes", "--kubeconfig", str(emulator.kubeconfig), "--no-register", *spec_args]
    )

    wait_for(
        lambda: (
            all(settled(p) for p in pods_named(api, "new-").values()) and settled(pods_named(api)["midbind"])
        ),
        180,
        "every new pod bound and running, or rejected",
    )
    wait_for(lambda: not locks(api), 60, "no node lock left")

    pods = pods_named(api)
    problems = scenario.oversubscribed(seeded.spec, list(pods.values()))
    assert problems == {}, f"oversubscribed GPUs: {problems}"
    new = [p for name, p in pods.items() if name.startswith("new-")]
    assert sum(1 for p in new if p["spec"].get("nodeName")) == scenario.EXPECTED_BOUND

    for placed in scenario.PLACED:  # nothing HAMi placed was disturbed
        before, now = seeded.pods[placed.name], pods[placed.name]
        assert now["metadata"]["uid"] == before["metadata"]["uid"]
        if placed.state == "midbind":
            assert now["spec"].get("nodeName") and now["status"]["phase"] == "Running"
            continue
        keys = ("hami.io/vgpu-node", scenario.ALLOCATED)
        assert [now["metadata"]["annotations"][k] for k in keys] == [
            before["metadata"]["annotations"][k] for k in keys
        ]
        assert now["spec"].get("nodeName") == before["spec"].get("nodeName")
        if placed.state == "running":
            assert now["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"], placed.name
        elif placed.state == "allocating":
            assert now["status"]["phase"] == "Running"
            assert now["metadata"]["annotations"]["hami.io/bind-phase"] == "success"
        else:  # abandoned: nobody serves its scheduler name
            assert now["status"]["phase"] == "Pending" and not now["spec"].get("nodeName")

    rebuilt = cluster.rebuild_ledger(schedulers=(scenario.OURS, scenario.OLD))
    assert not compare(rebuilt, service.ledger.all_entries())
