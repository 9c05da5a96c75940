"""The demo's independent verdict (sim.workload.report) and its pod mix (sim.workload.mix), on hand-made
objects."""

from __future__ import annotations

from collections import Counter
from typing import Any

from app.core.codec import encode_register_json
from app.core.model import DeviceInfo
from sim.workload import report
from sim.workload.mix import KIND_LABEL, WEIGHTS, demo_pods

A, B = "GPU-a", "GPU-b"


def gpu_node(name: str = "n1", lock: bool = False) -> dict[str, Any]:
    devices = [
        DeviceInfo(u, i, 10, 1000, 100, "NVIDIA A100", 0, "hami-core", True) for i, u in enumerate((A, B))
    ]
    notes = {"hami.io/node-nvidia-register": encode_register_json(devices)}
    if lock:
        notes["hami.io/mutex.lock"] = "2026-01-01T00:00:00Z,default,p"
    return {"metadata": {"name": name, "annotations": notes, "labels": {}}}


def gpu_pod(
    name: str,
    allocated: str,
    node: str = "n1",
    init: int = 0,
    phase: str = "Running",
    init_done: bool = False,
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if init_done:
        status["initContainerStatuses"] = [{"state": {"terminated": {"exitCode": 0}}} for _ in range(init)]
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {KIND_LABEL: "fraction"},
            "annotations": {"hami.io/vgpu-devices-allocated": allocated, "hami.io/bind-phase": "success"},
        },
        "spec": {
            "nodeName": node,
            "initContainers": [{"name": f"i{i}"} for i in range(init)],
            "containers": [{"name": "main"}, {"name": "side"}],
        },
        "status": status,
    }


def test_init_containers_count_as_their_peak_until_they_finished() -> None:
    allocated = f"{A},NVIDIA,300,10:;{A},NVIDIA,500,0:;{A},NVIDIA,100,20:{B},NVIDIA,50,0:;;"
    pod = gpu_pod("p", allocated, init=2)
    assert report.pod_device_use(pod) == {A: (1, 500, 20), B: (1, 50, 0)}  # max(init peak, app sum)
    two_app = gpu_pod("q", f"{A},NVIDIA,100,20:;{A},NVIDIA,300,10:;;")
    assert report.pod_device_use(two_app) == {A: (2, 400, 30)}
    done = gpu_pod("p", allocated, init=2, init_done=True)
    assert report.pod_device_use(done) == {A: (1, 100, 20), B: (1, 50, 0)}


def test_oversubscription_misplaced_devices_and_locks_are_found() -> None:
    pods = [
        gpu_pod("a", f"{A},NVIDIA,600,50:;"),
        gpu_pod("b", f"{A},NVIDIA,500,60:;"),  # A: 1100 > 1000 MiB, 110 > 100 cores
        gpu_pod("c", f"{B},NVIDIA,900,0:;"),
        gpu_pod("d", f"{B},NVIDIA,900,0:;", phase="Succeeded"),  # terminated: not counted
        gpu_pod("e", f"{B},NVIDIA,1,0:;", node="n2"),  # B is not on n2
        gpu_pod("f", "GPU-x,NVIDIA,1,0"),  # too few fields
    ]
    pods[-1]["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] = "GPU-x,NVIDIA,1:;"
    unbound = gpu_pod("g", "")
    unbound["spec"]["nodeName"] = ""
    unbound["metadata"]["annotations"]["sim.hami.io/rejected"] = "unschedulable: nope"
    summary = report.summarize([*pods, unbound], [gpu_node("n1", lock=True), gpu_node("n2")])
    assert summary["oversubscribed_devices"] == 1
    (over,) = summary["oversubscribed"]
    assert (over["node"], over["device"], over["over"]) == ("n1", A, ["memory", "cores"])
    assert over["pods"] == ["default/a", "default/b"]
    assert summary["misplaced_devices"] == []  # n2 registers the same UUIDs in this fixture
    assert summary["undecodable_allocations"] == [
        "default/f: pod annotation format error, missing fields, do not use nodeName in task spec"
    ]
    assert (summary["pods_total"], summary["pods_bound"], summary["pods_unschedulable"]) == (7, 6, 1)
    assert summary["node_locks_held"] == 1 and summary["locked_nodes"] == ["n1"]
    assert summary["rejected"] == {"default/g": "unschedulable: nope"}
    n3 = gpu_node("n3")
    n3["metadata"]["annotations"]["hami.io/node-nvidia-register"] = "[]"
    lost = report.summarize([gpu_pod("e", f"{B},NVIDIA,1,0:;", node="n3")], [gpu_node("n1"), n3])
    assert lost["misplaced_devices"] == [f"default/e on n3 names {B}"]


def test_demo_mix_is_seeded_with_exact_proportions() -> None:
    pods = demo_pods(150, seed=7)
    assert pods == demo_pods(150, seed=7) and pods != demo_pods(150, seed=8)
    kinds = Counter(p.kind for p in pods)
    assert sum(kinds.values()) == 150 and set(kinds) == set(WEIGHTS)
    assert all(abs(kinds[k] - w * 150) < 1 for k, w in WEIGHTS.items())
    assert len({p.key for p in pods}) == 150
    small = Counter(p.kind for p in demo_pods(20))
    assert small["unfit"] >= 1 and sum(small.values()) == 20
    exclusive = next(p for p in pods if p.kind == "exclusive").manifest["spec"]["containers"][0]
    assert set(exclusive["resources"]["limits"]) == {"nvidia.com/gpu"}  # the webhook adds the cores
    init = next(p for p in pods if p.kind == "init").manifest["spec"]
    assert init["initContainers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
