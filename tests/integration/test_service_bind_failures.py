"""Every /bind failure point leaves no lock of ours and no reservation (invariant 2, reference §5.1).

Table-driven with the emulator's fault injection: each case filters a fresh pod onto its own node (so it
holds a reservation and the HAMi annotations), breaks one API call of the bind sequence (pod lookup, node
lookup, the lock's CAS patch, the bind-phase patch, the binding POST) or makes the lock contended, calls
/bind, and then checks, from the API and from the ledger:
- the answer is an `Error` naming the failure (HTTP 200);
- the node carries no lock of ours (none at all, or the other holder's untouched value);
- the pod's reservation is gone (`/debug/state?node=` and the ledger file itself);
- the pod is not bound.
The exceptions are answers lost after the work happened — of the lock's CAS patch (re-read: the lock is
ours) or of the binding (re-read: the pod is bound here): those binds succeed, and the lock stays for the
device plugin, which then finds the pod through it.

The filter side of the same invariant: a decision whose pod annotations cannot be written is forgotten.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

pytestmark = pytest.mark.integration

LOCK_WAIT = "1s"


@dataclass(frozen=True)
class Case:
    id: str
    faults: tuple[dict[str, Any], ...]  # fault rules; "{pod}" and "{node}" are filled in
    error: str  # expected in the Error ("{pod}"/"{node}" filled in); "" = the bind succeeds
    contended: bool = False  # another pod holds the node's lock
    delete_pod: bool = False
    # rules added once the first rule of `faults` has fired, while that request is still held up by a
    # delay rule: they break what the bind does next, not what it already did
    then: tuple[dict[str, Any], ...] = ()


POD_GET = {"action": "error", "verb": "get", "resource": "pods", "name": "{pod}"}
NODE_PATCH = {"action": "error", "verb": "patch", "resource": "nodes", "name": "{node}"}
POD_PATCH = {"verb": "patch", "resource": "pods", "name": "{pod}"}
BINDING = {"verb": "create", "resource": "pods", "subresource": "binding", "name": "{pod}"}

CASES = [
    Case(
        "pod-lookup-404",
        ({**POD_GET, "status": 404, "message": 'pods "{pod}" not found'},),
        'pods "{pod}" not found',
    ),
    Case("pod-lookup-500", ({**POD_GET, "status": 500},), "Internal error occurred: injected fault"),
    Case("pod-deleted", (), 'pods "{pod}" not found', delete_pod=True),
    Case(  # the lock's first attempt, a JSON patch taking it while free (no read), fails too
        "node-lookup-500",
        (
            {**NODE_PATCH, "status": 500, "count": 1},
            {"action": "error", "verb": "get", "resource": "nodes", "name": "{node}", "status": 500},
        ),
        "failed to get node {node}",
    ),
    Case(
        "lock-contention",
        (),
        f"timed out after {LOCK_WAIT} waiting for node {{node}} to be unlocked: node lock contention",
        contended=True,
    ),
    Case("lock-patch-500", ({**NODE_PATCH, "status": 500},), "failed to set node lock (node={node})"),
    Case("lock-patch-409-storm", ({**NODE_PATCH, "status": 409},), "failed to set node lock (node={node})"),
    Case(
        "bind-phase-patch-500",
        ({**POD_PATCH, "action": "error", "status": 500},),
        "Internal error occurred: injected fault",
    ),
    Case("bind-phase-patch-answer-lost", ({**POD_PATCH, "action": "lost_response"},), "Connection aborted"),
    Case("binding-500", ({**BINDING, "action": "error", "status": 500},), "injected fault"),
    Case("binding-409", ({**BINDING, "action": "error", "status": 409},), "the object has been modified"),
    Case(
        "binding-500-lock-and-release-answers-lost",  # the CAS and the release happen; their answers drop
        (
            {**NODE_PATCH, "action": "lost_response", "count": 2},
            {**BINDING, "action": "error", "status": 500},
        ),
        "injected fault",
    ),
    Case(
        # the CAS happens but its answer is lost, and the re-reads that would recognise it fail: the bind
        # cannot know it holds the lock, so it must release it (owner-checked) anyway. The CAS is the
        # lock's first attempt (taken while free, without a read), so every read fails: HAMi's message
        "lock-answer-lost-then-node-reads-fail",
        (
            {**NODE_PATCH, "action": "delay", "delay": 1.0, "count": 1},
            {**NODE_PATCH, "action": "lost_response", "count": 1},
        ),
        "failed to get node {node}",
        then=(
            {
                "action": "error",
                "verb": "get",
                "resource": "nodes",
                "name": "{node}",
                "status": 500,
                "count": 5,
            },
        ),
    ),
    Case("lock-answer-lost", ({**NODE_PATCH, "action": "lost_response", "count": 1},), ""),
    Case("binding-answer-lost", ({**BINDING, "action": "lost_response"},), ""),
]


FILTER_PATCH_FAULTS = {"500": {"action": "error", "status": 500}, "409": {"action": "error", "status": 409}}


def _fill(value: Any, pod: str, node: str) -> Any:
    return value.replace("{pod}", pod).replace("{node}", node) if isinstance(value, str) else value


@pytest.fixture(scope="module")
def service(start_service: Any, cluster: Any, emulator: Any, wait_for: Any) -> Any:
    emulator.reset()
    cluster.add_nodes(*(cluster.gpu_node(f"node-{case.id}", gpus=1) for case in CASES))
    cluster.add_nodes(*(cluster.gpu_node(f"node-filter-{status}", gpus=1) for status in FILTER_PATCH_FAULTS))
    svc = start_service(env={"HAMI_BIND_LOCK_WAIT": LOCK_WAIT})
    expected = len(CASES) + len(FILTER_PATCH_FAULTS)
    wait_for(lambda: svc.debug_state()["nodes"] == expected, 15, "every node registered")
    return svc


def _reserved(service: Any, node: str, uid: str) -> bool:
    in_view = any(r["uid"] == uid for r in service.debug_state(node)["reservations"])
    in_ledger = service.ledger.get(uid) is not None
    assert in_view == in_ledger, "the worker's view and the ledger file disagree"
    return in_ledger


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bind_failure_leaves_no_lock_and_no_reservation(
    case: Case, service: Any, cluster: Any, emulator: Any, wait_for: Any
) -> None:
    node, name = f"node-{case.id}", f"pod-{case.id}"
    pod = cluster.create_pod(cluster.gpu_pod(name, memory=1000))
    uid = pod["metadata"]["uid"]
    assert service.filter(pod, [node])["NodeNames"] == [node]
    assert _reserved(service, node, uid)

    holder_lock = None
    if case.contended:
        cluster.create_pod(cluster.gpu_pod(f"holder-{case.id}", memory=1000))
        holder_lock = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())},default,holder-{case.id}"
        cluster.set_node_lock(node, holder_lock)
    if case.delete_pod:
        assert emulator.delete("pods", name, "default")

    def add(rules: tuple[dict[str, Any], ...]) -> list[int]:
        return [emulator.add_fault(**{k: _fill(v, name, node) for k, v in rule.items()}) for rule in rules]

    def fired() -> dict[int, int]:
        return {r["id"]: r["fired"] for r in emulator.fault_report()["rules"]}

    rule_ids = add(case.faults)
    try:
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(service.bind, pod, node)
            if case.then:
                wait_for(lambda: fired()[rule_ids[0]] >= 1, 15, "the first fault to fire")
                rule_ids += add(case.then)
            answer = pending.result()
        counts = fired()
    finally:
        for rule_id in rule_ids:
            emulator.remove_fault(rule_id)
    assert all(counts[i] >= 1 for i in rule_ids), "a fault never fired: the case tests less than it says"

    expected = _fill(case.error, name, node)
    lock = cluster.node_lock(node)
    if not expected:  # the lost answer of a binding that happened: success, lock kept for the plugin
        assert answer == {"Error": ""}
        assert lock is not None and lock.endswith(f",default,{name}")
        assert cluster.pod(name)["spec"]["nodeName"] == node
        assert service.ledger.get(uid).state == "bound"
        assert cluster.allocate(node) == ("default", name)
        assert cluster.node_lock(node) is None
        return

    assert expected in answer["Error"], answer
    assert lock == holder_lock, f"lock left on {node}: {lock}"
    assert not _reserved(service, node, uid)
    if not case.delete_pod:
        assert "nodeName" not in cluster.pod(name)["spec"]


@pytest.mark.parametrize("status", list(FILTER_PATCH_FAULTS))
def test_filter_that_cannot_write_its_decision_forgets_it(
    status: str, service: Any, cluster: Any, emulator: Any
) -> None:
    """The filter side of invariant 2: the assume is forgotten when the pod's annotations cannot be
    written, and the capacity is free again for the next pod."""
    node, name = f"node-filter-{status}", f"pod-filter-{status}"
    pod = cluster.create_pod(cluster.gpu_pod(name, gpus=1))  # a whole card: the node's only one
    rule = {**FILTER_PATCH_FAULTS[status], "verb": "patch", "resource": "pods", "name": name}
    with emulator.fault(**rule):
        answer = service.filter(pod, [node])
    assert answer["Error"] and answer["NodeNames"] is None, answer
    assert not _reserved(service, node, pod["metadata"]["uid"])
    assert "hami.io/vgpu-node" not in cluster.pod_annotations(name)
    other = cluster.create_pod(cluster.gpu_pod(f"{name}-next", gpus=1))
    assert service.filter(other, [node])["NodeNames"] == [node]
