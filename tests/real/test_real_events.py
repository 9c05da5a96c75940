"""Who posts which event for a pod no node fits, on the real control plane (docs/compatibility.md, "Why every
FailedScheduling event appears twice").

- Our components post HAMi's `FilteringFailed` pair — one per reason key, then `no available node, …` — each
  once, though kube-scheduler calls `/filter` for the pod more than once.
- `FailedScheduling` is kube-scheduler's alone (events.k8s.io, action `Scheduling`, its own instance), and it
  posts two Event objects with the same note: one about the pod as created, one about the pod after its own
  `PodScheduled=False` status write (the only write to the pod in between: its managed fields say so), which
  requeued the extender-rejected pod. The test pins that mechanism, so a kube-scheduler that stops doing it
  (or a component of ours that starts posting FailedScheduling) fails here.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from sim.cluster.stack import Stack
from sim.kit.kube import pod_path

pytestmark = [pytest.mark.integration, pytest.mark.real]
NOTE = (
    "0/2 nodes are available: 2 2/2 CardInsufficientMemory. preemption: 0/2 nodes are available: "
    "2 No preemption victims found for incoming pod."
)


def _events(stack: Stack, uid: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(kube-scheduler's events.k8s.io FailedScheduling, the core/v1 FilteringFailed) about the pod."""
    assert stack.kube is not None
    new = stack.kube.list(
        "/apis/events.k8s.io/v1/namespaces/default/events", fieldSelector=f"regarding.uid={uid}"
    )[1]
    old = stack.kube.list("/api/v1/namespaces/default/events", fieldSelector=f"involvedObject.uid={uid}")[1]
    return (
        sorted((e for e in new if e["reason"] == "FailedScheduling"), key=lambda e: e["eventTime"]),
        [e for e in old if e["reason"] == "FilteringFailed"],
    )


def test_failed_scheduling_comes_twice_from_kube_scheduler_and_filtering_failed_once_each(
    small_cluster: Stack,
) -> None:
    kube = small_cluster.kube
    assert kube is not None
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "200000"}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "huge", "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "cuda", "resources": {"limits": limits}}]},
    }
    created = kube.create(pod_path("default"), pod)
    uid, born = created["metadata"]["uid"], created["metadata"]["resourceVersion"]
    deadline = time.monotonic() + 60
    while len(_events(small_cluster, uid)[0]) < 2:
        assert time.monotonic() < deadline, (
            f"expected two FailedScheduling events, got {_events(small_cluster, uid)[0]}"
        )
        time.sleep(0.3)
    time.sleep(5)  # and no third while nothing changes
    failed, filtering = _events(small_cluster, uid)
    assert len(failed) == 2
    assert {e["note"] for e in failed} == {NOTE}
    assert all(e["action"] == "Scheduling" and e["reportingController"] == "hami-scheduler" for e in failed)
    assert all(not e["reportingInstance"].startswith("hami-scheduler-0") for e in failed)  # not our replica
    first, second = (e["regarding"]["resourceVersion"] for e in failed)
    assert first == born and second != born  # the pod as created, then after kube-scheduler's status write
    now = kube.get(pod_path("default", "huge"))  # the API server returns managedFields; kubectl hides them
    fields = now["metadata"]["managedFields"]
    creator = fields[0]["manager"]
    writers = {(m["manager"], m.get("subresource", "")) for m in fields}
    assert writers == {(creator, ""), ("kube-scheduler", "status")}, fields  # nothing else wrote to the pod
    assert sorted(e["message"] for e in filtering) == [
        "2 nodes CardInsufficientMemory(gpu-node-01,gpu-node-02)",
        "no available node, 2 nodes do not meet",
    ]  # HAMi's pair, each once
    assert all(e.get("count", 1) == 1 for e in filtering)
