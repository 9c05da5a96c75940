"""A mixed cluster through real processes (the API emulator, Gunicorn, the registration worker): NVIDIA,
Huawei Ascend (910B3 and 910C), Hygon, Cambricon and Moore Threads nodes as their device plugins publish
them (sim.nodes.vendors). Pods of every vendor, and pods asking two vendors at once, are filtered, bound and
allocated by the simulated device plugins; then no device of any vendor is oversubscribed, no node lock
is left, and a ledger rebuilt from the pods equals the live one.

Also the bind of a pod needing two node locks (NVIDIA's `hami.io/mutex.lock` and Cambricon's
`cambricon.com/dsmlu.lock`): it takes both, and on every failure releases both (HAMi leaks the first,
#2626), never touching another pod's lock.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.core.nodelock import format_lock
from app.devices import build_vendors
from sim.kit.kube import Kube, node_path
from sim.nodes.kubelet import Kubelets, PluginConfig
from sim.nodes.objects import ClusterSpec, build_cluster, node_object
from sim.nodes.vendors import parse_vendors
from sim.workload.report import summarize
from workers.reconcile import Rules, compare, rebuild

pytestmark = pytest.mark.integration

MIX = "nvidia+hygon+cambricon,ascend910b3,cambricon,mthreads,ascend910c,nvidia"
SECTIONS = {
    "nvidia": {"resourceCountName": "nvidia.com/gpu"},
    "hygon": {"resourceCountName": "hygon.com/dcunum"},
    "cambricon": {"resourceCountName": "cambricon.com/vmlu"},
    "mthreads": {"resourceCountName": "mthreads.com/vgpu"},
}
VENDORS = build_vendors(SECTIONS, frozenset({"ascend"}))
MUTEX, DSMLU = "hami.io/mutex.lock", "cambricon.com/dsmlu.lock"


def pod(name: str, *containers: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
        "spec": {
            "schedulerName": "hami-scheduler",
            "containers": [
                {"name": f"c{i}", "image": "busybox", "resources": {"limits": limits}}
                for i, limits in enumerate(containers)
            ],
        },
    }


# what the webhook leaves (the Ascend memory template, 910C pairs, Moore Threads whole GPUs)
PODS = [
    pod("nv", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000"}),
    pod("npu", {"huawei.com/Ascend910B3": "2", "huawei.com/Ascend910B3-memory": "65536"}),
    pod("npu-small", {"huawei.com/Ascend910B3": "1", "huawei.com/Ascend910B3-memory": "16384"}),
    pod("npu-910c", {"huawei.com/Ascend910C": "2", "huawei.com/Ascend910C-memory": "65536"}),
    pod("dcu", {"hygon.com/dcunum": "1", "hygon.com/dcumem": "4096", "hygon.com/dcucores": "30"}),
    pod(
        "mlu",
        {
            "cambricon.com/vmlu": "1",
            "cambricon.com/mlu.smlu.vmemory": "16",
            "cambricon.com/mlu.smlu.vcore": "20",
        },
    ),
    pod("mt", {"mthreads.com/vgpu": "1", "mthreads.com/sgpu-memory": "8"}),
    pod(
        "nv-dcu",
        {
            "nvidia.com/gpu": "1",
            "nvidia.com/gpumem": "2000",
            "hygon.com/dcunum": "1",
            "hygon.com/dcumem": "1000",
        },
    ),
    pod(
        "nv-mlu",
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "2000"},
        {"cambricon.com/vmlu": "1", "cambricon.com/mlu.smlu.vmemory": "8"},
    ),
]


@pytest.fixture(scope="module")
def spec() -> ClusterSpec:
    return build_cluster(6, seed=7, gpus_per_node=2, zones=1, vendors=parse_vendors(MIX))


def start_with_sections(
    start_service: Any, cluster: Any, spec: ClusterSpec, folder: Path, sections: Any, env: dict[str, str]
) -> Any:
    """Our service with `sections` as its device config (plus `env`), once every node of `spec` is seeded
    and registered by the worker."""
    config = folder / "device-config.yaml"
    config.write_text(yaml.safe_dump(sections), encoding="utf-8")
    cluster.emulator.seed([node_object(node) for node in spec.nodes])
    started = start_service(env={"HAMI_DEVICE_CONFIG_FILE": str(config), **env}, registrar="worker")
    deadline = time.monotonic() + 60
    while started.debug_state().get("nodes", 0) < len(spec.nodes):
        assert time.monotonic() < deadline, "every vendor's node registers"
        time.sleep(0.25)
    return started


def schedule_all(
    service: Any, cluster: Any, spec: ClusterSpec, manifests: list[dict[str, Any]], wait_for: Any
) -> dict[str, str]:
    """Create, filter and bind every pod (each must find a node), then wait until the simulated device
    plugins admitted them all; pod name -> node."""
    names = [node.name for node in spec.nodes]
    placed: dict[str, str] = {}
    for manifest in manifests:
        name = manifest["metadata"]["name"]
        created = cluster.create_pod(manifest)
        answer = service.filter(created, names)
        assert answer["Error"] == "" and answer["NodeNames"], (name, answer)
        assert service.bind(cluster.pod(name), answer["NodeNames"][0]) == {"Error": ""}, name
        placed[name] = answer["NodeNames"][0]

    def running() -> bool:
        return all(cluster.pod(name)["status"].get("phase") == "Running" for name in placed)

    wait_for(running, 30, "every pod admitted by its node's device plugins")
    return placed


def assert_rebuild_equals_live(cluster: Any, service: Any, vendors: Any, placed: dict[str, str]) -> list[Any]:
    """A ledger rebuilt from the pods equals the live one for the placed pods; the live entries."""
    rules = Rules(frozenset({"hami-scheduler"}), vendors, 60.0)
    rebuilt = [e for e in rebuild(cluster.pods(), rules, time.time()).entries if e.name in placed]
    live = [e for e in service.ledger.all_entries() if e.name in placed]
    assert len(rebuilt) == len(placed)
    assert not compare(rebuilt, live), "a ledger rebuilt from the pods equals the live one"
    return live


@pytest.fixture(scope="module")
def service(
    start_service: Any, cluster: Any, spec: ClusterSpec, tmp_path_factory: pytest.TempPathFactory
) -> Any:
    env = {"HAMI_ENABLE_ASCEND": "true", "HAMI_BIND_LOCK_WAIT": "1s"}
    return start_with_sections(
        start_service, cluster, spec, tmp_path_factory.mktemp("vendors"), SECTIONS, env
    )


@pytest.fixture(scope="module")
def kubelets(emulator: Any, spec: ClusterSpec) -> Any:
    kube = Kube.from_kubeconfig(Path(emulator.kubeconfig))
    running = Kubelets(kube, spec, PluginConfig(allocate_latency=0.0, workers=2)).start()
    running.informer.synced.wait(30)
    yield running
    running.stop()


def test_a_mixed_cluster_is_scheduled_without_oversubscription(
    service: Any, cluster: Any, spec: ClusterSpec, kubelets: Any, wait_for: Any
) -> None:
    placed = schedule_all(service, cluster, spec, PODS, wait_for)
    names = [node.name for node in spec.nodes]
    # both locks of nv-mlu were taken and released by the two plugins; nothing else locks a node
    nodes = [cluster.node(n) for n in names]
    assert not any({MUTEX, DSMLU} & (n["metadata"].get("annotations") or {}).keys() for n in nodes)
    report = summarize(cluster.pods(), nodes)
    assert report["oversubscribed_devices"] == 0 and report["misplaced_devices"] == []
    assert report["pods_bound_by_vendor"] == {
        "Ascend910B3": 2, "Ascend910C": 1, "DCU": 2, "MLU": 2, "Mthreads": 1, "NVIDIA": 3
    }  # fmt: skip
    notes = cluster.pod_annotations("npu")
    assert notes["huawei.com/Ascend910B3"].startswith('[{"UUID":')
    assert cluster.pod_annotations("mlu")["CAMBRICON_DSMLU_ASSIGNED"] == "true"  # the dsmlu plugin's
    assert cluster.pod_annotations("mt")["mthreads.com/predicate-node"] == placed["mt"]
    assert kubelets.stats.counters["allocate_failed"] == 0

    assert_rebuild_equals_live(cluster, service, VENDORS, placed)


def two_lock_pod(name: str) -> dict[str, Any]:
    return pod(name, {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000", "cambricon.com/vmlu": "1"})


def mixed_node(spec: ClusterSpec) -> str:
    return next(n.name for n in spec.nodes if n.devices and any(p.key == "MLU" for p in n.parts))


def test_a_pod_needing_two_locks_takes_both(
    service: Any, cluster: Any, spec: ClusterSpec, kubelets: Any
) -> None:
    node = mixed_node(spec)
    created = cluster.create_pod(two_lock_pod("both-locks"))
    assert service.filter(created, [node])["NodeNames"] == [node]
    assert service.bind(cluster.pod("both-locks"), node) == {"Error": ""}
    notes = cluster.node(node)["metadata"]["annotations"]
    assert notes[MUTEX].endswith(",default,both-locks") and notes[DSMLU].endswith("Z")


@pytest.mark.parametrize("failure", ["contended", "binding"])
def test_every_failure_releases_both_locks(
    service: Any, cluster: Any, spec: ClusterSpec, kubelets: Any, emulator: Any, failure: str, wait_for: Any
) -> None:
    node = mixed_node(spec)
    wait_for(
        lambda: not ({MUTEX, DSMLU} & (cluster.node(node)["metadata"].get("annotations") or {}).keys()),
        30,
        "locks gone",
    )
    name = f"fails-{failure}"
    created = cluster.create_pod(two_lock_pod(name))
    assert service.filter(created, [node])["NodeNames"] == [node]
    theirs = None
    if failure == "contended":
        holder = cluster.create_pod(pod(f"holder-{failure}", {"nvidia.com/gpu": "1"}))
        theirs = format_lock(datetime.now(UTC), "default", holder["metadata"]["name"])
        kubelets.kube.patch(node_path(node), {"metadata": {"annotations": {MUTEX: theirs}}})
        answer = service.bind(cluster.pod(name), node)
        assert "node lock contention" in answer["Error"]
    else:
        rule = {
            "action": "error",
            "verb": "create",
            "resource": "pods",
            "subresource": "binding",
            "name": name,
            "status": 500,
        }
        with emulator.fault(**rule):
            answer = service.bind(cluster.pod(name), node)
        assert answer["Error"]
    notes = cluster.node(node)["metadata"].get("annotations") or {}
    assert DSMLU not in notes, "the Cambricon lock taken first is released with the other"
    assert notes.get(MUTEX) == theirs  # ours is gone; another pod's is untouched
    kubelets.kube.patch(node_path(node), {"metadata": {"annotations": {MUTEX: None}}})
