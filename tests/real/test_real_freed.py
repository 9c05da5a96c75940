"""Freed capacity is heard by the real kube-scheduler (docs/held-reservations.md, workers/freedtouch.py).

kube-scheduler retries a pod our /filter refused only on a cluster event some plugin registered interest
in. When a reservation goes away without such an event — the reservation of a pending pod deleted, a
phantom reservation the sweep releases — the pod refused for lack of those devices used to wait for the
five-minute flush of kube-scheduler's unschedulable queue (docs/gangs.md measured 3 min 27 s). The leader
now touches the node's scheduler-owned annotation `hami.io/capacity-freed`; the refused pod binds within
seconds.

One node with one GPU, HAMI_INFLIGHT_TTL 30 s. A `holder` pod holds the whole GPU unbound: it carries a
scheduling gate, so kube-scheduler leaves it alone, and the test asks our extender's /filter for it itself
(as kube-scheduler would, with its client certificate): our ledger reserves the GPU and the deferred write
annotates the pod. A `waiter` asking for the whole GPU is then refused by our filter. The reservation goes
(the holder deleted, or — left alone — swept as a phantom past the TTL), and the waiter must be bound within
`HEARD` seconds of it going.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from test_real_preemption import _pods, _reservations, _running, wait_for

from app.state.ledger import Ledger
from sim.cluster.harness import running_cluster
from sim.cluster.spec import ClusterSpec
from sim.cluster.stack import Stack
from sim.kit.kube import Kube, pod_path
from workers.freedtouch import FREED_ANNOTATION

pytestmark = [pytest.mark.integration, pytest.mark.real]
NODE = "gpu-node-01"
TTL = 30.0  # longer than SETTLE: the holder is swept only when a test wants it
HEARD = 15.0  # seconds from the release to the waiter bound: a touch (≤ 1 s), kube-scheduler's backoff
SETTLE = (
    12.0  # seconds after the refusal: kube-scheduler's backoff retries are over (podMaxBackoffSeconds 10)
)


def _gpu_pod(name: str, *, gated: bool = False) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "100"}
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "cuda", "resources": {"limits": limits}}]
    }
    if gated:
        spec["schedulingGates"] = [{"name": "example.com/held-by-the-test"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


@pytest.fixture(scope="module")
def cluster(real_binaries: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    options = ClusterSpec(
        control_plane="real",
        nodes=1,
        gpus_per_node=1,
        zones=1,
        service_env={"HAMI_INFLIGHT_TTL": f"{TTL:g}s"},
    )
    with running_cluster(tmp_path_factory.mktemp("freed"), options) as stack:
        yield stack


@pytest.fixture(autouse=True)
def clean(cluster: Stack) -> Iterator[None]:
    yield
    kube = cluster.kube
    assert kube is not None
    for pod in kube.list(pod_path("default"))[1]:
        kube.delete(f"{pod_path('default')}/{pod['metadata']['name']}", grace=0)
    wait_for(
        lambda: not kube.list(pod_path("default"))[1] and not _reservations(cluster),
        60,
        "a clean cluster",
        _none,
    )


def _none() -> None:
    return None


def _filter(stack: Stack, pod: dict[str, Any]) -> dict[str, Any]:
    """Our extender's /filter for `pod`, as kube-scheduler asks it (its client certificate)."""
    http, url = stack.extender_http()
    try:
        args = orjson.dumps({"Pod": pod, "NodeNames": [NODE]})
        answer = http.request(
            "POST", f"{url}/filter", body=args, headers={"Content-Type": "application/json"}
        )
        return dict(orjson.loads(answer.data))
    finally:
        http.clear()


def _refused(kube: Kube, name: str) -> bool:
    """kube-scheduler tried the pod and our filter refused it (its FailedScheduling names our reason)."""
    events = kube.list("/api/v1/namespaces/default/events")[1]
    return any(
        e["involvedObject"]["name"] == name
        and e.get("reason") == "FailedScheduling"
        and "Card" in (e.get("message") or "")
        for e in events
    )


def _held_then_refused(stack: Stack, holder: str, waiter: str) -> tuple[Kube, str]:
    """The holder reserved (through /filter) and annotated, the waiter refused by our filter; returns the
    holder's UID."""
    kube = stack.kube
    assert kube is not None
    created = kube.create(pod_path("default"), _gpu_pod(holder, gated=True))
    answer = _filter(stack, kube.get(f"{pod_path('default')}/{holder}"))
    assert answer.get("NodeNames") == [NODE], answer
    uid = created["metadata"]["uid"]
    wait_for(
        lambda: (
            "hami.io/vgpu-node"
            in (kube.get(f"{pod_path('default')}/{holder}")["metadata"].get("annotations") or {})
        ),
        20,
        "the holder annotated",
        _none,
    )
    assert uid in _reservations(stack)
    kube.create(pod_path("default"), _gpu_pod(waiter))
    wait_for(lambda: _refused(kube, waiter), 60, f"{waiter} refused by our filter", _none)
    # A pod refused while events arrived is retried after its backoff (at most 10 s by default) and refused
    # again: past that, it waits in the unschedulable pool, where only an event of interest moves it.
    time.sleep(SETTLE)
    assert not _running(_pods(kube).get(waiter))
    return kube, uid


def _bound_within(kube: Kube, name: str, since: float) -> float:
    wait_for(lambda: _running(_pods(kube).get(name)), HEARD, f"{name} bound after the release", _none)
    return time.monotonic() - since


def test_a_pending_pod_deleted_frees_its_devices_for_a_refused_pod(cluster: Stack) -> None:
    kube, uid = _held_then_refused(cluster, "holder", "waiter")
    label = (kube.get(f"/api/v1/nodes/{NODE}")["metadata"].get("annotations") or {}).get(FREED_ANNOTATION)
    kube.delete(f"{pod_path('default')}/holder", grace=0)
    released = time.monotonic()
    waited = _bound_within(kube, "waiter", released)
    assert uid not in _reservations(cluster)
    touched = (kube.get(f"/api/v1/nodes/{NODE}")["metadata"].get("annotations") or {}).get(FREED_ANNOTATION)
    assert touched and touched != label, "the node's annotation told kube-scheduler"
    print(f"waiter bound {waited:.1f}s after the holder's deletion")


def test_a_phantom_swept_frees_its_devices_for_a_refused_pod(cluster: Stack) -> None:
    kube, uid = _held_then_refused(cluster, "phantom", "waiter-2")
    wait_for(lambda: uid not in _reservations(cluster), TTL + 30, "the phantom swept", _none)
    released = time.monotonic()
    waited = _bound_within(kube, "waiter-2", released)
    annotations = kube.get(f"{pod_path('default')}/phantom")["metadata"].get("annotations") or {}
    assert "hami.io/vgpu-node" not in annotations, "the phantom's annotations released too"
    print(f"waiter-2 bound {waited:.1f}s after the sweep released the phantom")


def test_a_release_nobody_hears_leaves_the_refused_pod_waiting_until_a_node_annotation_changes(
    cluster: Stack,
) -> None:
    """The mechanism, without our touch: the holder's reservation is removed from the ledger behind the
    leader's back (no freed record), and the refused waiter keeps waiting — nothing kube-scheduler sees
    happened; then any change of a node annotation (kube-scheduler's `NodeUpdateNodeAnnotation`, which
    re-queues a pod an extender refused: workers/freedtouch.py) binds it."""
    kube, uid = _held_then_refused(cluster, "silent", "waiter-3")
    ledger = Ledger(cluster.workdir / "state")
    try:
        assert ledger.remove([uid]) == 1
    finally:
        ledger.close()
    deadline = time.monotonic() + 12.0
    while time.monotonic() < deadline:
        assert not _running(_pods(kube).get("waiter-3")), "something re-queued the refused pod"
        time.sleep(0.5)
    kube.patch(
        f"/api/v1/nodes/{NODE}", {"metadata": {"annotations": {"example.com/touched": str(time.time())}}}
    )
    _bound_within(kube, "waiter-3", time.monotonic())
