"""Bind races the chaos storm (`python -m sim chaos`, docs/chaos.md) exposed, made deterministic with the
emulator's fault rules: real Gunicorn, the real registration worker, the real kubernetes client.

1. The binding happened but its answer was lost, and the re-read that would show it failed too: the bind
   cannot tell whether the pod is bound, so it must not release the node lock or forget the reservation —
   if the pod is bound, the device plugin finds it through that lock, and its capacity stays booked.
   (Seen in the storm: the lock released under a bound pod went to the next pod on the node, and the
   device plugin then served the first pod the second pod's devices.)
2. A pod deleted and recreated under the same name while its bind is in flight: the new incarnation
   re-enters the lock (it names namespace/name only), and the old incarnation's failing bind must not
   release it (the new pod is bound and waits for Allocate).
3. A pod whose earlier bind failed minutes ago binds again: between taking the lock and writing its new
   `hami.io/bind-time`, the pod still carries the old stamp. Another pod's bind must not judge the fresh
   lock's holder stale by that stamp and take the lock over (the storm then saw two pods bound and waiting
   for Allocate on one node, and the device plugin served one of them the other's devices).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

pytestmark = pytest.mark.integration

BINDING = {"verb": "create", "resource": "pods", "subresource": "binding"}


@pytest.fixture(scope="module")
def service(start_service: Any, cluster: Any, emulator: Any, wait_for: Any) -> Any:
    emulator.reset()
    cluster.add_nodes(cluster.gpu_node("node-lost", gpus=1), cluster.gpu_node("node-reborn", gpus=1))
    cluster.add_nodes(cluster.gpu_node("node-again", gpus=1))
    svc = start_service(registrar="worker", env={"HAMI_BIND_LOCK_WAIT": "1s"})
    wait_for(lambda: svc.debug_state()["nodes"] == 3, 30, "every node registered")
    return svc


def _fired(emulator: Any, rule_id: int) -> int:
    return next(r["fired"] for r in emulator.fault_report()["rules"] if r["id"] == rule_id)


def _lost_binding(emulator: Any, name: str) -> list[int]:
    """The binding is held 6 s (ample for the test to add the next rule), done, and its answer dropped.
    Both rules are armed before the bind is sent: armed after it, a bind that reached its binding between
    the two (a loaded machine) was held but answered, and nothing was re-read."""
    held = emulator.add_fault(**BINDING, name=name, action="delay", delay=6.0, count=1)
    return [held, emulator.add_fault(**BINDING, name=name, action="lost_response", count=1)]


def _unreadable(emulator: Any, wait_for: Any, name: str, held: int, reads_failing: int) -> int:
    """Once the binding is under way (`held`), the pod's reads start failing."""
    wait_for(lambda: _fired(emulator, held) == 1, 15, "the binding to be under way")
    rule = {"verb": "get", "resource": "pods", "name": name, "count": reads_failing}
    failing: int = emulator.add_fault(action="error", status=500, **rule)
    return failing


@pytest.mark.parametrize("reads_failing", [1, 50], ids=["one-reread-fails", "rereads-keep-failing"])
def test_lost_binding_answer_never_releases_the_lock_of_a_bound_pod(
    reads_failing: int, service: Any, cluster: Any, emulator: Any, wait_for: Any
) -> None:
    node, name = "node-lost", f"lost-{reads_failing}"
    pod = cluster.create_pod(cluster.gpu_pod(name, memory=1000))
    uid = pod["metadata"]["uid"]
    assert service.filter(pod, [node])["NodeNames"] == [node]
    rules = _lost_binding(emulator, name)
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(service.bind, pod, node)
        rules.append(_unreadable(emulator, wait_for, name, rules[0], reads_failing))
        answer = pending.result()
    fired = {r["id"]: r["fired"] for r in emulator.fault_report()["rules"]}
    for rule in rules:
        emulator.remove_fault(rule)
    assert fired[rules[2]] == min(reads_failing, 4), "the re-reads did not meet the failing reads"
    assert cluster.pod(name)["spec"]["nodeName"] == node  # the binding happened
    assert (cluster.node_lock(node) or "").endswith(f",default,{name}"), (
        "the lock of a bound pod was released"
    )
    assert service.ledger.get(uid) is not None, "the reservation of a bound pod was forgotten"
    if reads_failing == 1:
        assert answer == {"Error": ""}  # a re-read recognised the lost answer
    else:
        assert "could not tell" in answer["Error"], answer
    assert cluster.allocate(node) == ("default", name)
    wait_for(lambda: getattr(service.ledger.get(uid), "state", "") == "bound", 15, "the row to be bound")


def test_old_incarnation_never_releases_the_lock_its_successor_reentered(
    service: Any, cluster: Any, emulator: Any, wait_for: Any
) -> None:
    node, name = "node-reborn", "reborn"
    old = cluster.create_pod(cluster.gpu_pod(name, memory=1000))
    assert service.filter(old, [node])["NodeNames"] == [node]
    held = emulator.add_fault(**BINDING, name=name, action="delay", delay=5.0, count=1)
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(service.bind, old, node)
        wait_for(lambda: _fired(emulator, held) == 1, 15, "the old binding to be under way")
        assert emulator.delete("pods", name, "default")
        new = cluster.create_pod(cluster.gpu_pod(name, memory=1000))
        assert new["metadata"]["uid"] != old["metadata"]["uid"]
        assert service.filter(new, [node])["NodeNames"] == [node]
        assert service.bind(new, node) == {"Error": ""}
        assert not pending.done(), "the old binding must still be held: the new pod re-entered its lock"
        old_answer = pending.result()
    emulator.remove_fault(held)
    assert old_answer["Error"], "the old incarnation cannot have been bound"
    assert cluster.pod(name)["spec"]["nodeName"] == node
    assert (cluster.node_lock(node) or "").endswith(f",default,{name}"), "the new pod's lock was released"
    assert cluster.allocate(node) == ("default", name)
    assert service.ledger.get(old["metadata"]["uid"]) is None


def test_a_fresh_lock_is_not_taken_over_for_its_holders_old_bind_time(
    service: Any, cluster: Any, emulator: Any, wait_for: Any
) -> None:
    node = "node-again"
    again = cluster.create_pod(cluster.gpu_pod("again", memory=1000))
    cluster.patch_pod_annotations("again", "default", {"hami.io/bind-time": str(int(time.time()) - 300)})
    other = cluster.create_pod(cluster.gpu_pod("other", memory=1000))
    assert service.filter(again, [node])["NodeNames"] == [node]
    assert service.filter(other, [node])["NodeNames"] == [node]
    held = emulator.add_fault(action="delay", delay=3.0, verb="patch", resource="pods", name="again", count=1)
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(service.bind, again, node)
        wait_for(lambda: _fired(emulator, held) == 1, 15, "the bind-phase patch to be under way")
        assert (cluster.node_lock(node) or "").endswith(",default,again")
        contended = service.bind(other, node)
        assert pending.result() == {"Error": ""}
    emulator.remove_fault(held)
    assert "node lock contention" in contended["Error"], contended
    assert "nodeName" not in cluster.pod("other")["spec"]
    assert cluster.node_lock(node).endswith(",default,again")
    assert cluster.allocate(node) == ("default", "again")
