"""The deferred allocation write (issue 20): /filter answers once the reservation is ASSUMEd and makes no API
request; the PATCH follows off kube-scheduler's serial path and /bind waits for its outcome.

Through the running service (HAMI_FILTER_WRITE=deferred, as `auto` picks it behind kube-scheduler's client
certificate), the real registration worker and the API emulator with its fault injection:
- no request on pods or nodes arrives while /filter runs, and the answer does not wait for a slow PATCH;
- a bind that arrives before the write finished waits for it, then binds;
- a write that fails (500, the pod deleted, the pod recreated under the same name: the UID precondition)
  forgets the reservation, and the bind fails without writing anything;
- a write still pending after HAMI_BIND_WRITE_WAIT fails the bind and forgets the reservation;
- two workers binding the same pod at once bind it once;
- a replica that lost the lease meanwhile: its write still lands, and the bind is refused until it leads.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

pytestmark = pytest.mark.integration

POD_PATCH = {"verb": "patch", "resource": "pods"}


@pytest.fixture(scope="module")
def service(start_service: Any, cluster: Any, emulator: Any, wait_for: Any) -> Any:
    emulator.reset()
    cluster.add_nodes(*(cluster.gpu_node(f"dw-{i}", gpus=1) for i in range(6)))
    svc = start_service(workers=2, env={"HAMI_FILTER_WRITE": "deferred", "HAMI_BIND_WRITE_WAIT": "2s"})
    wait_for(lambda: svc.debug_state()["nodes"] == 6, 15, "every node registered")
    return svc


def _filter(service: Any, cluster: Any, name: str) -> tuple[dict[str, Any], str]:
    pod = cluster.create_pod(cluster.gpu_pod(name, memory=30000))  # one pod fills a GPU's memory
    answer = service.filter(pod, [f"dw-{i}" for i in range(6)])
    assert answer["Error"] == "" and answer["NodeNames"], answer
    return pod, answer["NodeNames"][0]


def _state(service: Any, uid: str) -> str | None:
    entry = service.ledger.get(uid)
    return entry.state if entry is not None else None


def test_filter_sends_no_request_and_does_not_wait_for_the_write(
    service: Any, cluster: Any, emulator: Any, wait_for: Any
) -> None:
    pod = cluster.create_pod(cluster.gpu_pod("dw-quiet", memory=30000))
    with emulator.fault(**POD_PATCH, name="dw-quiet", action="delay", delay=1.5):
        emulator.clear_requests()
        started = time.time()
        answer = service.filter(pod, [f"dw-{i}" for i in range(6)])
        answered = time.time()
        assert answer["Error"] == "" and answer["NodeNames"], answer
        assert answered - started < 1.5, "the answer waited for the PATCH"
        during = [
            r
            for r in emulator.requests()
            if started <= r["time"] <= answered and r["resource"] in ("pods", "nodes")
        ]
        assert during == [], during
        assert _state(service, pod["metadata"]["uid"]) == "assumed"  # written after the answer
        wait_for(lambda: _state(service, pod["metadata"]["uid"]) == "confirmed", 10, "the write confirmed")
    annotations = cluster.pod_annotations("dw-quiet")
    assert annotations["hami.io/vgpu-node"] == answer["NodeNames"][0]
    assert annotations["hami.io/vgpu-devices-allocated"].endswith(",NVIDIA,30000,0:;")
    assert service.bind(cluster.pod("dw-quiet"), answer["NodeNames"][0]) == {"Error": ""}


def test_a_bind_that_arrives_first_waits_for_the_write(service: Any, cluster: Any, emulator: Any) -> None:
    with emulator.fault(**POD_PATCH, name="dw-early", action="delay", delay=0.8, count=1):
        pod, node = _filter(service, cluster, "dw-early")
        assert _state(service, pod["metadata"]["uid"]) == "assumed"
        assert service.bind(pod, node) == {"Error": ""}  # kube-scheduler's copy: no annotations yet
    assert cluster.pod("dw-early")["spec"]["nodeName"] == node
    assert _state(service, pod["metadata"]["uid"]) == "bound"


@pytest.mark.parametrize("failure", ["500", "deleted", "recreated"])
def test_a_failed_write_forgets_and_fails_the_bind(
    failure: str, service: Any, cluster: Any, emulator: Any, wait_for: Any
) -> None:
    name = f"dw-fail-{failure}"
    pod = cluster.create_pod(cluster.gpu_pod(name, memory=30000))
    uid = pod["metadata"]["uid"]
    rule = emulator.add_fault(**POD_PATCH, name=name, action="delay", delay=0.5, count=1)
    if failure == "500":
        emulator.add_fault(**POD_PATCH, name=name, action="error", status=500, count=1)
    answer = service.filter(pod, [f"dw-{i}" for i in range(6)])
    assert answer["Error"] == "", answer
    if failure != "500":  # while the PATCH is held: the pod goes (and comes back under a new UID)
        emulator.delete("pods", name, "default")
        if failure == "recreated":
            cluster.create_pod(cluster.gpu_pod(name, memory=30000))
    wait_for(lambda: _state(service, uid) is None, 10, "the failed write forgot the reservation")
    emulator.remove_fault(rule)
    answer_bind = service.bind(pod, answer["NodeNames"][0])
    assert answer_bind["Error"], answer_bind
    if failure == "recreated":  # the new incarnation got nothing written
        assert "hami.io/vgpu-node" not in cluster.pod_annotations(name)
    assert not any(r["uid"] == uid for r in service.debug_state(answer["NodeNames"][0])["reservations"])


def test_a_write_pending_past_the_bound_fails_the_bind(service: Any, cluster: Any, emulator: Any) -> None:
    with emulator.fault(**POD_PATCH, name="dw-slow", action="delay", delay=4.0, count=1):
        pod, node = _filter(service, cluster, "dw-slow")
        answer = service.bind(pod, node)
        assert "was not written within 2s; it will be filtered again" in answer["Error"], answer
        assert _state(service, pod["metadata"]["uid"]) is None  # forgotten by the failed bind
        assert not cluster.pod("dw-slow")["spec"].get("nodeName")


def test_two_workers_binding_one_pod_bind_it_once(service: Any, cluster: Any, emulator: Any) -> None:
    with emulator.fault(**POD_PATCH, name="dw-twice", action="delay", delay=0.5, count=1):
        pod, node = _filter(service, cluster, "dw-twice")
        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(lambda _: service.bind(pod, node), range(2)))
    assert all(a == {"Error": ""} for a in answers) or sorted(bool(a["Error"]) for a in answers) == [
        False,
        True,
    ]
    bindings = [
        r for r in emulator.requests() if r["path"].endswith("/dw-twice/binding") and r["status"] == 201
    ]
    assert len(bindings) == 1, bindings
    assert cluster.pod("dw-twice")["spec"]["nodeName"] == node


def test_a_write_lands_after_the_replica_lost_the_lease(
    service: Any, start_service: Any, cluster: Any, emulator: Any, wait_for: Any
) -> None:
    """The write was handed off while this replica led; it lands after the lease moved (exactly as HAMi's
    PATCH would have), and a bind reaching this replica is refused until it leads again — the new leader
    binds from the API's view instead (app/bind/usecase.py re-checks it there against its own ledger)."""
    standby = start_service(
        workers=1, registrar="standin", env={"HAMI_FILTER_WRITE": "deferred", "HAMI_BIND_WRITE_WAIT": "2s"}
    )
    assert standby.registrar is not None
    wait_for(lambda: standby.debug_state()["nodes"] == 6, 15, "the stand-in's inventory")
    with emulator.fault(**POD_PATCH, name="dw-lease", action="delay", delay=1.0, count=1):
        pod = cluster.create_pod(cluster.gpu_pod("dw-lease", memory=1000))
        answer = standby.filter(pod, [f"dw-{i}" for i in range(6)])
        assert answer["Error"] == "", answer
        standby.registrar.set_leader(False)
        uid = pod["metadata"]["uid"]
        wait_for(lambda: _state(standby, uid) == "confirmed", 10, "the write landed after the lease moved")
    assert cluster.pod_annotations("dw-lease")["hami.io/vgpu-node"] == answer["NodeNames"][0]
    refused = standby.bind(pod, answer["NodeNames"][0])
    assert "retry later" in refused["Error"], refused
    standby.registrar.set_leader(True)
    cluster.set_node_lock(answer["NodeNames"][0], None)  # an earlier test's bind: its device plugin is done
    answers: list[dict[str, Any]] = []

    def leading() -> bool:  # a refusal while the workers still read the old status writes nothing
        answers.append(standby.bind(pod, answer["NodeNames"][0]))
        return "not the leader" not in answers[-1]["Error"]

    wait_for(leading, 10, "leading again")
    assert answers[-1] == {"Error": ""}
