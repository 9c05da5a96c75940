"""workers/notices.py: the leader posts the webhook's notes as one pod event, for controller-made pods only.

The recorder is a real `EventRecorder` whose queueing step is kept in memory (no API server here); the
real-API path — the ReplicaSet-shaped pod created through kube-apiserver and our webhook, the event read
back — is tests/real/test_real_bad_input.py."""

from __future__ import annotations

from typing import Any

import pytest
from worker_builders import VENDORS

from app.k8s.events import WARNING, EventRecorder, PodRef
from workers import shapes
from workers.informers import ADDED, MODIFIED, Change
from workers.notices import REASON, AdmissionNotices

OWNER = [
    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-6f7", "uid": "rs-1", "controller": True}
]
CLAMPED = (
    "admitted with warnings: container main: nvidia.com/gpucores 150 is more than one whole device (100): "
    "it is treated as 100, as HAMi does"
)


class Recorded(EventRecorder):
    """Keeps what would be posted."""

    def __init__(self) -> None:
        super().__init__(kube=None, component="hami-scheduler")  # type: ignore[arg-type]
        self.events: list[tuple[PodRef, str, str, str]] = []

    def record(self, pod: PodRef, kind: str, reason: str, message: str) -> None:
        self.events.append((pod, kind, reason, message))


def pod(
    *, owners: list[dict[str, Any]] | None = OWNER, node: str = "", scheduler: str = "hami-scheduler"
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "web-6f7-x2", "namespace": "ml", "uid": "u1", "resourceVersion": "7"}
    if owners is not None:
        metadata["ownerReferences"] = owners
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "150"}
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "resources": {"limits": limits}}],
    }
    if node:
        spec["nodeName"] = node
    return shapes.pod_shape(VENDORS)({"metadata": metadata, "spec": spec, "status": {"phase": "Pending"}})


def notices(recorder: Recorded, *, leading: bool = True, listed: bool = True) -> AdmissionNotices:
    return AdmissionNotices(
        recorder, VENDORS, "hami-scheduler", leading=lambda: leading, listed=lambda: listed
    )


def test_a_new_controller_made_pod_gets_one_event_with_the_notes() -> None:
    recorder = Recorded()
    notices(recorder).handle([Change(ADDED, pod(), None)])
    assert recorder.events == [(PodRef("ml", "web-6f7-x2", "u1"), WARNING, REASON, CLAMPED)]


def test_the_shape_keeps_who_made_the_pod() -> None:
    assert pod()["metadata"]["ownerReferences"] == [{"kind": "ReplicaSet", "name": "web-6f7"}]
    assert "ownerReferences" not in pod(owners=None)["metadata"]


@pytest.mark.parametrize(
    ("change", "leading", "listed"),
    [
        pytest.param(Change(ADDED, pod(owners=None), None), True, True, id="direct-pod-its-client-was-told"),
        pytest.param(Change(ADDED, pod(), None), False, True, id="follower"),
        pytest.param(Change(ADDED, pod(), None), True, False, id="first-list-pods-were-told-before"),
        pytest.param(Change(MODIFIED, pod(), pod()), True, True, id="an-update"),
        pytest.param(Change(ADDED, pod(), pod()), True, True, id="known-before"),
        pytest.param(Change(ADDED, pod(node="n1"), None), True, True, id="already-bound"),
        pytest.param(Change(ADDED, pod(scheduler="hami-old"), None), True, True, id="adopted-name"),
    ],
)
def test_nothing_is_posted(change: Change, leading: bool, listed: bool) -> None:
    recorder = Recorded()
    notices(recorder, leading=leading, listed=listed).handle([change])
    assert recorder.events == []


def test_a_pod_without_notes_gets_no_event() -> None:
    quiet = pod()
    quiet["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpucores"] = "50"
    recorder = Recorded()
    notices(recorder).handle([Change(ADDED, quiet, None)])
    assert recorder.events == []


def test_a_failing_pod_does_not_stop_the_others() -> None:
    broken = pod()
    broken["spec"] = "not an object"  # pods.spec raises
    recorder = Recorded()
    notices(recorder).handle([Change(ADDED, broken, None), Change(ADDED, pod(), None)])
    assert [e[3] for e in recorder.events] == [CLAMPED]
