"""An Enflame GCU pod and an NVIDIA pod on one node are allocated one after the other (stop 24's red CI).

HAMi binds GCU pods without a node lock, yet the GCU device plugin follows HAMi's to-allocate protocol: it
finds the pod it serves through `hami.io/mutex.lock`, else the first pod on its node waiting in bind-phase
`allocating`. With an NVIDIA pod bound there and still waiting for its Allocate, a GCU pod bound next
made the GCU plugin read the NVIDIA pod from the lock, find no GCU group in it and fail both pods (the CI
storm lost three pods so). Our bind of a GCU pod takes the shared lock (docs/compatibility.md), so it waits
for the NVIDIA pod's allocation; a lock whose holder finished its allocation without releasing it is taken
over at once. Real processes: the API emulator, Gunicorn, the worker, the simulated kubelets and plugins.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_vendor_mixed_cluster import pod, start_with_sections

from app.core.nodelock import parse_lock
from sim.kit.kube import Kube
from sim.nodes.deviceplugin import Kubelets, PluginConfig
from sim.nodes.objects import ClusterSpec, build_cluster
from sim.nodes.vendors import parse_vendors

pytestmark = pytest.mark.integration

MUTEX = "hami.io/mutex.lock"
SECTIONS = {
    "nvidia": {"resourceCountName": "nvidia.com/gpu"},
    "enflame": {"resourceNameGCU": "enflame.com/gcu"},
}


@pytest.fixture(scope="module")
def spec() -> ClusterSpec:
    return build_cluster(1, seed=5, gpus_per_node=2, zones=1, vendors=parse_vendors("nvidia+enflame"))


@pytest.fixture(scope="module")
def service(
    start_service: Any, cluster: Any, spec: ClusterSpec, tmp_path_factory: pytest.TempPathFactory
) -> Any:
    env = {"HAMI_BIND_LOCK_WAIT": "1s"}
    return start_with_sections(start_service, cluster, spec, tmp_path_factory.mktemp("gcu"), SECTIONS, env)


def _place(service: Any, cluster: Any, node: str, manifest: dict[str, Any]) -> dict[str, str]:
    created = cluster.create_pod(manifest)
    assert service.filter(created, [node])["NodeNames"] == [node]
    answer: dict[str, str] = service.bind(cluster.pod(manifest["metadata"]["name"]), node)
    return answer


def _holder(cluster: Any, node: str) -> str:
    value = (cluster.node(node)["metadata"].get("annotations") or {}).get(MUTEX)
    return "" if value is None else parse_lock(value).name


def test_a_gcu_pod_waits_for_the_nvidia_pod_allocating_on_its_node(
    service: Any, cluster: Any, emulator: Any, spec: ClusterSpec, wait_for: Any
) -> None:
    node = spec.nodes[0].name
    nvidia = pod("nv-first", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"})
    assert _place(service, cluster, node, nvidia) == {"Error": ""}
    assert _holder(cluster, node) == "nv-first"  # no kubelet yet: it waits for its Allocate

    gcu = pod("gcu-next", {"enflame.com/gcu": "1"})
    answer = _place(service, cluster, node, gcu)
    assert "node lock contention" in answer["Error"], answer
    assert "nodeName" not in cluster.pod("gcu-next")["spec"] and _holder(cluster, node) == "nv-first"

    kube = Kube.from_kubeconfig(Path(emulator.kubeconfig))
    kubelets = Kubelets(kube, spec, PluginConfig(allocate_latency=0.0, workers=2)).start()
    try:
        kubelets.informer.synced.wait(30)
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
    service: Any, cluster: Any, spec: ClusterSpec
) -> None:
    """A plugin that set bind-phase `success` but never released the lock (a lost release) blocks nobody."""
    node = spec.nodes[0].name
    assert _place(
        service, cluster, node, pod("nv-done", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "500"})
    ) == {"Error": ""}
    assert _holder(cluster, node) == "nv-done"
    cluster.patch_pod_annotations("nv-done", "default", {"hami.io/bind-phase": "success"})
    assert _place(service, cluster, node, pod("gcu-after", {"enflame.com/gcu": "1"})) == {"Error": ""}
    assert _holder(cluster, node) == "gcu-after"
