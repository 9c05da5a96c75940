"""One pod at a time waits for its device allocation on a node, whatever its vendors (stop 24's red CI).

HAMi's device plugins find the pod an Allocate is for through the node lock, else "the pod waiting on this
node" — the first in bind-phase `allocating` (HAMi's to-allocate protocol: NVIDIA, Enflame GCU, Metax GPU,
...) or the oldest with the vendor's own flag (Kunlunxin XPU, AWS Neuron, Enflame DRS, Moore Threads).
Two pods waiting at once on one node can then be served each other's devices. The CI storm lost pods both
ways: a GCU pod bound (without a lock, as HAMi binds it) while an NVIDIA pod held the shared lock — the GCU
plugin read the NVIDIA pod from the lock and failed both; and two Kunlunxin XPU pods bound one after the
other, the first's Allocate asking 4 XPUs served the pod given 2. Our binds of GCU and Metax GPU pods take
the shared lock, and our own `hami.io/bind.lock` (Kunlunxin XPU, Neuron, DRS, Moore Threads) is held until
the kubelet admitted the pod; a lock whose holder finished (admitted, or bind-phase `success`) is taken
over at once. Real processes: the API emulator, Gunicorn, the worker, the simulated kubelets and plugins.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_vendor_mixed_cluster import pod, start_with_sections

from app.core.nodelock import parse_lock
from sim.kit.kube import Kube
from sim.nodes.kubelet import Kubelets, PluginConfig
from sim.nodes.objects import ClusterSpec, build_cluster
from sim.nodes.vendors import parse_vendors

pytestmark = pytest.mark.integration

MUTEX, BIND_LOCK = "hami.io/mutex.lock", "hami.io/bind.lock"
SECTIONS = {
    "nvidia": {"resourceCountName": "nvidia.com/gpu"},
    "enflame": {"resourceNameGCU": "enflame.com/gcu"},
    "kunlun": {"resourceCountName": "kunlunxin.com/xpu"},
}


@pytest.fixture(scope="module")
def spec() -> ClusterSpec:
    return build_cluster(2, seed=5, gpus_per_node=2, zones=1, vendors=parse_vendors("nvidia+enflame,kunlun"))


@pytest.fixture(scope="module")
def service(
    start_service: Any, cluster: Any, spec: ClusterSpec, tmp_path_factory: pytest.TempPathFactory
) -> Any:
    env = {"HAMI_BIND_LOCK_WAIT": "1s"}
    return start_with_sections(
        start_service, cluster, spec, tmp_path_factory.mktemp("one-allocation"), SECTIONS, env
    )


def _place(service: Any, cluster: Any, node: str, manifest: dict[str, Any]) -> dict[str, str]:
    created = cluster.create_pod(manifest)
    assert service.filter(created, [node])["NodeNames"] == [node]
    answer: dict[str, str] = service.bind(cluster.pod(manifest["metadata"]["name"]), node)
    return answer


def _kubelets(emulator: Any, spec: ClusterSpec) -> Kubelets:
    kube = Kube.from_kubeconfig(Path(emulator.kubeconfig))
    kubelets = Kubelets(kube, spec, PluginConfig(allocate_latency=0.0, workers=2)).start()
    kubelets.informer.synced.wait(30)
    return kubelets


def _holder(cluster: Any, node: str, lock: str = MUTEX) -> str:
    value = (cluster.node(node)["metadata"].get("annotations") or {}).get(lock)
    return "" if value is None else parse_lock(value).name


def test_a_gcu_pod_waits_for_the_nvidia_pod_allocating_on_its_node(
    service: Any, cluster: Any, emulator: Any, spec: ClusterSpec, wait_for: Any
) -> None:
    node = spec.nodes[0].name  # NVIDIA + Enflame GCU
    nvidia = pod("nv-first", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"})
    assert _place(service, cluster, node, nvidia) == {"Error": ""}
    assert _holder(cluster, node) == "nv-first"  # no kubelet yet: it waits for its Allocate

    gcu = pod("gcu-next", {"enflame.com/gcu": "1"})
    answer = _place(service, cluster, node, gcu)
    assert "node lock contention" in answer["Error"], answer
    assert "nodeName" not in cluster.pod("gcu-next")["spec"] and _holder(cluster, node) == "nv-first"

    kubelets = _kubelets(emulator, spec)
    try:
        wait_for(lambda: cluster.pod("nv-first")["status"].get("phase") == "Running", 30, "nv-first runs")
        assert _holder(cluster, node) == ""  # the NVIDIA plugin released it
        assert (
            _place(
                service, cluster, node, gcu | {"metadata": {"name": "gcu-next-2", "namespace": "default"}}
            )["Error"]
            == ""
        )
        wait_for(
            lambda: cluster.pod("gcu-next-2")["status"].get("phase") == "Running", 30, "the GCU pod runs"
        )
        notes = cluster.pod_annotations("gcu-next-2")
        assert notes["hami.io/bind-phase"] == "success" and _holder(cluster, node) == ""
        assert kubelets.stats.counters["allocate_failed"] == 0
    finally:
        kubelets.stop()


def test_a_lock_whose_holder_finished_allocating_is_taken_over(
    service: Any, cluster: Any, emulator: Any, spec: ClusterSpec
) -> None:
    """A plugin that set bind-phase `success` but never released the lock (a lost release) blocks nobody."""
    node = spec.nodes[0].name  # NVIDIA + Enflame GCU
    assert _place(
        service, cluster, node, pod("nv-done", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "500"})
    ) == {"Error": ""}
    assert _holder(cluster, node) == "nv-done"
    # what HAMi's plugin leaves after its Allocate: its group erased (quirk #43: one `;` more), then success
    done = {"hami.io/vgpu-devices-to-allocate": ";", "hami.io/bind-phase": "success"}
    cluster.patch_pod_annotations("nv-done", "default", done)
    assert _place(service, cluster, node, pod("gcu-after", {"enflame.com/gcu": "1"})) == {"Error": ""}
    assert _holder(cluster, node) == "gcu-after"
    emulator.delete(
        "pods", "nv-done", "default"
    )  # its groups were erased by hand: no kubelet may admit it later


def test_a_kunlun_xpu_pod_waits_until_the_one_before_it_is_admitted(
    service: Any, cluster: Any, emulator: Any, spec: ClusterSpec, wait_for: Any
) -> None:
    node = spec.nodes[1].name  # Kunlunxin XPUs: HAMi binds them without a lock
    assert _place(service, cluster, node, pod("xpu-four", {"kunlunxin.com/xpu": "4"})) == {"Error": ""}
    assert _holder(cluster, node, BIND_LOCK) == "xpu-four"  # held past the binding, until admitted
    answer = _place(service, cluster, node, pod("xpu-two", {"kunlunxin.com/xpu": "2"}))
    assert "node lock contention" in answer["Error"], answer
    assert "nodeName" not in cluster.pod("xpu-two")["spec"]

    kubelets = _kubelets(emulator, spec)
    try:
        wait_for(lambda: cluster.pod("xpu-four")["status"].get("phase") == "Running", 30, "xpu-four runs")
        later = pod("xpu-two-again", {"kunlunxin.com/xpu": "2"})
        assert _place(service, cluster, node, later) == {
            "Error": ""
        }  # the admitted holder's lock: taken over
        assert _holder(cluster, node, BIND_LOCK) == "xpu-two-again"
        wait_for(lambda: cluster.pod("xpu-two-again")["status"].get("phase") == "Running", 30, "it runs")
        assert kubelets.stats.counters["allocate_failed"] == 0
        assert kubelets.stats.counters["pods_failed_admission"] == 0
    finally:
        kubelets.stop()
