"""/filter and /bind act only for the pod kube-scheduler is scheduling (issue 11, findings 2-5).

Anyone who reached the scheduler verbs could act as the scheduler: name a running pod in a /bind without
its UID and erase its reservation (2), send a /filter body naming a running pod and rewrite its
allocation (3), re-bind a running pod to re-take its node's lock and reset its bind phase (4), or bind any
pending non-GPU pod of any scheduler to any node (5). Every case here is such a forged request against
the real service (Gunicorn, the real registration worker, the emulator): each must be answered with an
Error, write nothing to the API, and leave the victim's reservation where it was — and the GPU the victim
runs on must not be handed out again.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

pytestmark = pytest.mark.integration

NODE, OTHER = "gpu-victim", "gpu-elsewhere"
MEMORY = 32768
GPU = f"GPU-{NODE}-0"


@pytest.fixture(scope="module")
def service(start_service: Any, cluster: Any, emulator: Any, wait_for: Any) -> Any:
    emulator.reset()
    cluster.add_nodes(cluster.gpu_node(NODE, gpus=2, memory=MEMORY), cluster.gpu_node(OTHER, gpus=1))
    svc = start_service(registrar="worker")
    for node in (NODE, OTHER):
        wait_for(lambda node=node: svc.debug_state(node)["registered"], 30, f"{node} registered")
    return svc


@pytest.fixture(autouse=True)
def clean(service: Any, cluster: Any, wait_for: Any) -> Any:
    """Every test starts with no pod and an empty ledger, also after a failed one."""
    yield
    for pod in cluster.pods():
        meta = pod["metadata"]
        cluster.core.delete_namespaced_pod(meta["name"], meta["namespace"], grace_period_seconds=0)
    wait_for(lambda: not cluster.pods() and not service.ledger.all_entries(), 20, "no pods, no rows")
    if cluster.node_lock(NODE) is not None:
        cluster.set_node_lock(NODE, None)


def _running(service: Any, cluster: Any, wait_for: Any, name: str, memory: int = MEMORY) -> dict[str, Any]:
    """A pod filtered, bound and allocated through the service, and seen bound by the worker."""
    pod = cluster.create_pod(cluster.gpu_pod(name, memory=memory))
    assert service.filter(pod, [NODE])["NodeNames"] == [NODE]
    assert service.bind(pod, NODE) == {"Error": ""}
    assert cluster.allocate(NODE) == ("default", name)
    uid = pod["metadata"]["uid"]
    wait_for(lambda: cluster.pod(name)["metadata"]["annotations"]["hami.io/bind-phase"] == "success", 10)
    wait_for(lambda: service.ledger.get(uid) is not None and service.ledger.get(uid).state == "bound", 10)
    return cluster.pod(name)


def _victim_state(service: Any, cluster: Any, pod: dict[str, Any]) -> tuple[Any, ...]:
    live = cluster.pod(pod["metadata"]["name"])
    annotations = live["metadata"]["annotations"]
    row = service.ledger.get(pod["metadata"]["uid"])
    return (
        live["spec"].get("nodeName"),
        {k: v for k, v in annotations.items() if k.startswith("hami.io/")},
        None if row is None else (row.state, row.node, row.allocation),
        cluster.node_lock(NODE),
    )


def _gpu_still_taken(service: Any, cluster: Any, wait_for: Any, victim: str) -> None:
    """Both GPUs of NODE are full (the victim's and a filler's): a pod asking a whole GPU gets none."""
    probe = cluster.create_pod(cluster.gpu_pod(f"{victim}-probe", memory=MEMORY))
    answer = service.filter(probe, [NODE])
    assert answer["NodeNames"] in (None, []), f"the victim's GPU was handed out again: {answer}"
    for device, used in cluster.device_usage().items():
        assert used["memory"] <= MEMORY, f"{device} oversubscribed: {used}"


BIND_FORGERIES = [
    pytest.param({"PodUID": None, "Node": OTHER}, "carries no PodUID", id="no-uid-other-node"),
    pytest.param({"PodUID": None, "Node": NODE}, "carries no PodUID", id="no-uid-own-node"),
    pytest.param({"Node": OTHER}, "already bound to node", id="uid-other-node"),
    pytest.param({"PodUID": "0000-not-the-victim", "Node": NODE}, "not 0000-not-the-victim", id="wrong-uid"),
]


@pytest.mark.parametrize(("forged", "error"), BIND_FORGERIES)
def test_a_forged_bind_never_erases_a_running_pods_reservation(
    service: Any, cluster: Any, wait_for: Any, forged: dict[str, Any], error: str
) -> None:
    """Finding 2: /bind without the pod's UID, or for another node than it was filtered onto."""
    victim = _running(service, cluster, wait_for, "victim-2")
    _running(service, cluster, wait_for, "filler-2")
    before = _victim_state(service, cluster, victim)
    args = {"PodName": "victim-2", "PodNamespace": "default", "PodUID": victim["metadata"]["uid"], **forged}
    reply = service.post_json("/bind", {k: v for k, v in args.items() if v is not None})
    assert _victim_state(service, cluster, victim) == before
    _gpu_still_taken(service, cluster, wait_for, "victim-2")
    assert reply.status == 200 and error in reply.json()["Error"], reply.json()


def _forged_body(pod: dict[str, Any], *, uid: bool, unbound: bool) -> dict[str, Any]:
    body = copy.deepcopy(pod)
    if not uid:
        del body["metadata"]["uid"]
    if unbound:  # the body lies: the pod looks pending
        body["spec"].pop("nodeName", None)
        body["status"] = {"phase": "Pending"}
        for key in list(body["metadata"]["annotations"]):
            if key.startswith("hami.io/"):
                del body["metadata"]["annotations"][key]
    return body


FILTER_FORGERIES = [
    pytest.param(False, True, "carries no UID", id="no-uid"),
    pytest.param(True, False, "already bound to node", id="bound-pod"),
    pytest.param(True, True, "already bound to node", id="uid-and-a-lying-body"),
]


@pytest.mark.parametrize(("uid", "unbound", "error"), FILTER_FORGERIES)
def test_a_forged_filter_never_rewrites_a_running_pods_allocation(
    service: Any, cluster: Any, wait_for: Any, uid: bool, unbound: bool, error: str
) -> None:
    """Finding 3: a /filter body naming a running pod must not move its allocation."""
    victim = _running(service, cluster, wait_for, "victim-3")
    _running(service, cluster, wait_for, "filler-3")
    before = _victim_state(service, cluster, victim)
    body = {"Pod": _forged_body(victim, uid=uid, unbound=unbound), "Nodes": None, "NodeNames": [NODE, OTHER]}
    reply = service.post_json("/filter", body)
    assert _victim_state(service, cluster, victim) == before
    _gpu_still_taken(service, cluster, wait_for, "victim-3")
    assert reply.status == 200 and error in reply.json()["Error"], reply.json()
    assert reply.json()["NodeNames"] is None


def test_a_filter_never_writes_to_another_schedulers_pod(service: Any, cluster: Any) -> None:
    """Findings 3 and 5: a pending GPU pod of another scheduler is not ours to place."""
    foreign = cluster.create_pod(cluster.gpu_pod("foreign-3", memory=1000, scheduler="default-scheduler"))
    reply = service.post_json("/filter", {"Pod": foreign, "Nodes": None, "NodeNames": [NODE]})
    assert not any(k.startswith("hami.io/") for k in cluster.pod_annotations("foreign-3"))
    assert service.ledger.get(foreign["metadata"]["uid"]) is None
    assert "is not scheduled by hami-scheduler" in reply.json()["Error"], reply.json()


def test_rebinding_a_running_pod_takes_no_lock_and_keeps_its_bind_phase(
    service: Any, cluster: Any, wait_for: Any
) -> None:
    """Finding 4: /bind of a bound pod to its own node used to re-take the lock and set `allocating`,
    blocking every other bind on the node for up to twice the lock expiry."""
    victim = _running(service, cluster, wait_for, "victim-4", memory=1000)
    before = _victim_state(service, cluster, victim)
    assert before[3] is None and before[1]["hami.io/bind-phase"] == "success"
    for _ in range(3):
        assert service.bind(victim, NODE) == {"Error": ""}  # a retried bind: already done
    assert _victim_state(service, cluster, victim) == before
    assert cluster.node_lock(NODE) is None
    after = cluster.create_pod(cluster.gpu_pod("after-4", memory=1000))
    assert service.filter(after, [NODE])["NodeNames"] == [NODE]
    assert service.bind(after, NODE) == {"Error": ""}, "the node is locked by the re-bound pod"
    assert cluster.allocate(NODE) == ("default", "after-4")


def test_bind_refuses_a_pending_pod_of_another_scheduler(service: Any, cluster: Any, emulator: Any) -> None:
    """Finding 5: any pending non-GPU pod of any scheduler could be bound to any node."""
    pod = cluster.gpu_pod("system-5", namespace="kube-system", gpus=0, scheduler="default-scheduler")
    pod["spec"]["nodeSelector"] = {"no-such-label": "anywhere"}
    created = cluster.create_pod(pod)
    args = {"PodName": "system-5", "PodNamespace": "kube-system", "PodUID": created["metadata"]["uid"]}
    reply = service.post_json("/bind", {**args, "Node": NODE})
    assert "nodeName" not in cluster.pod("system-5", "kube-system")["spec"]
    assert "is not scheduled by hami-scheduler" in reply.json()["Error"], reply.json()
    ours = cluster.create_pod(cluster.gpu_pod("plain-5", gpus=0))
    assert service.bind(ours, NODE) == {"Error": ""}, "a non-GPU pod of ours is still bound"
    assert cluster.pod("plain-5")["spec"]["nodeName"] == NODE
