"""A stale copy of a bound pod sent to /filter never erases the pod's reservation (issue 28, finding 2).

With the deferred write (app/filter/write.py) /filter decides on kube-scheduler's copy of the pod. After a
bind whose answer kube-scheduler never got (lost or late) it requeues its pre-bind copy, which shows no
`spec.nodeName`; our bind went on and bound the pod. Before the fix the filter then replaced the pod's row
(an `assume` is INSERT OR REPLACE), its write got a 409 on the stale resourceVersion and its failure
forgot the row; on the no-fit path the filter forgot it directly. The running pod's devices left the
ledger and the next pod was placed on its GPU. Now (app/filter/rowguard.py, docs/ledger-writers.md) a
`bound` row is never replaced or forgotten by a filter, and a row whose bind outcome is unknown is replaced
only after a read of the pod shows it unbound: the stale copy is answered with an Error and the next pod
does not get the GPU.

Real Gunicorn (the deferred write, as `auto` picks it behind kube-scheduler's certificate), the API
emulator with its fault injection, the real registration worker — and, for the unknown outcome, the
worker's stand-in, whose absent pod watch leaves the row as the bind left it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

pytestmark = pytest.mark.integration

BINDING = {"verb": "create", "resource": "pods", "subresource": "binding"}
DEFERRED = {"HAMI_FILTER_WRITE": "deferred", "HAMI_BIND_WRITE_WAIT": "2s"}
NODES = ("sf-fit", "sf-full", "sf-other", "sf-lost")
MEMORY = 30000  # of a GPU's 32768 MiB: one pod fills it


@pytest.fixture(scope="module")
def service(start_service: Any, cluster: Any, emulator: Any, wait_for: Any) -> Any:
    emulator.reset()
    cluster.add_nodes(*(cluster.gpu_node(name, gpus=1) for name in NODES))
    svc = start_service(workers=2, registrar="worker", env=DEFERRED)
    wait_for(lambda: svc.debug_state()["nodes"] == len(NODES), 30, "every node registered")
    return svc


def _state(service: Any, uid: str) -> str | None:
    entry = service.ledger.get(uid)
    return entry.state if entry is not None else None


def _placed_and_bound(service: Any, cluster: Any, wait_for: Any, name: str, node: str) -> dict[str, Any]:
    """Filter, write, bind and Allocate one pod on `node`; returns kube-scheduler's pre-bind copy."""
    copy = cluster.create_pod(cluster.gpu_pod(name, memory=MEMORY))
    uid = copy["metadata"]["uid"]
    assert service.filter(copy, [node])["NodeNames"] == [node]
    wait_for(lambda: _state(service, uid) == "confirmed", 10, "the write confirmed")
    assert service.bind(copy, node) == {"Error": ""}
    cluster.allocate(node)  # the device plugin: bind-phase success, lock released
    wait_for(lambda: _state(service, uid) == "bound", 10, "the row bound")
    return copy


def _gpu_still_taken(service: Any, cluster: Any, node: str, name: str) -> None:
    answer = service.filter(cluster.create_pod(cluster.gpu_pod(name, memory=MEMORY)), [node])
    assert not answer.get("NodeNames"), f"the next pod was placed on the running pod's GPU: {answer}"


def test_a_stale_copy_of_a_bound_pod_keeps_its_row(service: Any, cluster: Any, wait_for: Any) -> None:
    copy = _placed_and_bound(service, cluster, wait_for, "sf-running", "sf-fit")
    answer = service.filter(copy, ["sf-fit"])  # kube-scheduler's requeued pre-bind copy
    assert "is already bound to node sf-fit" in answer["Error"], answer
    assert not answer.get("NodeNames") and not answer.get("FailedNodes"), answer
    uid = copy["metadata"]["uid"]
    wait_for(lambda: _state(service, uid) != "assumed", 10, "no write pending")  # (before the fix: a 409)
    assert _state(service, uid) == "bound"
    _gpu_still_taken(service, cluster, "sf-fit", "sf-next")
    assert _state(service, copy["metadata"]["uid"]) == "bound"


def test_a_stale_copy_that_fits_nowhere_keeps_the_row(service: Any, cluster: Any, wait_for: Any) -> None:
    _placed_and_bound(service, cluster, wait_for, "sf-filler", "sf-full")
    copy = _placed_and_bound(service, cluster, wait_for, "sf-running-2", "sf-other")
    answer = service.filter(copy, ["sf-full"])  # the copy fits nowhere it is offered: the no-fit path
    assert "is already bound to node sf-other" in answer["Error"], answer
    assert _state(service, copy["metadata"]["uid"]) == "bound"
    _gpu_still_taken(service, cluster, "sf-other", "sf-next-2")


def _fired(emulator: Any, rule_id: int) -> int:
    return next(r["fired"] for r in emulator.fault_report()["rules"] if r["id"] == rule_id)


def test_a_stale_copy_after_a_bind_of_unknown_outcome_reads_the_pod(
    service: Any, start_service: Any, cluster: Any, emulator: Any, wait_for: Any
) -> None:
    """The binding happened, its answer was lost and every re-read failed: the bind answers an Error and
    keeps the row, `confirmed` and marked `unknown`. kube-scheduler's requeued pre-bind copy is then
    filtered: the filter reads the pod once, finds it bound and refuses."""
    standin = start_service(workers=1, registrar="standin", env=DEFERRED)
    wait_for(lambda: standin.debug_state()["nodes"] == len(NODES), 30, "the stand-in's inventory")
    node, name = "sf-lost", "sf-unknown"
    copy = cluster.create_pod(cluster.gpu_pod(name, memory=MEMORY))
    uid = copy["metadata"]["uid"]
    assert standin.filter(copy, [node])["NodeNames"] == [node]
    wait_for(lambda: _state(standin, uid) == "confirmed", 10, "the write confirmed")
    held = emulator.add_fault(**BINDING, name=name, action="delay", delay=4.0, count=1)
    lost = emulator.add_fault(**BINDING, name=name, action="lost_response", count=1)
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(standin.bind, copy, node)
        wait_for(lambda: _fired(emulator, held) == 1, 15, "the binding to be under way")
        failing = emulator.add_fault(action="error", status=500, verb="get", resource="pods", name=name)
        answer = pending.result()
    for rule in (held, lost, failing):
        emulator.remove_fault(rule)
    assert "could not tell whether pod" in answer["Error"], answer
    assert cluster.pod(name)["spec"]["nodeName"] == node  # the binding happened
    entry = standin.ledger.get(uid)
    assert entry is not None and (entry.state, entry.bind) == ("confirmed", "unknown"), entry
    cluster.allocate(node)
    emulator.clear_requests()
    refused = standin.filter(copy, [node])
    assert f"is already bound to node {node}" in refused["Error"], refused
    reads = [r for r in emulator.requests() if r["verb"] == "get" and r["path"].endswith(f"/pods/{name}")]
    assert len(reads) == 1, reads  # one read of the pod, only in this rare case
    assert standin.ledger.get(uid) == entry
    _gpu_still_taken(standin, cluster, node, "sf-unknown-next")
