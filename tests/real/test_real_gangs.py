"""Gangs on the real kube-scheduler (1.37+) with the Workload API: all or nothing at our /filter
(docs/gangs.md).

kube-scheduler with the feature gate `GenericWorkload` schedules the pods of a `scheduling.k8s.io/v1beta1`
PodGroup with `schedulingPolicy.gang.minCount` in one pod group cycle: it runs the scheduling algorithm —
our /filter included — for each pod in turn and keeps its assumptions only when at least `minCount` fit.
Our /filter decides for the whole quorum when a member is filtered (app/filter/gang.py): when the
quorum's devices cannot be found, every node is refused with the gang's reason and nothing is reserved.

One node with four GPUs (96 CPUs), every GPU pod asking for whole GPUs, HAMI_GANG_TTL 3 s. At every poll no
device is claimed beyond its memory by the pods' allocation annotations.

- a gang of five cannot fit: at no poll does a member hold a reservation or a HAMi annotation; its events
  carry the gang's reason; a single pod created meanwhile binds within 30 s;
- a gang of two fits: both bound, each with a whole GPU of its own;
- two gangs of three compete for the four GPUs: one binds whole, the other never holds anything;
- a gang whose GPUs fit but whose CPU does not (kube-scheduler refuses its third member before our
  /filter): nothing of it is held once the gang TTL and a sweep have passed;
- a gang beside a stream of single pods: every single pod binds or is refused, nothing is oversubscribed
  at any poll, and the ledger equals a rebuild from the API at the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from test_real_preemption import _device_usage, _gpu_memory, _pods, _reservations, _running, wait_for

from app.core import podkeys
from app.core.codec import decode_pod_single_device
from config.settings import Settings
from sim.cluster.harness import running_cluster
from sim.cluster.spec import ClusterSpec
from sim.cluster.stack import Stack
from sim.controlplane.real import WORKLOAD_API_SINCE, minor_of
from sim.kit.kube import Kube, pod_path, pool_manager
from workers.worker import SWEEP_EVERY

pytestmark = [pytest.mark.integration, pytest.mark.real, pytest.mark.versions("1.37", "1.38")]
PODGROUPS = "/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups"
GANG_TTL = 3.0
GPUS = 4
OWNED = podkeys.declared(Settings().vendors)  # every key our filter writes on a pod


def _podgroup(name: str, min_count: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


def _gpu_pod(name: str, group: str | None, gpus: int = 1, cpu: str = "100m") -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(gpus), "nvidia.com/gpumem-percentage": "100"}
    resources = {"limits": limits, "requests": {"cpu": cpu}}
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "cuda", "resources": resources}]}
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def _gang(kube: Kube, group: str, size: int, cpu: str = "100m") -> list[str]:
    kube.create(PODGROUPS, _podgroup(group, size))
    names = [f"{group}-{i}" for i in range(size)]
    for name in names:
        kube.create(pod_path("default"), _gpu_pod(name, group, cpu=cpu))
    return names


def _held(pod: dict[str, Any], reserved: dict[str, Any]) -> bool:
    """Does an unbound pod hold anything of ours: a ledger row, or an annotation our filter writes?"""
    annotations = pod["metadata"].get("annotations") or {}
    return pod["metadata"]["uid"] in reserved or bool(podkeys.owned_of(annotations, OWNED))


class Watch:
    """The check run at every poll: no device oversubscribed (by the pods' own allocation annotations);
    `holders` records, per poll, the unbound pods holding a reservation or one of our annotations."""

    def __init__(self, stack: Stack) -> None:
        assert stack.kube is not None
        self.stack, self.kube = stack, stack.kube
        self.capacity = _gpu_memory(self.kube)
        assert len(self.capacity) == GPUS
        self.holders: set[str] = set()

    def __call__(self) -> None:
        pods = _pods(self.kube)
        usage = _device_usage(pods)
        assert all(used <= self.capacity[uuid] for uuid, used in usage.items()), usage
        reserved = _reservations(self.stack)
        for name, pod in pods.items():
            if not pod["spec"].get("nodeName") and _held(pod, reserved):
                self.holders.add(name)


def _scheduled_false(pod: dict[str, Any] | None) -> bool:
    conditions = (pod or {}).get("status", {}).get("conditions") or []
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False" for c in conditions)


def _gpus_of(pod: dict[str, Any]) -> list[str]:
    allocated = pod["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"]
    return [d.uuid for container in decode_pod_single_device(allocated) for d in container]


def _events(kube: Kube, name: str) -> list[str]:
    events = kube.list("/api/v1/namespaces/default/events")[1]
    return [e.get("message") or "" for e in events if e["involvedObject"].get("name") == name]


def _gangs(stack: Stack) -> dict[str, dict[str, Any]]:
    """Our replica's gangs (/debug/state?all=true, what `inspect --url` shows), by PodGroup name."""
    client = stack.workdir / "kube-scheduler-client"
    assert stack.ca_file is not None
    http = pool_manager(
        1, stack.ca_file.read_bytes(), client_cert=(str(client / "tls.crt"), str(client / "tls.key"))
    )
    try:
        url = stack.extender_urls.get(stack.service_url, stack.service_url)
        state = orjson.loads(http.request("GET", f"{url}/debug/state?all=true").data)
    finally:
        http.clear()
    return {g["name"]: g for g in state["gangs"]}


def _hold(seconds: float, watch: Callable[[], None]) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        watch()
        time.sleep(0.5)


@pytest.fixture(scope="module")
def gang_cluster(real_binaries: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    if minor_of(real_binaries.kubernetes_version) < WORKLOAD_API_SINCE:
        pytest.skip(
            f"the Workload API is Kubernetes >= 1.37, the control plane {real_binaries.kubernetes_version}"
        )
    options = ClusterSpec(
        control_plane="real",
        nodes=1,
        gpus_per_node=GPUS,
        zones=1,
        workload_api=True,
        service_env={"HAMI_GANG_TTL": f"{GANG_TTL:g}s"},
    )
    with running_cluster(tmp_path_factory.mktemp("gangs"), options) as stack:
        yield stack


@pytest.fixture(autouse=True)
def clean(gang_cluster: Stack) -> Iterator[None]:
    """Each test starts from an empty namespace: its pods and PodGroups deleted, their reservations gone
    (a deleted pending pod's at once: the worker's live DELETED event)."""
    yield
    kube = gang_cluster.kube
    assert kube is not None
    for pod in kube.list(pod_path("default"))[1]:
        kube.delete(f"{pod_path('default')}/{pod['metadata']['name']}", grace=0)
    for group in kube.list(PODGROUPS)[1]:
        kube.delete(f"{PODGROUPS}/{group['metadata']['name']}")
    wait_for(
        lambda: not kube.list(pod_path("default"))[1] and not _reservations(gang_cluster),
        60,
        "every pod and reservation gone",
        lambda: None,
    )


def test_a_gang_that_cannot_fit_holds_nothing(gang_cluster: Stack) -> None:
    watch = Watch(gang_cluster)
    kube = watch.kube
    names = _gang(kube, "huge", GPUS + 1)
    wait_for(lambda: all(_scheduled_false(_pods(kube).get(n)) for n in names), 60, "the gang refused", watch)
    reason = "gang default/huge: devices for 4 of 5 members"
    wait_for(
        lambda: any(reason in m for n in names for m in _events(kube, n)), 30, "the gang's reason", watch
    )
    kube.create(pod_path("default"), _gpu_pod("single", None))
    created = time.monotonic()
    wait_for(lambda: _running(_pods(kube).get("single")), 30, "the single pod running", watch)
    assert time.monotonic() - created <= 30
    _hold(2 * GANG_TTL + SWEEP_EVERY, watch)  # kube-scheduler retries the gang meanwhile
    assert not watch.holders & set(names), f"gang members held devices: {watch.holders}"
    pods = _pods(kube)
    assert not any(pods[n]["spec"].get("nodeName") for n in names)
    shown = _gangs(gang_cluster)["huge"]  # inspect --url
    assert (shown["min_count"], shown["members"], shown["bound"], shown["reserved"]) == (5, 5, 0, 0)
    assert shown["why"] == "gang default/huge: devices for 3 of 5 members"  # the single pod holds a GPU now


def test_a_gang_that_fits_binds_every_member(gang_cluster: Stack) -> None:
    watch = Watch(gang_cluster)
    kube = watch.kube
    names = _gang(kube, "fits", 2)
    wait_for(lambda: all(_running(_pods(kube).get(n)) for n in names), 60, "the gang running", watch)
    pods = _pods(kube)
    gpus = [gpu for n in names for gpu in _gpus_of(pods[n])]
    assert len(gpus) == 2 and len(set(gpus)) == 2  # one whole GPU each, two different GPUs
    assert {pods[n]["metadata"]["uid"] for n in names} <= set(_reservations(gang_cluster))


def test_two_gangs_competing_for_the_gpus(gang_cluster: Stack) -> None:
    watch = Watch(gang_cluster)
    kube = watch.kube
    first, second = _gang(kube, "red", 3), _gang(kube, "blue", 3)

    def one_gang_running() -> bool:
        pods = _pods(kube)
        return any(all(_running(pods.get(n)) for n in gang) for gang in (first, second))

    wait_for(one_gang_running, 60, "one gang running", watch)
    pods = _pods(kube)
    winner, loser = (first, second) if all(_running(pods.get(n)) for n in first) else (second, first)
    wait_for(lambda: all(_scheduled_false(_pods(kube).get(n)) for n in loser), 60, "the loser refused", watch)
    _hold(GANG_TTL + SWEEP_EVERY, watch)
    pods = _pods(kube)
    assert not any(pods[n]["spec"].get("nodeName") for n in loser)
    assert all(_running(pods[n]) for n in winner)
    assert not watch.holders & set(loser), f"the losing gang held devices: {watch.holders}"


def test_a_gang_whose_cpu_does_not_fit_holds_nothing_after_the_gang_ttl(gang_cluster: Stack) -> None:
    """Three members of 40 CPUs each on a 96-CPU node: kube-scheduler's own filters refuse the third, so it
    never reaches our /filter; the two it did are released within the gang TTL plus one sweep."""
    watch = Watch(gang_cluster)
    kube = watch.kube
    names = _gang(kube, "cpu", 3, cpu="40")
    wait_for(lambda: all(_scheduled_false(_pods(kube).get(n)) for n in names), 60, "the gang refused", watch)
    _hold(GANG_TTL + SWEEP_EVERY + 3, watch)
    assert watch.holders & set(names), "our /filter never reserved for the gang: nothing was tested"

    def released() -> bool:
        reserved = _reservations(gang_cluster)
        return not any(_held(p, reserved) for n, p in _pods(kube).items() if n in names)

    wait_for(released, GANG_TTL + SWEEP_EVERY + 5, "nothing of the gang held", watch)
    # kube-scheduler keeps retrying the gang (its backoff, capped at 10 s); our filter saw its quorum placed
    # and not bound, so it holds nothing for the gang for RETRY_FIRST (30 s) before it places it again

    def nothing_held() -> None:
        watch()
        assert released(), "the gang held devices again after it was released"

    _hold(3 * GANG_TTL + 5, nothing_held)
    abandoned = "kube-scheduler did not bind the quorum placed for it"
    assert any(abandoned in m for n in names for m in _events(kube, n))
    assert abandoned in _gangs(gang_cluster)["cpu"]["why"]


def test_a_gang_beside_a_stream_of_single_pods(gang_cluster: Stack) -> None:
    """A gang of three and twelve single one-GPU pods arriving one every half second on four GPUs: each
    single pod binds or waits refused, the gang binds whole or not at all, nothing is ever oversubscribed,
    and our ledger equals a rebuild from the API at the end."""
    watch = Watch(gang_cluster)
    kube = watch.kube
    names = _gang(kube, "mixed", 3)
    singles = [f"single-{i}" for i in range(12)]
    for name in singles:
        kube.create(pod_path("default"), _gpu_pod(name, None))
        _hold(0.5, watch)

    def settled() -> bool:
        pods = _pods(kube)
        running = [n for n in pods if _running(pods[n])]
        return len(running) == GPUS and all(
            _running(pods[n]) or _scheduled_false(pods[n]) for n in [*names, *singles]
        )

    wait_for(settled, 90, "four pods running, the rest refused", watch)
    pods = _pods(kube)
    bound = [n for n in names if pods[n]["spec"].get("nodeName")]
    assert len(bound) in (0, len(names)), f"a partial gang bound: {bound}"
    _hold(GANG_TTL + SWEEP_EVERY, watch)
    reserved = _reservations(gang_cluster)
    running = {p["metadata"]["uid"] for p in _pods(kube).values() if _running(p)}
    assert set(reserved) == running  # nothing held for an unbound pod once the TTLs passed


def test_a_pod_refused_for_a_gang_binds_soon_after_the_gang_is_deleted(gang_cluster: Stack) -> None:
    """A gang whose GPUs fit but whose CPU does not holds its plan and its members' reservations for a
    moment; a two-GPU pod created then is refused (only one GPU is not held). Deleting the gang frees them
    at once (its pending members' rows, its plan) and the leader's touch of the node makes kube-scheduler
    try the pod again: it binds within 5 s."""
    watch = Watch(gang_cluster)
    kube = watch.kube
    names = _gang(kube, "cpu-hold", 3, cpu="40")

    def gang_holds() -> bool:
        reserved = _reservations(gang_cluster)
        return sum(_held(p, reserved) for n, p in _pods(kube).items() if n in names) >= 2

    wait_for(gang_holds, 30, "the gang holding two members' GPUs", watch)
    kube.create(pod_path("default"), _gpu_pod("waiting", None, gpus=2))
    wait_for(lambda: _scheduled_false(_pods(kube).get("waiting")), 30, "the pod refused", watch)
    assert not _pods(kube)["waiting"]["spec"].get("nodeName")
    for name in names:
        kube.delete(f"{pod_path('default')}/{name}", grace=0)
    kube.delete(f"{PODGROUPS}/cpu-hold")
    deleted = time.monotonic()
    wait_for(lambda: _running(_pods(kube).get("waiting")), 30, "the waiting pod running", watch)
    elapsed = time.monotonic() - deleted
    assert elapsed <= 5.0, f"bound {elapsed:.1f}s after the gang went"
