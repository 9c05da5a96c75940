"""Preemption on the real kube-scheduler (1.34, 1.37) with our extender's preempt verb (docs/preemption.md).

PriorityClasses low and high; one node with two GPUs full by memory with low-priority pods (GPU A: one pod
holding all of it; GPU B: two pods holding half each) and nearly full by CPU with a low-priority CPU pod.
A high-priority pod asks for one GPU's memory and some CPU. kube-scheduler's in-tree dry run can only find
the CPU pod (its filters ignore the GPU resources); our preempt verb adds the fewest GPU holders whose
memory makes the pod fit (the one pod on GPU A, not the two on GPU B). kube-scheduler deletes both victims
(its `Preempted` events name the preemptor and the node), the fake kubelet finishes the deletions, the
worker releases their reservations, and the preemptor binds there with GPU A's memory; no device is
oversubscribed at any moment.

The second test records the upstream limit: a pod short of GPU memory alone (no in-tree resource short)
never reaches the preempt verb — kube-scheduler's dry run finds no victim and gives up with "expected at
least one victim pod on node" (kubernetes#139270).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from app.core.codec import decode_pod_single_device
from sim.cluster.harness import running_cluster
from sim.cluster.spec import ClusterSpec
from sim.cluster.stack import Stack
from sim.kit.kube import Kube, pod_path

pytestmark = [pytest.mark.integration, pytest.mark.real]
CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
NO_VICTIM = 'preemption: expected at least one victim pod on node "gpu-node-01"'


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, check: Callable[[], None]) -> Any:
    """Poll `predicate`, running `check` (the no-oversubscription invariant) at every step."""
    deadline = time.monotonic() + timeout
    while True:
        check()
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.2)


def _priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def _pod(name: str, priority_class: str, percent: int | None, cpu: str = "100m") -> dict[str, Any]:
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": str(percent)} if percent else {}
    container = {"name": "main", "image": "cuda", "resources": {"limits": limits, "requests": {"cpu": cpu}}}
    spec: dict[str, Any] = {"priorityClassName": priority_class, "containers": [container]}
    if not percent:
        spec["schedulerName"] = "hami-scheduler"  # a CPU pod: our profile, kube-scheduler's own binder
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def _pods(kube: Kube) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in kube.list(pod_path("default"))[1]}


def _preempted(kube: Kube, message: str) -> set[str]:
    """The pods whose `Preempted` event (kube-scheduler's, on the victim) starts with `message`."""
    events = kube.list("/api/v1/namespaces/default/events")[1]
    return {
        e["involvedObject"]["name"]
        for e in events
        if e.get("reason") == "Preempted" and (e.get("message") or "").startswith(message)
    }


def _running(pod: dict[str, Any] | None) -> bool:
    annotations = (pod or {}).get("metadata", {}).get("annotations") or {}
    gpu = "nvidia.com/gpu" in str((pod or {}).get("spec", {}).get("containers"))
    return bool(
        pod
        and pod["spec"].get("nodeName")
        and (not gpu or annotations.get("hami.io/bind-phase") == "success")
    )


def _device_usage(pods: dict[str, dict[str, Any]]) -> dict[str, int]:
    """GPU UUID -> MiB held according to the pods' own allocation annotations (not finished pods)."""
    usage: dict[str, int] = {}
    for pod in pods.values():
        allocated = (pod["metadata"].get("annotations") or {}).get("hami.io/vgpu-devices-allocated")
        if allocated and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
            for container in decode_pod_single_device(allocated):
                for device in container:
                    usage[device.uuid] = usage.get(device.uuid, 0) + device.usedmem
    return usage


def _gpu_memory(kube: Kube) -> dict[str, int]:
    node = kube.get("/api/v1/nodes/gpu-node-01")
    devices = orjson.loads(node["metadata"]["annotations"]["hami.io/node-nvidia-register"])
    return {d["id"]: d["devmem"] for d in devices}


def _reservations(stack: Stack) -> dict[str, dict[str, Any]]:
    """uid -> our replica's reservation on gpu-node-01 (/debug/state, kube-scheduler's client certificate)."""
    http, url = stack.extender_http()
    try:
        state = orjson.loads(http.request("GET", f"{url}/debug/state?node=gpu-node-01").data)
    finally:
        http.clear()
    return {r["uid"]: r for r in state["reservations"]}


def _reserved_uids(stack: Stack) -> set[str]:
    """The UIDs our replica's ledger holds on the node."""
    return set(_reservations(stack))


def _setup(stack: Stack, gpu_pods: list[tuple[str, int]], cpu_pod: bool) -> tuple[Kube, Callable[[], None]]:
    kube = stack.kube
    assert kube is not None
    capacity = _gpu_memory(kube)
    assert len(capacity) == 2

    def not_oversubscribed() -> None:
        usage = _device_usage(_pods(kube))
        assert all(used <= capacity[uuid] for uuid, used in usage.items()), usage

    kube.create(CLASSES, _priority_class("low", 100))
    kube.create(CLASSES, _priority_class("high", 1000))
    if cpu_pod:
        kube.create(pod_path("default"), _pod("low-cpu", "low", None, cpu="90"))
    for name, percent in gpu_pods:  # one at a time: spread puts the first on one GPU, the rest on the other
        kube.create(pod_path("default"), _pod(name, "low", percent))
        wait_for(lambda n=name: _running(_pods(kube).get(n)), 60, f"{name} running", not_oversubscribed)
    return kube, not_oversubscribed


@pytest.mark.versions("1.34", "1.37", "1.38")
def test_preemptor_evicts_the_fewest_gpu_holders_and_binds(real_binaries: object, tmp_path: Path) -> None:
    options = ClusterSpec(control_plane="real", nodes=1, gpus_per_node=2, zones=1)
    with running_cluster(tmp_path / "run", options) as stack:
        kube, not_oversubscribed = _setup(
            stack, [("low-whole", 100), ("low-half-0", 50), ("low-half-1", 50)], True
        )
        wait_for(lambda: _running(_pods(kube).get("low-cpu")), 60, "low-cpu running", not_oversubscribed)
        before = _pods(kube)
        whole_gpu = decode_pod_single_device(
            before["low-whole"]["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"]
        )[0][0].uuid
        victims = {before[n]["metadata"]["uid"] for n in ("low-cpu", "low-whole")}
        assert victims <= _reserved_uids(stack) | {before["low-cpu"]["metadata"]["uid"]}

        kube.create(pod_path("default"), _pod("urgent", "high", 100, cpu="10"))
        wait_for(
            lambda: _running(_pods(kube).get("urgent")), 120, "urgent bound and allocated", not_oversubscribed
        )

        after = _pods(kube)
        # kube-scheduler preempted exactly these two for it on the node. Its nomination is no evidence on
        # every version: from 1.35 kube-apiserver clears status.nominatedNodeName at binding (feature gate
        # ClearingNominatedNodeNameAfterBinding), so a poll may never see it; the victims' events stay.
        preempted_for = f"Preempted by pod {after['urgent']['metadata']['uid']} on node gpu-node-01"
        wait_for(
            lambda: _preempted(kube, preempted_for) == {"low-cpu", "low-whole"},
            30,
            preempted_for,
            not_oversubscribed,
        )
        assert "low-cpu" not in after and "low-whole" not in after  # evicted; the fake kubelet finished them
        assert {"low-half-0", "low-half-1"} <= set(after)  # two pods are more victims than one
        urgent = after["urgent"]
        assert urgent["spec"]["nodeName"] == "gpu-node-01"
        allocated = decode_pod_single_device(
            urgent["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"]
        )
        assert allocated[0][0].uuid == whole_gpu  # the memory the victim freed
        reserved = _reserved_uids(stack)
        assert not victims & reserved and urgent["metadata"]["uid"] in reserved  # victims released
        not_oversubscribed()


# 1.38 asks the extender about zero-victim nodes (kubernetes#139270 fixed): there the pod preempts (issue 29)
@pytest.mark.versions("1.34", "1.37")
def test_gpu_memory_alone_never_reaches_the_preempt_verb(real_binaries: object, tmp_path: Path) -> None:
    options = ClusterSpec(control_plane="real", nodes=1, gpus_per_node=2, zones=1)
    with running_cluster(tmp_path / "run", options) as stack:
        kube, not_oversubscribed = _setup(stack, [("low-0", 100), ("low-1", 100)], False)
        kube.create(pod_path("default"), _pod("urgent", "high", 100))

        def refused() -> bool:
            conditions = _pods(kube)["urgent"]["status"].get("conditions") or []
            return any(NO_VICTIM in (c.get("message") or "") for c in conditions)

        wait_for(refused, 60, "kube-scheduler's preemption to give up", not_oversubscribed)
        time.sleep(3)
        pods = _pods(kube)
        assert {"low-0", "low-1"} <= set(pods) and not pods["urgent"]["spec"].get("nodeName")
        assert not any(p["metadata"].get("deletionTimestamp") for p in pods.values())
