"""Shared fixtures for multi-process integration tests: the API emulator, the Gunicorn service, and a
stand-in for the registration worker.

Everything runs as it does in production: the emulator (`python -m sim.emulator`) and the service
(`gunicorn -c config/gunicorn.conf.py wsgi:app`) are separate processes reached over real HTTP, and the
test side talks to the emulator through the real `kubernetes` client (never a mock). Every process a
fixture starts is stopped by its PID in the fixture's teardown, also when the test fails; a failing test
gets the tail of each process's log in its report.

Fixtures (all generic; build your scenario from them):

- `emulator` (module scope): an `EmulatorProcess` — URL, kubeconfig path, and the `/_sim/` test hooks
  (seed, store reads, fault injection as a context manager, the request log, reset).
- `kube` (module scope): a `kubernetes.client.CoreV1Api` configured from the emulator's kubeconfig.
- `cluster` (module scope): a `Cluster` — builders for GPU nodes and pods in HAMi's formats, reads of
  live objects as JSON, and `allocate(node)`, which performs the device plugin's documented Allocate
  steps (pop the to-allocate groups, bind-phase `success`, release `hami.io/mutex.lock`) through the
  real client; `device_usage()` (per GPU, from the pods' annotations alone) and `rebuild_ledger()` (the
  worker's rebuild over a fresh pod list) are the API-side truth to check a replica's ledger against.
- `start_service` (module scope): a factory `start_service(workers=2, threads=4, env={...},
  registrar="auto", wait_ready=True)` returning a `Service` (HTTP helpers for /filter, /bind, /webhook,
  /metrics, /debug/state, the shared `ledger`, the replica's `status()` rows). `registrar`: "worker"
  runs the real registration worker (`python -m workers`, `.worker`); "standin" a `RegistrarStandin`
  (`.registrar`); "auto" the worker when it is importable, else the stand-in; None nothing (the service
  stays unready). `wait_ready=False` returns once the processes run (a follower never becomes Ready).
  Failures: `service.kill()` SIGKILLs the whole replica by PID (worker, Gunicorn master and workers),
  `service.kill(worker_only=True)` only its registration worker, `service.start_worker()` restarts that
  worker as its container would be.
- `RegistrarStandin`: plays `python -m workers` where a test must control leadership or sync directly
  (and stood in for it before it existed) — publishes `$HAMI_STATE_DIR/inventory.json` with
  `app.state.snapshot.write` from the emulator's nodes and ResourceQuotas, and writes the status rows of
  `app.state.status` (leader, synced, heartbeat, ...) into the ledger every `interval`. `set_leader` /
  `set_synced` control what the service sees.

- `scheduler_lease` (function scope): a `SchedulerLease` playing the co-located kube-scheduler for
  follow mode — writes the Lease ("kube-scheduler", 4 s) and, with `hold(holder)`, renews it every second
  from a thread until `stop()` (which returns the last renewTime).
- `wait_for` (a function): `wait_for(predicate, timeout, what)` polls with a deadline, never a bare sleep.
- `worker_is_available`: whether `python -m workers` exists (for tests that need the real worker).

Test modules cannot import from this file (pytest's importlib mode): builders are reached through the
fixtures (`cluster.gpu_node(...)`, `cluster.gpu_pod(...)`).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
import urllib3
from kubernetes import client as kclient
from kubernetes import config as kconfig
from prometheus_client.mmap_dict import MmapedDict

from app.core import quota as core_quota
from app.core.codec import decode_pod_single_device
from app.core.decision import ASSIGNED_NODE
from app.core.inventory import NodeUnregistered, decode_node
from app.core.nodelock import BIND_PHASE, LOCK_ANNOTATION, PHASE_SUCCESS
from app.devices import build_vendors
from app.devices.nvidia import keys
from app.k8s import objects
from app.k8s.client import Kube, connect
from app.state import snapshot
from app.state.ledger import Entry, Ledger
from app.state.snapshot import NodeRecord, Snapshot
from app.state.status import ReplicaStatus
from sim.emulator.testing import EmulatorHandle, EmulatorOptions, run_emulator
from sim.kit.processes import ChildProcess, start_process

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
MERGE_PATCH = "application/merge-patch+json"
GPU_TYPE = "NVIDIA-Tesla V100-PCIE-32GB"
# Start-up waits guard against a hang, they do not measure speed: a loaded 2-core machine took over 30 s to
# bring Gunicorn and its workers up, so the guard is generous.
STARTUP_GUARD_S = 120.0


# --- waiting and processes --------------------------------------------------------------------------------


def wait_for(
    predicate: Callable[[], Any], timeout: float = 15.0, what: str = "condition", step: float = 0.05
) -> Any:
    """Poll `predicate` until it returns something truthy; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            result = predicate()
            if result:
                return result
        except Exception as exc:  # keep polling; report the last error if the deadline passes
            last_error = exc
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error!r})" if last_error else ""
            pytest.fail(f"timed out after {timeout}s waiting for {what}{detail}")
        time.sleep(step)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _children(pid: int) -> list[int]:
    """Direct children of `pid` (Linux /proc), so a killed master never orphans its workers."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                found.extend(int(p) for p in Path(f"/proc/{pid}/task/{task}/children").read_text().split())
    return found


class ManagedProcess:
    """A subprocess started by a fixture (`sim.kit.processes`: own process group, output in a log file);
    `stop()` ends it by PID — SIGTERM, so Gunicorn's master stops its workers gracefully — escalating to
    SIGKILL of the child's own process group, so a killed master never orphans its workers."""

    def __init__(self, name: str, argv: list[str], env: Mapping[str, str], log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        self.child: ChildProcess = start_process(argv, log_path=log_path, env=env, cwd=REPO)
        self.pid = self.child.pid

    def alive(self) -> bool:
        return self.child.alive()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 40) -> str:
        return self.child.log_tail(lines)

    def stop(self, timeout: float = 15.0) -> None:
        self.child.stop(timeout)

    def terminate(self) -> None:
        """SIGTERM by PID, without waiting (`stop` waits and escalates)."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)

    def kill(self) -> list[int]:
        """SIGKILL the process and its direct children (a Gunicorn master's workers) by PID, as a crashed
        container ends: no signal handler, no shutdown hook. Reaped; returns the PIDs killed."""
        pids = [self.pid, *_children(self.pid)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.child.stop(5.0)  # already dead: only reaps (and SIGKILLs its process group's stragglers)
        wait_for(lambda: all(map(pid_gone, pids)), 5.0, f"{self.name}'s processes {pids} to end")
        return pids


def pid_gone(pid: int) -> bool:
    """The process `pid` no longer runs (gone, or a zombie waiting for its parent)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


# --- the API emulator -------------------------------------------------------------------------------------


class EmulatorProcess:
    """The emulator as a child process (`sim.emulator.testing.run_emulator`, process mode) and its `/_sim/`
    test hooks (they bypass fault injection and the request log)."""

    def __init__(self, handle: EmulatorHandle) -> None:
        self.handle = handle
        self.url = handle.url
        self.kubeconfig = handle.kubeconfig
        assert handle.process is not None
        self.process = handle.process

    def tail(self, lines: int = 40) -> str:
        return self.process.log_tail(lines)

    # seeding and reading
    def seed(self, objs: list[dict[str, Any]]) -> None:
        self.handle.seed(objs)

    def get(self, resource: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        return self.handle.get(resource, name, namespace)

    def list(
        self, resource: str, namespace: str | None = None, label_selector: str = ""
    ) -> list[dict[str, Any]]:
        return self.handle.list(resource, namespace, label_selector)

    def delete(self, resource: str, name: str, namespace: str | None = None) -> bool:
        return self.handle.delete(resource, name, namespace)

    def reset(self) -> None:
        """Empty store (default namespaces kept), no faults, no request log."""
        self.handle.reset()

    # faults (see sim/emulator/faults.py for the rule fields) and the request log
    def add_fault(self, **rule: Any) -> int:
        return self.handle.add_fault(**rule)

    def remove_fault(self, rule_id: int) -> None:
        self.handle.remove_fault(rule_id)

    def clear_faults(self) -> None:
        self.handle.clear_faults()

    def fault_report(self) -> dict[str, Any]:
        """{"faults_injected": n, "by_action": {...}, "rules": [{"id", "fired", ...rule}]}"""
        return self.handle.faults()

    @contextlib.contextmanager
    def fault(self, **rule: Any) -> Iterator[int]:
        """Inject one fault rule for the duration of the block; yields its id."""
        rule_id = self.add_fault(**rule)
        try:
            yield rule_id
        finally:
            self.remove_fault(rule_id)

    def requests(self) -> list[dict[str, Any]]:
        return self.handle.requests()

    def clear_requests(self) -> None:
        self.handle.clear_requests()


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorProcess]:
    """One emulator process per test module (stopped by PID at the end); `emulator.reset()` empties it."""
    options = EmulatorOptions(pod_deletion_delay=0.2)
    with run_emulator(tmp_path_factory.mktemp("emulator"), mode="process", options=options) as handle:
        yield EmulatorProcess(handle)


@pytest.fixture(scope="module")
def kube(emulator: EmulatorProcess) -> Iterator[kclient.CoreV1Api]:
    """The real kubernetes client, configured from the emulator's kubeconfig."""
    api = kconfig.new_client_from_config(config_file=str(emulator.kubeconfig))
    try:
        yield kclient.CoreV1Api(api)
    finally:
        api.close()


# --- HAMi-format objects and the device plugin's part ------------------------------------------------------


def gpu_node(
    name: str, gpus: int = 2, *, count: int = 10, memory: int = 32768, labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A Node whose (simulated) device plugin registered `gpus` GPUs in HAMi's JSON format (§2.2)."""
    devices = [
        {
            "id": f"GPU-{name}-{i}",
            "index": i,
            "count": count,
            "devmem": memory,
            "devcore": 100,
            "type": GPU_TYPE,
            "mode": "hami-core",
            "health": True,
        }
        for i in range(gpus)
    ]
    for device in devices:  # Go's omitempty drops index 0
        if device["index"] == 0:
            del device["index"]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, **(labels or {})},
            "annotations": {keys.REGISTER: json.dumps(devices, separators=(",", ":"))},
        },
        "status": {
            "capacity": {"nvidia.com/gpu": str(gpus * count)},
            "allocatable": {"nvidia.com/gpu": str(gpus * count)},
        },
    }


def gpu_pod(
    name: str,
    *,
    namespace: str = "default",
    gpus: int = 1,
    memory: int | None = None,
    cores: int | None = None,
    scheduler: str = "hami-scheduler",
    extra_containers: int = 0,
) -> dict[str, Any]:
    """A pending Pod asking `gpus` NVIDIA GPUs (optionally MiB of memory and percent of cores) in its
    first container; `gpus=0` gives a pod with no device request at all."""
    limits: dict[str, str] = {}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    if memory is not None:
        limits["nvidia.com/gpumem"] = str(memory)
    if cores is not None:
        limits["nvidia.com/gpucores"] = str(cores)
    containers = [{"name": "main", "image": "busybox", "resources": {"limits": limits}}]
    containers += [{"name": f"side{i}", "image": "busybox"} for i in range(extra_containers)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"schedulerName": scheduler, "containers": containers},
    }


class Cluster:
    """Test-side actions on the emulator through the real kubernetes client (builders included, since
    test modules cannot import from conftest)."""

    gpu_node = staticmethod(gpu_node)
    gpu_pod = staticmethod(gpu_pod)

    def __init__(self, emulator: EmulatorProcess, core: kclient.CoreV1Api) -> None:
        self.emulator = emulator
        self.core = core

    def add_nodes(self, *nodes: dict[str, Any]) -> None:
        for node in nodes:
            self.core.create_node(node)

    def create_pod(self, pod: dict[str, Any]) -> dict[str, Any]:
        meta = pod["metadata"]
        self.core.create_namespaced_pod(meta.get("namespace", "default"), pod)
        return self.pod(meta["name"], meta.get("namespace", "default"))

    def pod(self, name: str, namespace: str = "default") -> dict[str, Any]:
        """The live pod as JSON (what kube-scheduler would send to /filter)."""
        response = self.core.read_namespaced_pod(name, namespace, _preload_content=False)
        return dict(orjson.loads(response.data))

    def node(self, name: str) -> dict[str, Any]:
        response = self.core.read_node(name, _preload_content=False)
        return dict(orjson.loads(response.data))

    def pod_annotations(self, name: str, namespace: str = "default") -> dict[str, str]:
        return dict(self.pod(name, namespace)["metadata"].get("annotations") or {})

    def node_lock(self, node: str) -> str | None:
        return (self.node(node)["metadata"].get("annotations") or {}).get(LOCK_ANNOTATION)

    def set_node_lock(self, node: str, value: str | None) -> None:
        self.core.patch_node(
            node, {"metadata": {"annotations": {LOCK_ANNOTATION: value}}}, _content_type=MERGE_PATCH
        )

    def patch_pod_annotations(self, name: str, namespace: str, annotations: Mapping[str, str | None]) -> None:
        self.core.patch_namespaced_pod(
            name, namespace, {"metadata": {"annotations": dict(annotations)}}, _content_type=MERGE_PATCH
        )

    def allocate(self, node: str) -> tuple[str, str]:
        """The HAMi device plugin's Allocate for the pod holding `node`'s lock (reference §4.10): pop
        the to-allocate container groups one by one (one kubelet Allocate per container), then set
        bind-phase `success` and release the lock (owner-checked CAS on resourceVersion). Returns the pod."""
        lock = self.node_lock(node)
        assert lock, f"node {node} is not locked: the device plugin cannot find the pod"
        _, namespace, name = lock.split(",")
        while True:
            annotations = self.pod_annotations(name, namespace)
            groups = annotations[keys.TO_ALLOCATE].split(";")
            index = next((i for i, g in enumerate(groups) if keys.VENDOR in g), None)
            if index is None:
                break
            groups[index] = ""
            self.patch_pod_annotations(name, namespace, {keys.TO_ALLOCATE: ";".join(groups)})
        self.patch_pod_annotations(name, namespace, {BIND_PHASE: PHASE_SUCCESS})
        self.release_lock(node, namespace, name)
        return namespace, name

    def pods(self) -> list[dict[str, Any]]:
        """A fresh list of every pod (all namespaces) as JSON."""
        response: Any = self.core.list_pod_for_all_namespaces(_preload_content=False)
        return list(orjson.loads(response.data)["items"])

    def device_usage(self) -> dict[str, dict[str, int]]:
        """GPU UUID -> {"slots", "memory", "cores"} held according to the pods' own annotations alone
        (`hami.io/vgpu-node` + `hami.io/vgpu-devices-allocated`, not Succeeded/Failed): the API's truth,
        computed without the scheduler's code, to check a replica's usage and oversubscription against."""
        usage: dict[str, dict[str, int]] = {}
        for pod in self.pods():
            annotations = pod["metadata"].get("annotations") or {}
            allocated = annotations.get(keys.ALLOCATED)
            if not annotations.get(ASSIGNED_NODE) or not allocated:
                continue
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            for container in decode_pod_single_device(allocated):
                for device in container:
                    used = usage.setdefault(device.uuid, {"slots": 0, "memory": 0, "cores": 0})
                    used["slots"] += 1
                    used["memory"] += device.usedmem
                    used["cores"] += device.usedcores
        return usage

    def rebuild_ledger(
        self, schedulers: tuple[str, ...] = ("hami-scheduler",), inflight_ttl: float = 60.0
    ) -> list[Entry]:
        """What a ledger rebuilt from a fresh pod list holds (`workers.reconcile.rebuild`, the worker's
        own rule), to compare a replica's live ledger with (`workers.reconcile.compare` / `same`)."""
        from workers.reconcile import Rules, rebuild

        rules = Rules(frozenset(schedulers), build_vendors(None), inflight_ttl)
        return list(rebuild(self.pods(), rules, time.time()).entries)

    def release_lock(self, node: str, namespace: str, name: str) -> bool:
        """HAMi's ReleaseNodeLock: delete the lock only if it names this pod, as a CAS on the node's
        resourceVersion, re-read and retried when the node changed meanwhile (409)."""
        for _ in range(10):
            current = self.node(node)
            value = (current["metadata"].get("annotations") or {}).get(LOCK_ANNOTATION, "")
            if not value.endswith(f",{namespace},{name}"):
                return False
            body = {
                "metadata": {
                    "annotations": {LOCK_ANNOTATION: None},
                    "resourceVersion": current["metadata"]["resourceVersion"],
                }
            }
            try:
                self.core.patch_node(node, body, _content_type=MERGE_PATCH)
            except kclient.ApiException as exc:
                if exc.status != 409:
                    raise
                continue
            return True
        raise AssertionError(f"could not release the lock on {node}: the node kept changing")


@pytest.fixture(scope="module")
def cluster(emulator: EmulatorProcess, kube: kclient.CoreV1Api) -> Cluster:
    return Cluster(emulator, kube)


@pytest.fixture(scope="session")
def worker_is_available() -> bool:
    """True when `python -m workers` (the real registration worker) can run."""
    return worker_available()


@pytest.fixture(scope="session", name="wait_for")
def wait_for_fixture() -> Callable[..., Any]:
    """`wait_for(predicate, timeout=15.0, what="...")`: poll until truthy, fail at the deadline."""
    return wait_for


# --- kube-scheduler's Lease (follow mode) -----------------------------------------------------------------


def micro_time(moment: float) -> str:
    """A Lease MicroTime as the API server writes it."""
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class SchedulerLease:
    """Plays the co-located kube-scheduler's part of the Lease that follow mode watches (through the real
    client, its own connection): `write(holder, renewed)` writes it once; `hold(holder)` writes it with
    renewTime now and keeps renewing every `period` from a thread, as a leading kube-scheduler does
    (holders look like `<pod>_<uuid>`); `stop()` stops the renewals and returns the last renewTime."""

    def __init__(
        self, kubeconfig: Path, name: str = "kube-scheduler", duration: int = 4, period: float = 1.0
    ) -> None:
        self.name, self.namespace, self.duration, self.period = name, "default", duration, period
        self._api: Any = kconfig.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
        self._leases = kclient.CoordinationV1Api(self._api)
        self._lock = threading.Lock()
        self._holder = ""
        self._renewed = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors: list[str] = []

    def write(self, holder: str, renewed: float) -> None:
        spec = {
            "holderIdentity": holder,
            "leaseDurationSeconds": self.duration,
            "acquireTime": micro_time(renewed),
            "renewTime": micro_time(renewed),
        }
        body: Any = {"metadata": {"name": self.name, "namespace": self.namespace}, "spec": spec}
        try:
            self._leases.patch_namespaced_lease(self.name, self.namespace, body, _content_type=MERGE_PATCH)
        except kclient.ApiException as exc:
            if exc.status != 404:
                raise
            self._leases.create_namespaced_lease(self.namespace, body)

    def hold(self, holder: str) -> None:
        self.stop()
        with self._lock:
            self._holder = holder
        self._renew()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="kube-scheduler-lease", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        with self._lock:
            now = time.time()
            self.write(self._holder, now)
            self._renewed = now

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self._renew()
            except Exception as exc:  # the test checks `errors` at the end
                self.errors.append(repr(exc))

    def stop(self) -> float:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        with self._lock:
            return self._renewed

    def close(self) -> None:
        self.stop()
        self._api.close()


@pytest.fixture
def scheduler_lease(emulator: EmulatorProcess) -> Iterator[SchedulerLease]:
    """A `SchedulerLease` ("kube-scheduler" in default, 4 s, renewed every 1 s); renewals stop at the end
    and must not have failed."""
    lease = SchedulerLease(emulator.kubeconfig)
    try:
        yield lease
    finally:
        lease.close()
    assert lease.errors == [], lease.errors


# --- the registration worker's part ----------------------------------------------------------------------


class RegistrarStandin:
    """Stands in for the registration worker (`python -m workers`) while it is being written.

    Every `interval` it lists nodes and ResourceQuotas through the real client, publishes the inventory
    snapshot with `app.state.snapshot.write` (a new generation only when something changed), and writes
    the status rows of `app.state.status` into the ledger with a fresh heartbeat. It does not reconcile
    reservations (tests here create fresh pods) and does not touch node annotations. `set_leader` and
    `set_synced` flip what the Gunicorn workers read, for tests that need to control leadership directly.
    """

    def __init__(
        self, kubeconfig: Path, state_dir: Path, *, interval: float = 0.5, identity: str = "registrar-standin"
    ) -> None:
        self.state_dir = state_dir
        self.interval = interval
        self.identity = identity
        self.leader = True
        self.synced = True
        self.vendors = build_vendors(None)
        self.generation = 0
        self._published: tuple[Any, ...] | None = None
        self._kube: Kube = connect(str(kubeconfig))
        self.ledger = Ledger(state_dir)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.errors: list[str] = []
        try:
            self.publish()
        except BaseException:
            self.ledger.close()
            self._kube.close()
            raise
        self._thread = threading.Thread(target=self._run, name="registrar-standin", daemon=True)
        self._thread.start()

    def publish(self) -> None:
        """One registration pass: snapshot (if changed) and the status rows."""
        with self._lock:
            nodes, _ = objects.list_raw(self._kube, "nodes")
            quotas, _ = objects.list_raw(self._kube, "resourcequotas")
            records: dict[str, NodeRecord] = {}
            broken: dict[str, str] = {}
            for node in nodes:
                meta = node["metadata"]
                try:
                    devices = decode_node(node, self.vendors)
                except NodeUnregistered as exc:
                    if str(exc) != "no device registration":
                        broken[meta["name"]] = str(exc)
                    continue
                zone = (meta.get("labels") or {}).get("topology.kubernetes.io/zone", "")
                records[meta["name"]] = NodeRecord(devices, int(meta["resourceVersion"]), zone)
            limits = core_quota.quota_limits(quotas, self.vendors)
            content = (tuple(sorted((n, r.devices) for n, r in records.items())), broken, limits)
            if content != self._published:
                self.generation += 1
                snapshot.write(
                    self.state_dir,
                    Snapshot(self.generation, records, broken, limits, written_at=time.time()),
                )
                self._published = content
            self._beat()

    def _beat(self) -> None:
        self.ledger.set_status(
            {
                "leader": self.leader,
                "identity": self.identity,
                "leader_identity": self.identity if self.leader else "another-replica",
                "lease_expires_at": 0,
                "synced": self.synced,
                "heartbeat": time.time(),
                "generation": self.generation,
            }
        )

    def set_leader(self, leader: bool) -> None:
        with self._lock:
            self.leader = leader
            self._beat()

    def set_synced(self, synced: bool) -> None:
        with self._lock:
            self.synced = synced
            self._beat()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.publish()
            except Exception as exc:  # no beat this round, like a stuck worker; `errors` says why
                self.errors.append(repr(exc))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.ledger.close()
        self._kube.close()


def worker_available() -> bool:
    """Whether the real registration worker (`python -m workers`) exists and imports."""
    try:
        importlib.import_module("workers.__main__")
    except ImportError:
        return False
    return True


# --- the extender service --------------------------------------------------------------------------------


@dataclass
class Reply:
    status: int
    body: bytes
    headers: Mapping[str, str]

    def json(self) -> Any:
        return orjson.loads(self.body)


@dataclass
class Service:
    """`gunicorn -c config/gunicorn.conf.py wsgi:app` with its own state and metrics directories."""

    process: ManagedProcess
    url: str
    state_dir: Path
    metrics_dir: Path
    env: dict[str, str]
    registrar: RegistrarStandin | None = None
    _ledger: Ledger | None = None
    _closed: bool = False
    worker: ManagedProcess | None = None  # the real registration worker, when started instead
    worker_env: dict[str, str] | None = None  # its environment (`start_worker` restarts it with it)
    http: urllib3.PoolManager = field(
        default_factory=lambda: urllib3.PoolManager(maxsize=64, retries=False, timeout=urllib3.Timeout(30.0))
    )

    def request(
        self, method: str, path: str, body: bytes | None = None, content_type: str | None = "application/json"
    ) -> Reply:
        headers = {"Content-Type": content_type} if content_type else {}
        response = self.http.request(method, f"{self.url}{path}", body=body, headers=headers)
        return Reply(response.status, response.data, dict(response.headers))

    def post_json(self, path: str, payload: Any) -> Reply:
        return self.request("POST", path, orjson.dumps(payload))

    def get(self, path: str) -> Reply:
        return self.request("GET", path, content_type=None)

    def filter(self, pod: Mapping[str, Any], node_names: list[str] | None) -> dict[str, Any]:
        reply = self.post_json("/filter", {"Pod": pod, "Nodes": None, "NodeNames": node_names})
        assert reply.status == 200, reply
        return dict(reply.json())

    def bind(self, pod: Mapping[str, Any], node: str) -> dict[str, Any]:
        meta = pod["metadata"]
        args = {
            "PodName": meta["name"],
            "PodNamespace": meta["namespace"],
            "PodUID": meta["uid"],
            "Node": node,
        }
        reply = self.post_json("/bind", args)
        assert reply.status == 200, reply
        return dict(reply.json())

    def debug_state(self, node: str | None = None) -> dict[str, Any]:
        reply = self.get(f"/debug/state?node={node}" if node else "/debug/state")
        assert reply.status == 200, reply
        return dict(reply.json())

    def metrics(self) -> str:
        reply = self.get("/metrics")
        assert reply.status == 200, reply
        return reply.body.decode()

    def status(self) -> ReplicaStatus:
        """The replica's status rows as the Gunicorn workers read them (`app.state.status`)."""
        return ReplicaStatus.from_rows(self.ledger.status())

    def start_worker(self) -> ManagedProcess:
        """(Re)start the real registration worker with the environment it was first started with (a
        container restart: same identity, state dir and log file)."""
        assert self.worker_env is not None, "this service runs no registration worker"
        assert self.worker is None or not self.worker.alive(), "the registration worker still runs"
        log_path = self.state_dir.parent / "workers.log"
        self.worker = ManagedProcess(
            f"workers:{self.url.rsplit(':', 1)[1]}", [PYTHON, "-m", "workers"], self.worker_env, log_path
        )
        return self.worker

    def terminate(self) -> None:
        """SIGTERM Gunicorn and the registration worker by PID without waiting (`close` waits), so that
        several services shut down in parallel."""
        for process in (self.process, self.worker):
            if process is not None:
                process.terminate()

    def kill(self, *, worker_only: bool = False) -> list[int]:
        """SIGKILL the replica by PID, as a node failure ends a pod: the registration worker, and unless
        `worker_only` the Gunicorn master and its workers. Returns once they are gone, with their PIDs."""
        pids = self.worker.kill() if self.worker is not None else []
        if not worker_only:
            self.http.clear()
            pids += self.process.kill()
        return pids

    @property
    def ledger(self) -> Ledger:
        """The shared reservation ledger (`$HAMI_STATE_DIR/ledger.db`), opened from the test process."""
        if self.registrar is not None:
            return self.registrar.ledger
        if self._ledger is None:
            self._ledger = Ledger(self.state_dir)
        return self._ledger

    def counter_by_worker(self, metric: str) -> dict[int, float]:
        """Worker PID -> that process's own total of counter `metric` (all label sets), read from the
        multiprocess files: shows which Gunicorn workers really served, independently of /metrics."""
        totals: dict[int, float] = {}
        for path in self.metrics_dir.glob("counter_*.db"):
            pid = int(path.stem.split("_")[-1])
            for key, value, *_ in MmapedDict.read_all_values_from_file(str(path)):
                if json.loads(key)[0] == metric:
                    totals[pid] = totals.get(pid, 0.0) + value
        return {pid: total for pid, total in totals.items() if total}

    def wait_ready(self, timeout: float = 20.0) -> None:
        wait_for(
            lambda: self._alive() and self.get("/readyz").status == 200, timeout, "the service to be Ready"
        )

    def _alive(self) -> bool:
        if not self.process.alive():
            pytest.fail(f"the service exited:\n{self.process.tail()}")
        return True

    def close(self) -> None:
        """Stop everything this service started (idempotent: a test may stop it early)."""
        if self._closed:
            return
        self._closed = True
        try:
            self.http.clear()
            self.terminate()  # both shut down at once; each is then waited for (and killed if need be)
            self.process.stop()
        finally:
            if self.worker is not None:
                self.worker.stop()
            if self.registrar is not None:
                self.registrar.close()
            if self._ledger is not None:
                self._ledger.close()


StartService = Callable[..., Service]


@pytest.fixture(scope="module")
def start_service(
    emulator: EmulatorProcess, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[StartService]:
    """Factory: `start_service(workers=2, threads=4, env={"HAMI_...": ...}, registrar="auto")` starts a
    Gunicorn service against the module's emulator and waits until it answers (and, with a registrar,
    until it is Ready). Everything is stopped at the end of the module, by PID."""
    started: list[Service] = []

    def start(
        *,
        workers: int = 2,
        threads: int = 4,
        env: Mapping[str, str] | None = None,
        registrar: str | None = "auto",
        wait_ready: bool = True,
    ) -> Service:
        workdir = tmp_path_factory.mktemp("service")
        state_dir, metrics_dir = workdir / "state", workdir / "metrics"
        port = free_port()
        service_env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("HAMI_") and k != "PROMETHEUS_MULTIPROC_DIR"
        }
        service_env.update(
            {
                "HAMI_BIND": f"127.0.0.1:{port}",
                "HAMI_WORKERS": str(workers),
                "HAMI_THREADS": str(threads),
                "HAMI_STATE_DIR": str(state_dir),
                "KUBECONFIG": str(emulator.kubeconfig),
                "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
                "HAMI_LOG_LEVEL": "WARNING",
                **(env or {}),
            }
        )
        process = ManagedProcess(
            f"gunicorn:{port}",
            [PYTHON, "-m", "gunicorn", "-c", "config/gunicorn.conf.py", "wsgi:app"],
            service_env,
            workdir / "gunicorn.log",
        )
        service = Service(process, f"http://127.0.0.1:{port}", state_dir, metrics_dir, service_env)
        started.append(service)
        wait_for(
            lambda: service._alive() and service.get("/healthz").status == 200, STARTUP_GUARD_S, "/healthz"
        )
        wait_for(
            lambda: len(_children(process.pid)) >= workers, STARTUP_GUARD_S, f"{workers} Gunicorn workers"
        )
        if registrar == "auto":
            registrar = "worker" if worker_available() else "standin"
        if registrar == "worker":
            service.worker_env = {
                **service_env,
                "HAMI_REGISTRATION_INTERVAL": "1s",
                "HAMI_STATE_METRICS_INTERVAL": "1s",  # HAMi's gauges on /metrics lag by at most this
                "HAMI_WORKER_METRICS_BIND": f"127.0.0.1:{free_port()}",
            }
            service.start_worker()
            if wait_ready:
                service.wait_ready(60.0)
        elif registrar == "standin":
            service.registrar = RegistrarStandin(emulator.kubeconfig, state_dir)
            if wait_ready:
                service.wait_ready()
        return service

    try:
        yield start
    finally:
        failed = getattr(request.node, "_integration_failed", False)
        for service in started:
            if failed:
                for process in (service.process, service.worker):
                    if process is not None:
                        sys.stderr.write(f"\n--- {process.name} log tail ---\n{process.tail(60)}\n")
            if not service._closed:
                service.terminate()  # all shut down in parallel; each is then waited for by close()
        with contextlib.ExitStack() as stack:  # every service is closed even if one close fails
            for service in started:
                stack.callback(service.close)
        if failed:
            sys.stderr.write(f"\n--- emulator log tail ---\n{emulator.tail(30)}\n")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Remember a failure on the module so module-scoped fixtures can print process logs at teardown."""
    report = yield
    if report.failed:
        module = item.getparent(pytest.Module)
        if module is not None:
            module._integration_failed = True  # type: ignore[attr-defined]
    return report
