"""kube-scheduler's preempt verb through real HTTP against the service and the emulated API server
(docs/preemption.md): victims chosen by device usage, kube-scheduler's own victims kept, higher- or
equal-priority pods never chosen, nodes where nothing helps dropped; then the victim deleted, its
reservation released by the registration worker and the preemptor placed on the freed GPU.
"""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.integration

NODE, SPARE = "gpu-p", "gpu-r"
MEMORY = 32768
RESULT_KEYS = {"NodeNameToMetaVictims"}


def _pod(cluster: Any, name: str, memory: int, priority: int) -> dict[str, Any]:
    pod = cluster.gpu_pod(name, memory=memory)
    pod["spec"]["priority"] = priority
    return pod


def _place(service: Any, cluster: Any, pod: dict[str, Any], node: str) -> dict[str, Any]:
    created = cluster.create_pod(pod)
    assert service.filter(created, [node])["NodeNames"] == [node]
    assert service.bind(created, node) == {"Error": ""}
    cluster.allocate(node)
    return created


def _meta(*uids: str) -> dict[str, Any]:
    return {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": 0}


def _preempt_results(service: Any) -> dict[str, float]:
    """hami_scheduler_preempt_results_total by result, from /metrics."""
    return {
        sample.labels["result"]: sample.value
        for family in text_string_to_metric_families(service.metrics())
        for sample in family.samples
        if sample.name == "hami_scheduler_preempt_results_total"
    }


def _victims(answer: dict[str, Any]) -> dict[str, list[str]]:
    return {node: [p["UID"] for p in v["Pods"]] for node, v in answer["NodeNameToMetaVictims"].items()}


@pytest.fixture(scope="module")
def full(
    start_service: Any, cluster: Any, emulator: Any, wait_for: Any, worker_is_available: bool
) -> tuple[Any, dict[str, str]]:
    """GPUs binpacked. gpu-p: one GPU holds low-a (older) and low-b (newer), 16000 MiB each at priority 1,
    the other mid, 30000 MiB at priority 5. gpu-r: its one GPU held by equal, at the preemptor's priority."""
    assert worker_is_available  # the worker releases a deleted victim's reservation
    emulator.reset()
    cluster.add_nodes(cluster.gpu_node(NODE, gpus=2, memory=MEMORY), cluster.gpu_node(SPARE, gpus=1))
    service = start_service(registrar="worker", env={"HAMI_GPU_SCHEDULER_POLICY": "binpack"})
    wait_for(lambda: all(service.debug_state(n)["registered"] for n in (NODE, SPARE)), 15, "nodes registered")
    uids = {}
    for name, memory, priority, node in (
        ("low-a", 16000, 1, NODE),
        ("low-b", 16000, 1, NODE),
        ("mid", 30000, 5, NODE),
        ("equal", 30000, 10, SPARE),
    ):
        uids[name] = _place(service, cluster, _pod(cluster, name, memory, priority), node)["metadata"]["uid"]
    return service, uids


def test_no_body_is_a_400(full: Any) -> None:
    service, _ = full
    reply = service.request("POST", "/preempt", None)
    assert reply.status == 400


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"[]", b'{"Pod": {}, "NodeNameToMetaVictims": {"n": {"Pods": [{}]}}}', b'{"Pod": 3}'],
    ids=["not-json", "array", "victim-without-uid", "pod-not-object"],
)
def test_bad_input_is_an_error_with_no_node(full: Any, body: bytes) -> None:
    service, _ = full
    reply = service.request("POST", "/preempt", body)
    assert reply.status == 200
    answer = reply.json()
    assert answer["NodeNameToMetaVictims"] == {} and answer["Error"]


def test_a_pod_without_devices_keeps_kube_schedulers_victims(full: Any, cluster: Any) -> None:
    service, uids = full
    pod = cluster.gpu_pod("cpu-only", gpus=0)
    pod["metadata"]["uid"] = "uid-cpu-only"
    args = {"Pod": pod, "NodeNameToMetaVictims": {NODE: _meta(uids["low-a"])}}
    assert _victims(service.post_json("/preempt", args).json()) == {NODE: [uids["low-a"]]}


def test_device_aware_victims_then_the_preemptor_fits(full: Any, cluster: Any, wait_for: Any) -> None:
    service, uids = full
    preemptor = cluster.create_pod(_pod(cluster, "urgent", 20000, 10))
    assert service.filter(preemptor, [NODE, SPARE])["NodeNames"] is None  # full by memory on both nodes

    # kube-scheduler's own victims (chosen for what its in-tree filters check) are kept and count as freed:
    # with low-a gone, GPU 0 still lacks memory; low-b (priority 1) beats mid (priority 5) as the one more
    answer = service.post_json(
        "/preempt", {"Pod": preemptor, "NodeNameToMetaVictims": {NODE: _meta(uids["low-a"]), SPARE: _meta()}}
    ).json()
    assert set(answer) == RESULT_KEYS
    assert _victims(answer) == {NODE: [uids["low-a"], uids["low-b"]]}  # gpu-r: only an equal-priority pod

    # with no victims of kube-scheduler's (whole pods: nodeCacheCapable false), the fewest: mid alone frees
    # GPU 1 (low-a and low-b are two); the PodDisruptionBudget count is kube-scheduler's, passed through
    answer = service.post_json(
        "/preempt", {"Pod": preemptor, "NodeNameToVictims": {NODE: {"Pods": [], "NumPDBViolations": 1}}}
    ).json()
    assert answer["NodeNameToMetaVictims"] == {NODE: {"Pods": [{"UID": uids["mid"]}], "NumPDBViolations": 1}}

    freed = cluster.pod_annotations("mid")["hami.io/vgpu-devices-allocated"].split(",")[0]
    counted = _preempt_results(service)
    assert counted.get("victims", 0) >= 2 and counted.get("error", 0) >= 4  # this module's answers so far
    # kube-scheduler deletes the victim; the worker releases its reservation; the preemptor then fits there
    cluster.core.delete_namespaced_pod("mid", "default", grace_period_seconds=0)
    wait_for(
        lambda: all(r["uid"] != uids["mid"] for r in service.debug_state(NODE)["reservations"]),
        15,
        "the victim's reservation released",
    )
    result = service.filter(cluster.pod("urgent"), [NODE, SPARE])
    assert result["NodeNames"] == [NODE]
    assert service.bind(cluster.pod("urgent"), NODE) == {"Error": ""}
    cluster.allocate(NODE)
    allocated = cluster.pod_annotations("urgent")["hami.io/vgpu-devices-allocated"]
    assert allocated.startswith(f"{freed},NVIDIA,20000,")  # the GPU the victim held
    usage = cluster.device_usage()
    assert all(used["memory"] <= MEMORY and used["slots"] <= 10 for used in usage.values()), usage
