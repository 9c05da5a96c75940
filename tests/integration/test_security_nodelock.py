"""The node lock handover rule (HAMi #3096, #3047; app/core/nodelock.py) through the real /bind.

The device plugin finds the pod it allocates for through `hami.io/mutex.lock`, so handing an expired lock
to another pod while the holder still waits for its Allocate makes the plugin serve the wrong pod (#3096:
two pods ran with each other's memory limits). With HAMI_NODELOCK_EXPIRE=4s and no device plugin:

- holder A bound to the node, bind-phase `allocating`: every bind of B that ends before twice the expiry
  (measured from the lock's own timestamp) is refused as contention, including binds after the expiry;
  the first bind after twice the expiry takes the lock over;
- holder deleted, terminal (Failed) or assigned to another node: B takes the lock over at once;
- lock values no working clock or pod could have written (far future, no pod name): taken over at once.

HAMI_BIND_LOCK_WAIT is 1 ms, so every /bind is one decision, answered at once. The "at once" cases run
against a second service whose locks expire after 5 minutes, so no expiry can explain a takeover.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from app.core.nodelock import BIND_PHASE, PHASE_ALLOCATING, parse_lock

pytestmark = pytest.mark.integration

EXPIRE = 4.0


@pytest.fixture(scope="module")
def service(start_service: Any, emulator: Any) -> Any:
    """Locks expire after EXPIRE seconds."""
    emulator.reset()
    return start_service(
        registrar="worker", env={"HAMI_NODELOCK_EXPIRE": f"{EXPIRE:g}s", "HAMI_BIND_LOCK_WAIT": "1ms"}
    )


@pytest.fixture(scope="module")
def patient(service: Any, start_service: Any) -> Any:
    """Locks expire after HAMi's 5 minutes: a takeover here can only come from the holder's state."""
    return start_service(registrar="worker", env={"HAMI_NODELOCK_EXPIRE": "5m", "HAMI_BIND_LOCK_WAIT": "1ms"})


def gpu_node_ready(service: Any, cluster: Any, wait_for: Any, name: str) -> str:
    cluster.add_nodes(cluster.gpu_node(name, gpus=1))
    wait_for(lambda: service.debug_state(name)["registered"], 30, f"{name} registered")
    return name


def filtered(service: Any, cluster: Any, name: str, node: str) -> dict[str, Any]:
    """A GPU pod created and filtered onto `node` (so /bind accepts that node); returns the live pod."""
    pod = cluster.create_pod(cluster.gpu_pod(name, memory=1000, cores=10))
    answer = service.filter(pod, [node])
    assert answer["NodeNames"] == [node], answer
    return dict(cluster.pod(name))


def bound_holder(service: Any, cluster: Any, name: str, node: str) -> tuple[dict[str, Any], str]:
    """Pod `name` bound to `node` through /bind and left waiting for Allocate; returns it and the lock."""
    pod = filtered(service, cluster, name, node)
    assert service.bind(pod, node) == {"Error": ""}
    lock = cluster.node_lock(node)
    assert lock is not None and lock.endswith(f",default,{name}")
    annotations = cluster.pod_annotations(name)
    assert annotations[BIND_PHASE] == PHASE_ALLOCATING and cluster.pod(name)["spec"]["nodeName"] == node
    return pod, lock


@dataclass(frozen=True)
class Attempt:
    started: float
    ended: float
    error: str


def test_a_holder_waiting_for_allocate_keeps_its_expired_lock_until_twice_the_expiry(
    service: Any, cluster: Any, wait_for: Any
) -> None:
    node = gpu_node_ready(service, cluster, wait_for, "gpu-lock-wait")
    _, lock = bound_holder(service, cluster, "holder-wait", node)
    stamped = parse_lock(lock).time.timestamp()  # what the service measures the age from
    contender = filtered(service, cluster, "contender-wait", node)
    attempts: list[Attempt] = []
    while not attempts or attempts[-1].error:
        assert time.time() < stamped + 3 * EXPIRE + 30, f"never taken over: {attempts[-3:]}"
        started = time.time()
        error = service.bind(contender, node)["Error"]
        attempts.append(Attempt(started, time.time(), error))
        time.sleep(0.2)
    refused = [a for a in attempts if a.error]
    assert all("node lock contention" in a.error for a in refused)
    assert all(a.ended >= stamped + 2 * EXPIRE for a in attempts if not a.error)
    assert all(a.error for a in attempts if a.ended < stamped + 2 * EXPIRE)
    in_window = [a for a in refused if a.started > stamped + EXPIRE + 1 and a.ended < stamped + 2 * EXPIRE]
    assert in_window, "no bind was tried while the lock was expired but its holder still waited"
    assert (cluster.node_lock(node) or "").endswith(",default,contender-wait")


def _delete(cluster: Any, wait_for: Any, name: str) -> None:
    cluster.core.delete_namespaced_pod(name, "default")
    wait_for(lambda: name not in {p["metadata"]["name"] for p in cluster.pods()}, 15, f"{name} deleted")


def _fail(cluster: Any, wait_for: Any, name: str) -> None:
    cluster.core.patch_namespaced_pod_status(name, "default", {"status": {"phase": "Failed"}})


def _assign_elsewhere(cluster: Any, wait_for: Any, name: str) -> None:
    cluster.patch_pod_annotations(name, "default", {"hami.io/vgpu-node": "another-node"})


@pytest.mark.parametrize(
    "resolve",
    [_delete, _fail, _assign_elsewhere],
    ids=["holder-deleted", "holder-terminal", "holder-assigned-elsewhere"],
)
def test_a_lock_whose_holder_no_longer_needs_it_is_taken_over_at_once(
    resolve: Callable[[Any, Any, str], None], patient: Any, cluster: Any, wait_for: Any
) -> None:
    service = patient
    tag = resolve.__name__.strip("_").replace("_", "-")
    node = gpu_node_ready(service, cluster, wait_for, f"gpu-lock-{tag}")
    bound_holder(service, cluster, f"holder-{tag}", node)
    contender = filtered(service, cluster, f"contender-{tag}", node)
    assert "node lock contention" in service.bind(contender, node)["Error"], "a live holder keeps it"
    resolve(cluster, wait_for, f"holder-{tag}")
    assert service.bind(contender, node) == {"Error": ""}
    assert (cluster.node_lock(node) or "").endswith(f",default,contender-{tag}")


@pytest.mark.parametrize(
    ("tag", "value"),
    [
        ("legacy", "9999-12-31T23:59:59Z"),
        ("future", "9999-12-31T23:59:59Z,default,holder"),
        ("noname", "{now},default,"),
    ],
    ids=["legacy-far-future", "far-future", "no-pod-name"],
)
def test_a_lock_nobody_can_hold_is_taken_over_at_once(
    tag: str, value: str, patient: Any, cluster: Any, wait_for: Any
) -> None:
    service = patient
    node = gpu_node_ready(service, cluster, wait_for, f"gpu-lock-odd-{tag}")
    pod = filtered(service, cluster, f"binder-odd-{tag}", node)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    cluster.set_node_lock(node, value.replace("{now}", now))
    assert service.bind(pod, node) == {"Error": ""}
    assert (cluster.node_lock(node) or "").endswith(f",default,binder-odd-{tag}")
