"""The leader's ledger sweep never removes the row of a pod whose bind is landing (issue 19, finding 3).

The sweep removes an in-flight row once it is older than the in-flight TTL while the pod is still
unbound, and it judged a row "unchanged since it asked the API" by its state and age. The bind's
re-check rewrote the row keeping both, so a bind landing more than a TTL after its filter could have the
row it had just re-checked removed by a sweep: the pod was then bound with no row (its devices free for
the next filter) until the informer caught up. Now the re-check dates the row (the bind restarts the
in-flight TTL, as its `hami.io/bind-time` does for a rebuild) and the sweep compares row versions.

Real processes: the emulator and a Gunicorn service; the sweep is the registration worker's
`Reconciler.sweep` on the service's ledger file, with a 2 s TTL instead of 60 s. The binding call is
held up by the emulator so that the sweep runs while the bind is between its re-check and the binding.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from app.devices import build_vendors
from app.state.ledger import Ledger
from workers.reconcile import Rules
from workers.reconciler import Reconciler

pytestmark = pytest.mark.integration

NODES = {"rechecked-before-sweep": "gpu-sweep-before", "rechecked-during-sweep": "gpu-sweep-during"}
TTL = 2.0
RULES = Rules(frozenset({"hami-scheduler"}), tuple(build_vendors(None)), TTL)
BINDING_HELD = 4.0  # seconds the emulator holds the binding call: the sweep runs meanwhile


def _filtered(service: Any, cluster: Any, wait_for: Any, name: str) -> dict[str, Any]:
    pod = cluster.create_pod(cluster.gpu_pod(name, memory=1000))
    assert service.filter(pod, [NODES[name]])["NodeNames"] == [NODES[name]]  # a node of its own
    uid = pod["metadata"]["uid"]
    wait_for(
        lambda: (row := service.ledger.get(uid)) is not None and row.state == "confirmed", 15, "confirmed"
    )
    time.sleep(TTL + 0.5)  # the bind lands more than a TTL after its filter
    return cluster.pod(name)


def _bind_held(service: Any, cluster: Any, emulator: Any, wait_for: Any, pod: dict[str, Any]) -> Any:
    """Start the bind with its binding call held up; return once it has re-checked and stamped the pod."""
    name = pod["metadata"]["name"]
    emulator.add_fault(
        action="delay", delay=BINDING_HELD, verb="create", resource="pods", subresource="binding", name=name
    )
    pool = ThreadPoolExecutor(1)
    pending = pool.submit(service.bind, pod, NODES[name])
    pool.shutdown(wait=False)
    stamped = lambda: cluster.pod_annotations(name).get("hami.io/bind-phase") == "allocating"  # noqa: E731
    wait_for(lambda: pending.done() or stamped(), 15, "the bind's re-check and stamp")
    assert not pending.done(), pending.result()
    return pending


def _sweep(ledger: Ledger, cluster: Any, fetch: Callable[[str, str], Mapping[str, Any] | None]) -> None:
    """One sweep of the leader's worker, its informer showing every pod as the API has it now (unbound)."""
    informer = {p["metadata"]["uid"]: p for p in cluster.pods()}
    Reconciler(ledger, RULES, time.time).sweep(informer.get, fetch)


def _landed(service: Any, cluster: Any, pending: Future[Any], pod: dict[str, Any]) -> None:
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    assert pending.result(timeout=30) == {"Error": ""}
    assert cluster.pod(name)["spec"]["nodeName"] == NODES[name]
    row = service.ledger.get(uid)
    assert row is not None, "the sweep removed the row of a pod whose bind was landing"
    assert row.state == "bound"
    assert cluster.allocate(NODES[name]) == ("default", name)


@pytest.fixture(scope="module")
def service(start_service: Any, cluster: Any, emulator: Any, wait_for: Any) -> Any:
    emulator.reset()
    cluster.add_nodes(*(cluster.gpu_node(node, gpus=1) for node in NODES.values()))
    svc = start_service(registrar="standin")  # no reconciliation of its own: the test's sweep is the one
    wait_for(lambda: svc.debug_state()["nodes"] == len(NODES), 15, "registered")
    return svc


def test_a_sweep_after_the_bind_re_checked_keeps_the_row(
    service: Any, cluster: Any, emulator: Any, wait_for: Any
) -> None:
    """The sweep starts once the bind has re-checked: the row must not look past the TTL."""
    pod = _filtered(service, cluster, wait_for, "rechecked-before-sweep")
    pending = _bind_held(service, cluster, emulator, wait_for, pod)
    _sweep(service.ledger, cluster, lambda namespace, name: cluster.pod(name, namespace))
    _landed(service, cluster, pending, pod)


def test_a_bind_re_checking_while_the_sweep_asks_the_api_keeps_the_row(
    service: Any, cluster: Any, emulator: Any, wait_for: Any
) -> None:
    """The sweep has judged the row a suspect and is asking the API (outside its lock) when the bind
    re-checks and rewrites it: the answer, about the older row, must not remove the rewritten one."""
    pod = _filtered(service, cluster, wait_for, "rechecked-during-sweep")
    started: list[Any] = []

    def fetch(namespace: str, name: str) -> Mapping[str, Any] | None:
        if name == pod["metadata"]["name"]:
            started.append(_bind_held(service, cluster, emulator, wait_for, pod))
        return cluster.pod(name, namespace)  # unbound: the binding is held up

    _sweep(service.ledger, cluster, fetch)
    assert started, "the sweep never asked about the row: the case tests less than it says"
    _landed(service, cluster, started[0], pod)
