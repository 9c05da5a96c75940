"""The chaos storm's parts that do not need the whole cluster: the seeded plan and its fault rules, the
verdict's rules (outcome per pod, lock owners, ledger vs rebuild), the simulated Service in front of the
replicas, and the actors' retries of transient API failures."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import urllib3

from app.core.model import DeviceUse
from app.devices import build_vendors
from app.state.ledger import BOUND, CONFIRMED, Entry, Ledger
from sim.chaos.check import ledger_check, lock_owner_state, locks, outcome_of, outcomes
from sim.chaos.plan import FAULT_GROUPS, ROUND, STAGES, fault_rules, make_plan
from sim.emulator.testing import EmulatorHandle, pod, run_emulator, wait_for
from sim.kit import podutil
from sim.kit.kube import RESTARTING, Kube, KubeError, pod_path
from sim.kubescheduler.service import NoEndpoints, Service
from workers.reconcile import Rules, rebuild

GPU = {"nvidia.com/gpu": 1}
ALLOCATED = "GPU-a,NVIDIA,1000,10:;"


# --- the plan ---------------------------------------------------------------------------------------------


def plan_of(seed: int, **overrides: Any) -> Any:
    options = {"kills": 2, "replicas": 2, "arrival_rate": 8.0, "recreate": 6, "fault_rate": 0.1}
    return make_plan(seed, 200, **{**options, **overrides})


def test_same_seed_same_storm_and_another_seed_another() -> None:
    first, again, other = plan_of(5), plan_of(5), plan_of(6)
    assert first == again
    assert [p.manifest for p in first.pods] == [p.manifest for p in again.pods]
    assert (first.gaps, first.kills, first.recreations) != (other.gaps, other.kills, other.recreations)


def test_kills_fall_in_their_own_slice_of_the_middle_of_the_run() -> None:
    for seed in range(20):
        kills = plan_of(seed, kills=3).kills
        assert list(kills) == sorted(kills) and len(set(kills)) == 3
        assert all(int(200 * 0.15) <= k < int(200 * 0.85) for k in kills)


def test_a_mixed_plan_has_the_other_vendors_pods_and_its_two_leader_faults_in_the_middle() -> None:
    kinds = [("nvidia", "awsneuron"), ("nvidia", "kunlun")]
    plan = plan_of(7, vendors=kinds, two_leaders=3)
    assert plan == plan_of(7, vendors=kinds, two_leaders=3)
    assert {"awsneuron", "kunlun"} <= {p.kind for p in plan.pods}
    points = plan.two_leaders
    assert len(points) == 3 and list(points) == sorted(points) and all(0.15 <= p < 0.55 for p in points)
    nvidia = plan_of(7)
    assert nvidia.two_leaders == () and not {"awsneuron", "kunlun"} & {p.kind for p in nvidia.pods}
    assert plan_of(7, two_leaders=1).pods == nvidia.pods  # the fault's points do not change the rest
    with pytest.raises(ValueError, match="at least 2 replicas"):
        plan_of(7, replicas=1, two_leaders=1)


@pytest.mark.parametrize("rounds", [0, 1, 3])
def test_long_faults_come_in_rounds_each_in_its_slice_with_every_kind(rounds: int) -> None:
    plan = plan_of(4, long_faults=rounds, lag=45.0)
    assert plan == plan_of(4, long_faults=rounds, lag=45.0)
    assert len(plan.long_faults) == rounds * len(ROUND)
    for index in range(rounds):
        chunk = plan.long_faults[index * len(ROUND) : (index + 1) * len(ROUND)]
        low, width = 0.1 + index * 0.8 / rounds, 0.8 / rounds
        assert [(f.kind, f.resource, f.target) for f in chunk] == list(ROUND)
        assert [f.at for f in chunk] == sorted(f.at for f in chunk)
        assert all(low <= f.at <= low + width for f in chunk)
    for fault in plan.long_faults:
        assert fault.seconds == (45.0 if fault.kind in ("watch-delay", "relist") else 2.0)
    assert plan_of(4).long_faults == ()  # an older command line gets the storm it had


def test_recreations_cycle_through_the_stages_and_skip_pods_that_fit_nowhere() -> None:
    plan = plan_of(3)
    kinds = {p.key: p.kind for p in plan.pods}
    assert [r.stage for r in plan.recreations] == [*STAGES, *STAGES]
    assert all(kinds[r.key] != "unfit" for r in plan.recreations)


@pytest.mark.parametrize("rate", [0.05, 0.1, 0.3])
def test_each_fault_group_fires_at_the_rate(rate: float) -> None:
    rules = fault_rules(rate)
    for matcher, _actions in FAULT_GROUPS:
        group = [r for r in rules if all(r.get(k) == v for k, v in matcher.items())]
        expected = min(0.5, 4 * rate) if matcher.get("verb") == "watch" else rate
        fires = 1.0 - math.prod(1.0 - r["probability"] for r in group)
        assert fires == pytest.approx(expected, abs=1e-4), matcher


def test_no_faults_on_pod_create_or_delete_and_no_conflict_on_unconditioned_pod_patches() -> None:
    rules = fault_rules(0.1)
    assert fault_rules(0.0) == []
    pod_rules = [r for r in rules if r.get("resource") == "pods"]
    assert not [r for r in pod_rules if r.get("verb") in ("create", "delete") and not r.get("subresource")]
    assert not [r for r in pod_rules if r.get("verb") == "patch" and r.get("status") == 409]
    with pytest.raises(ValueError):
        fault_rules(1.0)


# --- the verdict ------------------------------------------------------------------------------------------


def gpu_pod(name: str, **fields: Any) -> dict[str, Any]:
    manifest = pod(name)
    manifest["spec"]["schedulerName"] = "hami-scheduler"
    manifest["spec"]["containers"][0]["resources"] = {"limits": dict(GPU)}
    manifest["metadata"]["uid"] = f"uid-{name}"
    manifest["metadata"]["annotations"] = fields.pop("annotations", {})
    if "node" in fields:
        manifest["spec"]["nodeName"] = fields.pop("node")
    manifest["status"]["phase"] = fields.pop("phase", "Pending")
    assert not fields
    return manifest


ALLOCATED_NOTES = {
    "hami.io/vgpu-node": "n1",
    "hami.io/vgpu-devices-allocated": ALLOCATED,
    "hami.io/vgpu-devices-to-allocate": ";",
    "hami.io/bind-phase": "success",
}


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"node": "n1", "phase": "Running", "annotations": ALLOCATED_NOTES}, "bound"),
        ({"node": "n1", "phase": "Succeeded", "annotations": ALLOCATED_NOTES}, "bound"),
        ({"node": "n1", "phase": "Pending", "annotations": ALLOCATED_NOTES}, "not-allocated"),
        (
            {
                "node": "n1",
                "phase": "Running",
                "annotations": {**ALLOCATED_NOTES, "hami.io/bind-phase": "allocating"},
            },
            "not-allocated",
        ),
        ({"node": "n1", "phase": "Failed", "annotations": ALLOCATED_NOTES}, "failed"),
        ({"annotations": {podutil.REJECTED: "unschedulable: 0/4 nodes are available"}}, "unschedulable"),
        ({"annotations": {podutil.REJECTED: "error: injected fault (60 attempts)"}}, "rejected-after-errors"),
        ({"annotations": {"hami.io/vgpu-node": "n1"}}, "pending"),
    ],
)
def test_outcome_of_a_pod(fields: dict[str, Any], expected: str) -> None:
    assert outcome_of(gpu_pod("p", **fields)) == expected


SGPU = "n1-sgpu-0,Metax-SGPU,4096,25:;"
MLU = "n1-cambricon-mlu-0,MLU,2560,25:;"


@pytest.mark.parametrize(
    ("notes", "expected"),
    [
        ({"hami.io/metax-sgpu-devices-to-allocate": ";"}, "bound"),
        ({"hami.io/metax-sgpu-devices-to-allocate": SGPU}, "not-allocated"),  # its plugin never served it
        ({"hami.io/metax-sgpu-devices-to-allocate": "n1-sgpu-0,Metax-SGPU,lots,25:;"}, "not-allocated"),
        # Cambricon's dsmlu plugin reads its own profile and leaves HAMi's list alone
        ({"hami.io/cambricon-mlu-devices-to-allocate": MLU, "CAMBRICON_DSMLU_ASSIGNED": "true"}, "bound"),
    ],
    ids=["sgpu-served", "sgpu-left", "sgpu-unreadable", "cambricon-own-plugin"],
)
def test_outcome_of_another_vendors_pod(notes: dict[str, str], expected: str) -> None:
    """Allocated means: no device left in a to-allocate list that the vendor's device plugin consumes."""
    manifest = gpu_pod("p", node="n1", phase="Running", annotations={"hami.io/vgpu-node": "n1", **notes})
    manifest["spec"]["containers"][0]["resources"] = {"limits": {"metax-tech.com/sgpu": 1}}
    assert outcome_of(manifest) == expected


def test_outcomes_count_missing_pods_as_lost() -> None:
    pods = [gpu_pod("a", node="n1", phase="Running", annotations=ALLOCATED_NOTES)]
    result = outcomes(pods, ["default/a", "default/b"])
    assert (result["pods_total"], result["pods_bound"], result["pods_lost"]) == (1, 1, 1)
    assert result["lost"] == {"default/b": "missing"}


def test_a_lock_is_leaked_unless_its_owner_still_waits_for_allocate() -> None:
    waiting = gpu_pod(
        "waiting", node="n1", annotations={**ALLOCATED_NOTES, "hami.io/bind-phase": "allocating"}
    )
    done = gpu_pod("done", node="n2", phase="Running", annotations=ALLOCATED_NOTES)
    unbound = gpu_pod("unbound")
    by_key = {podutil.key(p): p for p in (waiting, done, unbound)}
    lock = "2026-01-01T00:00:00Z,default,{}"
    assert lock_owner_state(lock.format("waiting"), "n1", by_key) == "waiting-for-allocate"
    assert lock_owner_state(lock.format("waiting"), "n9", by_key) == "bound-elsewhere"
    assert lock_owner_state(lock.format("done"), "n2", by_key) == "bound-allocated"
    assert lock_owner_state(lock.format("unbound"), "n3", by_key) == "never-bound"
    assert lock_owner_state(lock.format("gone"), "n3", by_key) == "gone"
    assert lock_owner_state("not a lock", "n3", by_key) == "unparsable"
    nodes = [
        {"metadata": {"name": "n1", "annotations": {"hami.io/mutex.lock": lock.format("waiting")}}},
        {"metadata": {"name": "n2", "annotations": {"hami.io/mutex.lock": lock.format("done")}}},
        {"metadata": {"name": "n3"}},
    ]
    result = locks(nodes, by_key.values())
    assert (result["node_locks_held"], result["leaked_locks"]) == (2, 1)


def test_ledger_check_finds_drift_and_orphans_and_ignores_bindings_in_flight(tmp_path: Path) -> None:
    bound = gpu_pod("bound", node="n1", phase="Running", annotations=ALLOCATED_NOTES)
    landing = gpu_pod("landing", phase="Pending", annotations={"hami.io/vgpu-node": "n1"})
    use = {"GPU-a": DeviceUse(1, 1000, 10)}
    rules = Rules(frozenset({"hami-scheduler"}), build_vendors(None), 60.0)
    (wanted,) = rebuild([bound, landing], rules, 0.0).entries
    ledger = Ledger(tmp_path)
    try:
        ledger.upsert([Entry("uid-landing", "default", "landing", "n1", CONFIRMED, use)])
        missing = ledger_check(tmp_path, [bound, landing], "hami-scheduler", 60.0, 0.0)
        ledger.upsert([wanted, Entry("uid-old", "default", "old", "n1", BOUND, use)])
        result = ledger_check(tmp_path, [bound, landing], "hami-scheduler", 60.0, 0.0)
    finally:
        ledger.close()
    assert missing["ledger_missing"] == ["default/bound"] and missing["cache_rebuild_mismatches"] == 1
    assert result["cache_rebuild_mismatches"] == 1 and result["ledger_extra"] == ["uid-old"]
    assert result["ledger_orphan_rows"] == ["default/old (uid-old, bound)"]
    assert result["ledger_rows"] == {"bound": 2, "confirmed": 1}


# --- the Service in front of the replicas -----------------------------------------------------------------


class Replica:
    """A tiny HTTP server: /readyz answers `ready`, anything else 200."""

    def __init__(self) -> None:
        self.ready = False
        replica = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status = 200 if replica.ready or self.path != "/readyz" else 503
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                """Quiet."""

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def replicas() -> Iterator[list[Replica]]:
    started = [Replica(), Replica()]
    try:
        yield started
    finally:
        for replica in started:
            replica.close()


def test_the_service_routes_to_the_ready_replica_and_refuses_without_one(replicas: list[Replica]) -> None:
    pool = urllib3.PoolManager(maxsize=4, retries=False)
    service = Service([r.url for r in replicas], pool, period=0.05)
    try:
        with pytest.raises(NoEndpoints):
            service.endpoint()
        replicas[1].ready = True
        assert wait_for(lambda: _endpoint(service), 5, "replica 1 Ready") == replicas[1].url
        replicas[1].ready, replicas[0].ready = False, True
        assert wait_for(lambda: _endpoint(service) == replicas[0].url, 5, "failover to replica 0")
        service.failed(replicas[0].url)  # a killed replica leaves at once, until a probe says otherwise
        assert _endpoint(service) in ("", replicas[0].url)
        replicas[1].ready = True  # two replicas that both believe they lead: calls go to both in turn
        wait_for(lambda: len({_endpoint(service) for _ in range(4)}) == 2, 5, "both Ready")
        assert {_endpoint(service) for _ in range(4)} == {replicas[0].url, replicas[1].url}
    finally:
        service.close()
        pool.clear()
    single = Service(["http://127.0.0.1:1/"], pool)
    assert single.endpoint() == "http://127.0.0.1:1"  # one URL: no probing, as the demo runs


def _endpoint(service: Service) -> str:
    try:
        return service.endpoint()
    except NoEndpoints:
        return ""


# --- the actors' retries ----------------------------------------------------------------------------------


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[EmulatorHandle]:
    with run_emulator(tmp_path / "sim") as handle:
        handle.seed([pod("p1")])
        yield handle


def test_transient_failures_are_retried_and_others_are_not(emulator: EmulatorHandle) -> None:
    patient = Kube.from_kubeconfig(emulator.kubeconfig, retries=3)
    impatient = Kube.from_kubeconfig(emulator.kubeconfig)
    try:
        emulator.add_fault(action="error", status=503, verb="get", resource="pods", count=2)
        assert podutil.name(patient.get(pod_path("default", "p1"))) == "p1"
        emulator.add_fault(action="lost_response", verb="patch", resource="pods", count=1)
        patched = patient.patch(pod_path("default", "p1"), {"metadata": {"labels": {"a": "b"}}})
        assert podutil.labels(patched) == {"a": "b"}  # the lost answer's patch, applied again: the same
        emulator.add_fault(action="error", status=500, verb="get", resource="pods", count=1)
        with pytest.raises(KubeError) as failed:
            impatient.get(pod_path("default", "p1"))
        assert failed.value.status == 500
        with pytest.raises(KubeError) as missing:
            patient.get(pod_path("default", "nope"))
        assert missing.value.status == 404
        assert emulator.faults_injected() == 4
    finally:
        patient.close()
        impatient.close()


def test_a_client_riding_out_a_restart_retries_a_403_too(emulator: EmulatorHandle) -> None:
    """A restarted kube-apiserver denies (403) until its authorizers have synced: the simulated kubelets on
    the real control plane (`sim nodes --retry-forbidden`) retry it, other clients do not."""
    riding = Kube.from_kubeconfig(emulator.kubeconfig, retries=3, retried=RESTARTING)
    plain = Kube.from_kubeconfig(emulator.kubeconfig, retries=3)
    try:
        emulator.add_fault(action="error", status=403, verb="get", resource="pods", count=2)
        assert podutil.name(riding.get(pod_path("default", "p1"))) == "p1"
        emulator.add_fault(action="error", status=403, verb="get", resource="pods", count=1)
        with pytest.raises(KubeError) as denied:
            plain.get(pod_path("default", "p1"))
        assert denied.value.status == 403 and emulator.faults_injected() == 3
    finally:
        riding.close()
        plain.close()
