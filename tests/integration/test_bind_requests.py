"""API requests per scheduled pod (issue 20 scope 2): one filter + bind of a GPU pod behind kube-scheduler's
client certificate (HAMI_FILTER_WRITE=deferred) sends, on the pod and its node, exactly the allocation
PATCH, the node lock (one JSON patch: no GET of the node while it is free), the re-check's LIST, the
bind-phase PATCH and the Binding — no GET of the pod: the ledger keeps the write's answer for the bind
(app/bind/usecase.py `_written`). Before: 7 requests (+ GET pod, + GET node). And the failure paths that the
removed reads used to guard:
- the pod deleted and recreated under the same name after the write: the bind fails on the stamp's UID and
  resourceVersion preconditions and never binds (or stamps) the new incarnation;
- the node locked by another pod: HAMi's contention reason, the lock untouched (and the next bind on that
  node reads it first: the process remembers the contention a few seconds);
- two binds of one pod at once: one Binding, and the losing bind never releases the lock the bound pod
  (its device plugin) needs.

The registration worker is a stand-in (no pod watch): the ledger row and the kept answer stay while the
test deletes and recreates the pod, so the bind takes the path without a GET deterministically."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

import pytest

from app.core.nodelock import format_lock

pytestmark = pytest.mark.integration

NODES = [f"br-{i}" for i in range(8)]


@pytest.fixture(scope="module")
def service(start_service: Any, cluster: Any, emulator: Any, wait_for: Any) -> Any:
    emulator.reset()
    cluster.add_nodes(*(cluster.gpu_node(name, gpus=1) for name in NODES))
    env = {"HAMI_FILTER_WRITE": "deferred", "HAMI_BIND_WRITE_WAIT": "2s", "HAMI_BIND_LOCK_WAIT": "300ms"}
    svc = start_service(workers=1, threads=4, registrar="standin", env=env)  # one process: one memory
    wait_for(lambda: svc.debug_state()["nodes"] == len(NODES), 15, "every node registered")
    return svc


def _filtered(service: Any, cluster: Any, wait_for: Any, name: str) -> tuple[dict[str, Any], str]:
    """A pod filtered, its deferred write confirmed (one pod fills a GPU's memory: one pod per node)."""
    pod = cluster.create_pod(cluster.gpu_pod(name, memory=30000))
    cluster.emulator.clear_requests()  # from here: what the extender sends (create_pod read the pod)
    answer = service.filter(pod, NODES)
    assert answer["Error"] == "" and answer["NodeNames"], answer
    uid = pod["metadata"]["uid"]
    wait_for(lambda: _state(service, uid) == "confirmed", 10, "the write confirmed")
    return pod, answer["NodeNames"][0]


def _state(service: Any, uid: str) -> str | None:
    entry = service.ledger.get(uid)
    return entry.state if entry is not None else None


def _calls(emulator: Any, name: str, node: str) -> list[str]:
    """`VERB what` of every request the emulator answered about pod `name` or `node` (events aside)."""
    seen: list[str] = []
    for r in emulator.requests():
        path, query = r["path"], r["query"]
        if path.endswith(f"/pods/{name}"):
            seen.append(f"{r['method']} pod")
        elif path.endswith(f"/pods/{name}/binding"):
            seen.append(f"{r['method']} binding")
        elif path.endswith(f"/nodes/{node}"):
            seen.append(f"{r['method']} node {r['status']}")
        elif r["resource"] == "pods" and f"spec.nodeName={node}" in unquote(query):
            seen.append(f"{r['verb'].upper()} pods-on-node")
    return seen


def _release(cluster: Any, node: str) -> None:
    cluster.set_node_lock(node, None)  # what the device plugin's Allocate does (none runs here)


def test_one_scheduled_pod_costs_five_requests_and_no_read(
    service: Any, cluster: Any, emulator: Any, wait_for: Any
) -> None:
    pod, node = _filtered(service, cluster, wait_for, "br-count")
    assert service.bind(pod, node) == {"Error": ""}
    assert _calls(emulator, "br-count", node) == [
        "PATCH pod",  # the allocation (deferred write, UID + resourceVersion preconditions)
        "PATCH node 200",  # the node lock, taken while free: JSON patch test-absent + add
        "LIST pods-on-node",  # the re-check with the lock held (the fence between leaders)
        "PATCH pod",  # bind-phase allocating, on the write's resourceVersion
        "POST binding",
    ]
    assert cluster.pod("br-count")["spec"]["nodeName"] == node
    assert (cluster.node_lock(node) or "").endswith(",default,br-count")
    assert _state(service, pod["metadata"]["uid"]) == "bound"
    emulator.clear_requests()  # kube-scheduler's retry after a lost answer: read, nothing written
    assert service.bind(pod, node) == {"Error": ""}
    assert _calls(emulator, "br-count", node) == ["GET pod"]
    _release(cluster, node)


def test_a_pod_recreated_after_the_write_is_never_bound_with_the_old_allocation(
    service: Any, cluster: Any, emulator: Any, wait_for: Any
) -> None:
    pod, node = _filtered(service, cluster, wait_for, "br-again")
    emulator.delete("pods", "br-again", "default")
    fresh = cluster.create_pod(cluster.gpu_pod("br-again", memory=30000))
    assert fresh["metadata"]["uid"] != pod["metadata"]["uid"]
    emulator.clear_requests()
    answer = service.bind(pod, node)  # kube-scheduler binding the old incarnation
    # The stamp's preconditions: the emulator refuses the other UID as immutable (422); kube-apiserver checks
    # the resourceVersion first (409: tests/real/test_real_nodelock_patch.py), so the stamp re-reads the
    # pod and refuses it as "changed while it was being bound".
    assert "uid" in answer["Error"].lower() or "changed while" in answer["Error"], answer
    now = cluster.pod("br-again")
    assert now["metadata"]["uid"] == fresh["metadata"]["uid"] and not now["spec"].get("nodeName")
    assert not {"hami.io/bind-phase", "hami.io/vgpu-node"} & set(now["metadata"].get("annotations") or {})
    assert not any(r["path"].endswith("/binding") for r in emulator.requests())
    assert _state(service, pod["metadata"]["uid"]) is None  # forgotten
    # The lock value names namespace/name only, and the name now belongs to another pod, which may
    # re-enter it: the old incarnation's failure path leaves it (taken over once stale, app/core/nodelock).
    assert (cluster.node_lock(node) or "").endswith(",default,br-again")
    _release(cluster, node)


def test_a_lock_held_by_another_pod_is_hamis_contention(
    service: Any, cluster: Any, emulator: Any, wait_for: Any
) -> None:
    cluster.create_pod(cluster.gpu_pod("br-holder", memory=1))  # pending, unbound: an active holder
    pod, node = _filtered(service, cluster, wait_for, "br-blocked")
    theirs = format_lock(datetime.now(UTC), "default", "br-holder")
    cluster.set_node_lock(node, theirs)
    emulator.clear_requests()
    answer = service.bind(pod, node)
    assert answer["Error"].endswith(f"waiting for node {node} to be unlocked: node lock contention"), answer
    assert cluster.node_lock(node) == theirs
    assert _calls(emulator, "br-blocked", node)[0] == "PATCH node 422"  # the test-absent patch, refused
    assert not cluster.pod("br-blocked")["spec"].get("nodeName")
    assert _state(service, pod["metadata"]["uid"]) is None
    _release(cluster, node)
    # Filtered again onto the same node, now free: the process remembers the contention for a few seconds
    # (app/bind/wait.py), so this bind reads the node first instead of trying the blind take.
    assert service.filter(cluster.pod("br-blocked"), [node])["NodeNames"] == [node]
    wait_for(lambda: _state(service, pod["metadata"]["uid"]) == "confirmed", 10, "the write confirmed")
    emulator.clear_requests()
    assert service.bind(pod, node) == {"Error": ""}
    assert _calls(emulator, "br-blocked", node) == [
        "GET node 200",
        "PATCH node 200",
        "LIST pods-on-node",
        "PATCH pod",
        "POST binding",
    ]
    _release(cluster, node)


@pytest.mark.parametrize("attempt", range(3))
def test_two_binds_of_one_pod_bind_it_once_and_keep_its_lock(
    attempt: int, service: Any, cluster: Any, emulator: Any, wait_for: Any
) -> None:
    name = f"br-twice-{attempt}"
    pod, node = _filtered(service, cluster, wait_for, name)
    emulator.clear_requests()
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda _: service.bind(pod, node), range(2)))
    assert {"Error": ""} in answers, answers
    bindings = [
        r for r in emulator.requests() if r["path"].endswith(f"/{name}/binding") and r["status"] == 201
    ]
    assert len(bindings) == 1, bindings
    assert cluster.pod(name)["spec"]["nodeName"] == node
    assert (cluster.node_lock(node) or "").endswith(f",default,{name}")  # the device plugin still needs it
    assert _state(service, pod["metadata"]["uid"]) == "bound"
    _release(cluster, node)


def test_a_bind_from_a_stale_copy_of_a_pod_bound_meanwhile_gives_back_the_lock_it_took(
    service: Any, cluster: Any, emulator: Any, wait_for: Any
) -> None:
    """The race the emulator storm's forger found (`bind-bound-same-node`): a bind whose kept copy of the
    pod is from before another bind bound it and whose device plugin already released the node. It takes
    the free lock, its stamp's precondition fails, the re-read shows the pod bound to this node: it
    answers success as before, but gives the lock it took back (it used to keep it, holding the node for
    a pod that needs nothing more)."""
    name = "br-stale"
    pod, node = _filtered(service, cluster, wait_for, name)  # the ledger keeps the write's answer
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"name": node}}
    cluster.core.create_namespaced_pod_binding(name, "default", body, _preload_content=False)
    assert cluster.pod(name)["spec"]["nodeName"] == node and cluster.node_lock(node) is None
    emulator.clear_requests()
    assert service.bind(pod, node) == {"Error": ""}
    assert cluster.node_lock(node) is None
    assert "POST binding" not in _calls(emulator, name, node)
    assert _state(service, pod["metadata"]["uid"]) == "bound"


STAMP_HELD = (
    5.0  # seconds the first bind's bind-phase PATCH is held at the API (the second bind takes ~10 ms)
)


def test_a_bind_that_wrote_the_lock_keeps_it_when_a_second_bind_bound_the_pod_under_it(
    service: Any, cluster: Any, emulator: Any, wait_for: Any
) -> None:
    """The interleaving behind the flaky test above, forced: bind A (the ledger's kept copy) takes the free
    lock — it wrote the value — and its bind-phase PATCH is held at the API; bind B of the same pod reads
    the pod, finds the lock its own (re-enters it, writing nothing), stamps and binds. A's stamp then fails
    its resourceVersion precondition (409), the re-read shows the pod bound here: A answers success, and
    must not give back the lock it wrote, since B bound the pod under it and the device plugin (bind-phase
    still `allocating`) finds the pod through it. A used to release it: the node unlocked for the next bind
    before this pod's Allocate."""
    name = "br-under"
    pod, node = _filtered(service, cluster, wait_for, name)
    emulator.clear_requests()
    rule = dict(action="delay", delay=STAMP_HELD, method="PATCH", resource="pods", subresource="", name=name)
    with emulator.fault(**rule, count=1) as held, ThreadPoolExecutor(1) as pool:
        first = pool.submit(service.bind, pod, node)

        def parked() -> bool:  # A's stamp reached the API (and waits there): A wrote the lock before
            return any(r["id"] == held and r["fired"] == 1 for r in emulator.fault_report()["rules"])

        wait_for(parked, 15, "the first bind's bind-phase PATCH held at the API")
        assert (cluster.node_lock(node) or "").endswith(f",default,{name}")
        assert service.bind(pod, node) == {"Error": ""}  # B: re-enters A's lock, stamps, binds
        assert first.result(timeout=60) == {"Error": ""}  # A: finds the pod bound here
    calls = [(r["method"], r["path"].rsplit("/", 1)[-1], r["status"]) for r in emulator.requests()]
    pod_calls = [c for c in calls if c[1] in (name, "binding")]
    # The interleaving as forced (requests are logged when answered): B's stamp and binding, then A's stamp.
    assert pod_calls[-4:-1] == [("PATCH", name, 200), ("POST", "binding", 201), ("PATCH", name, 409)], calls
    assert ("PATCH", node, 422) in calls  # B's test-absent take was refused: A's value stands
    assert cluster.pod(name)["spec"]["nodeName"] == node
    assert (cluster.node_lock(node) or "").endswith(f",default,{name}")  # the device plugin still needs it
    assert _state(service, pod["metadata"]["uid"]) == "bound"
    _release(cluster, node)
