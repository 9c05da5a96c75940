"""Pods of an adopted scheduler name count everywhere and are never written (app/core/adoption.py).

Through the running service, the real registration worker and the API emulator. Our scheduler is named
`hami-scheduler-py`; `hami-scheduler` (HAMi's default name) is adopted by default. On the node's two GPUs:
a running pod HAMi placed under its own name holds GPU 0 whole, in namespace `team` whose quota allows
40000 MiB; a pod of another scheduler carries a forged allocation of GPU 1. Then:
- the live ledger holds the adopted pod (and not the foreign one), as does a rebuild by a restarted worker
  that starts from a ledger where the adopted row was lost and the foreign one recorded;
- /filter gives a new whole-GPU pod GPU 1 (not GPU 0);
- the webhook's quota check counts the adopted pod's 32768 MiB;
- /bind refuses a pod of ours whose allocation claims GPU 0 (the re-check reads the ledger);
- /filter and /bind refuse the adopted pod itself and keep its row;
- the adopted pod's object is never written (its resourceVersion does not change);
- with HAMI_ADOPT_SCHEDULER_NAMES empty the same pod holds nothing (the rule is the setting, not luck).
"""

from __future__ import annotations

from typing import Any

import pytest

from app.core.model import DeviceUse
from app.state.ledger import BOUND, Entry

pytestmark = pytest.mark.integration

NODE = "gpu-adopt"
GPU0, GPU1 = f"GPU-{NODE}-0", f"GPU-{NODE}-1"
OURS = "hami-scheduler-py"
TEAM = "team"
WHOLE = "NVIDIA,32768,100:;"


def placed(name: str, scheduler: str, gpu: str, namespace: str = "default") -> dict[str, Any]:
    """A running pod a HAMi scheduler placed: its annotations exactly as HAMi's Filter and Bind wrote them
    and the device plugin left them (to-allocate emptied, bind-phase success)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"hami.io/vgpu-node": NODE},
            "annotations": {
                "hami.io/vgpu-node": NODE,
                "hami.io/vgpu-time": "1785000000",
                "hami.io/vgpu-devices-allocated": f"{gpu},{WHOLE}",
                "hami.io/vgpu-devices-to-allocate": ";",
                "hami.io/bind-phase": "success",
                "hami.io/bind-time": "1785000001",
            },
        },
        "spec": {
            "schedulerName": scheduler,
            "nodeName": NODE,
            "containers": [
                {
                    "name": "cuda",
                    "image": "cuda",
                    "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "100"}},
                }
            ],
        },
        "status": {"phase": "Running"},
    }


@pytest.fixture(scope="module")
def service(start_service: Any, cluster: Any, emulator: Any, wait_for: Any) -> Any:
    emulator.reset()
    cluster.add_nodes(cluster.gpu_node(NODE, gpus=2))
    cluster.core.create_namespace({"metadata": {"name": TEAM}})
    cluster.core.create_namespaced_resource_quota(
        TEAM, {"metadata": {"name": "gpu"}, "spec": {"hard": {"limits.nvidia.com/gpumem": "40000"}}}
    )
    cluster.create_pod(placed("from-hami", "hami-scheduler", GPU0, namespace=TEAM))
    cluster.create_pod(placed("foreign", "other-scheduler", GPU1))
    svc = start_service(registrar="worker", env={"HAMI_SCHEDULER_NAME": OURS})
    wait_for(lambda: svc.debug_state(NODE)["registered"], 30, f"{NODE} registered")
    return svc


def rows(service: Any) -> dict[str, Entry]:
    return {entry.name: entry for entry in service.ledger.all_entries()}


def test_the_adopted_pod_is_in_the_ledger_and_the_foreign_one_is_not(service: Any, wait_for: Any) -> None:
    row = wait_for(lambda: rows(service).get("from-hami"), 15, "the adopted pod's row")
    assert (row.state, row.node, row.namespace) == (BOUND, NODE, TEAM)
    assert row.uses == {GPU0: DeviceUse(slots=1, mem=32768, cores=100)}
    assert row.quota == {"nvidia.com/gpumem": 32768, "nvidia.com/gpucores": 100}
    assert "foreign" not in rows(service)


def test_filter_gives_a_whole_gpu_only_where_the_adopted_pod_is_not(service: Any, cluster: Any) -> None:
    pod = cluster.create_pod(cluster.gpu_pod("new-whole", cores=100, scheduler=OURS))
    assert service.filter(pod, [NODE])["NodeNames"] == [NODE]
    allocated = cluster.pod_annotations("new-whole")["hami.io/vgpu-devices-allocated"]
    assert allocated == f"{GPU1},NVIDIA,32768,100:;"
    second = cluster.create_pod(cluster.gpu_pod("no-room", cores=100, scheduler=OURS))
    answer = service.filter(second, [NODE])
    assert answer["NodeNames"] is None and NODE in answer["FailedNodes"]
    cluster.core.delete_namespaced_pod("new-whole", "default")
    cluster.core.delete_namespaced_pod("no-room", "default")


def test_the_webhook_quota_counts_the_adopted_pod(service: Any) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "quota-probe", "namespace": TEAM},
        "spec": {
            "containers": [
                {"name": "c", "image": "cuda", "resources": {"limits": {"nvidia.com/gpumem": "10000"}}}
            ]
        },
    }
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "quota-probe",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": TEAM,
            "operation": "CREATE",
            "userInfo": {"username": "someone"},
            "object": pod,
        },
    }
    response = service.post_json("/webhook", review).json()["response"]
    assert response["allowed"] is False  # 32768 held by the adopted pod + 10000 > 40000
    assert response["status"]["message"] == (
        "exceeding resource quota: limits.nvidia.com/gpumem in namespace team: used 32768, limit 40000, "
        "requested 10000"
    )
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"] = "7000"
    review["request"]["uid"] = "quota-probe-fits"
    assert service.post_json("/webhook", review).json()["response"]["allowed"] is True


def test_bind_refuses_an_allocation_on_the_adopted_pods_gpu(service: Any, cluster: Any) -> None:
    pod = cluster.create_pod(cluster.gpu_pod("claims-gpu0", cores=100, scheduler=OURS))
    cluster.patch_pod_annotations(  # as a previous leader that did not count the adopted pod would write
        "claims-gpu0",
        "default",
        {
            "hami.io/vgpu-node": NODE,
            "hami.io/vgpu-time": "1785000100",
            "hami.io/vgpu-devices-allocated": f"{GPU0},{WHOLE}",
            "hami.io/vgpu-devices-to-allocate": f"{GPU0},{WHOLE}",
        },
    )
    answer = service.bind(pod, NODE)
    assert answer["Error"] == (
        f"pod default/claims-gpu0 no longer fits on node {NODE} ({GPU0} would hold 65536 of 32768 memory); "
        "it will be filtered again"
    )
    assert cluster.node_lock(NODE) is None
    assert "nodeName" not in cluster.pod("claims-gpu0")["spec"]
    cluster.core.delete_namespaced_pod("claims-gpu0", "default")


def test_filter_and_bind_refuse_the_adopted_pod_and_keep_its_row(service: Any, cluster: Any) -> None:
    pod = cluster.pod("from-hami", TEAM)
    refusal = (
        f"pod {TEAM}/from-hami belongs to the adopted scheduler 'hami-scheduler': its allocation is counted, "
        f"never changed; only pods of '{OURS}' are scheduled here"
    )
    assert service.filter(pod, [NODE])["Error"] == refusal
    assert service.bind(pod, NODE) == {"Error": refusal}
    assert rows(service)["from-hami"].state == BOUND
    assert cluster.pod("from-hami", TEAM)["metadata"]["resourceVersion"] == pod["metadata"]["resourceVersion"]


def test_a_restarted_worker_rebuilds_with_the_adopted_pod(service: Any, cluster: Any, wait_for: Any) -> None:
    version = cluster.pod("from-hami", TEAM)["metadata"]["resourceVersion"]
    adopted = rows(service)["from-hami"]
    service.kill(worker_only=True)
    service.ledger.remove([adopted.uid])  # lost, and a faulty component recorded the foreign pod
    foreign = cluster.pod("foreign")
    service.ledger.upsert(
        [
            Entry(
                foreign["metadata"]["uid"],
                "default",
                "foreign",
                NODE,
                BOUND,
                {GPU1: DeviceUse(1, 32768, 100)},
            )
        ]
    )
    service.start_worker()
    service.wait_ready(60.0)
    wait_for(
        lambda: "from-hami" in rows(service) and "foreign" not in rows(service), 30, "the rebuilt ledger"
    )
    assert rows(service)["from-hami"].uses == adopted.uses
    # never written: not by the filter, the bind, the rebuild or the lock sweep
    assert cluster.pod("from-hami", TEAM)["metadata"]["resourceVersion"] == version


def test_without_adoption_the_same_pod_holds_nothing(
    start_service: Any, cluster: Any, wait_for: Any, service: Any
) -> None:
    service.close()  # one leader at a time on this emulator
    alone = start_service(
        registrar="worker", env={"HAMI_SCHEDULER_NAME": OURS, "HAMI_ADOPT_SCHEDULER_NAMES": ""}
    )
    wait_for(lambda: alone.debug_state(NODE)["registered"], 30, f"{NODE} registered")
    pod = cluster.create_pod(cluster.gpu_pod("double", cores=100, scheduler=OURS))
    pods = [cluster.create_pod(cluster.gpu_pod("double-2", cores=100, scheduler=OURS)), pod]
    chosen = set()
    for one in pods:
        assert alone.filter(one, [NODE])["NodeNames"] == [NODE]
        allocated = cluster.pod_annotations(one["metadata"]["name"])["hami.io/vgpu-devices-allocated"]
        chosen.add(allocated.split(",")[0])
    assert chosen == {GPU0, GPU1}  # the GPU HAMi's pod runs on is handed out again: a double allocation
    assert rows(alone).keys() == {"double", "double-2"}
