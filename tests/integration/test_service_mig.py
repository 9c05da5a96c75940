"""MIG end to end through real processes: a MIG node registered as HAMi's device plugin does in MIG mode
(sim/nodes/objects.py), MIG pods filtered and bound by the service, and the simulated device plugin's Allocate
(sim/nodes/hamiplugin.py) realizing the reserved slices and writing their runtime identity (reference §4.7,
§4.10).

The first pod gets two 1g slices (HAMi's order: highest start first), byte-for-byte annotations; the
plugin creates exactly those instances; the next pod's slice avoids them; a pod needing a slice that no
longer has a free placement is refused with `CardMigTopologyInfeasible`; and the registration worker's
ledger follows the runtime identity the plugin wrote.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from app.core import mig
from app.core.model import MigPlacement
from app.devices.nvidia import keys
from sim.kit.kube import Kube
from sim.nodes.hamiplugin import DevicePlugin, Stats
from sim.nodes.objects import ClusterSpec, build_cluster, parse_models, register_nodes

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def mig_cluster() -> ClusterSpec:
    return build_cluster(1, seed=5, gpus_per_node=1, models=parse_models("a100-40"), mig_nodes=1)


@pytest.fixture(scope="module")
def sim_kube(emulator: Any) -> Iterator[Kube]:
    kube = Kube.from_kubeconfig(emulator.kubeconfig)
    yield kube
    kube.close()


@pytest.fixture(scope="module")
def service(start_service: Any, emulator: Any, sim_kube: Kube, mig_cluster: ClusterSpec) -> Iterator[Any]:
    emulator.reset()
    register_nodes(sim_kube, mig_cluster)
    running = start_service()
    yield running
    running.close()


@pytest.fixture(scope="module")
def plugin(sim_kube: Kube, mig_cluster: ClusterSpec) -> DevicePlugin:
    return DevicePlugin(sim_kube, mig_cluster.nodes[0], Stats())


def slices(annotations: dict[str, str]) -> list[tuple[int, int, str, int, int]]:
    return [
        (e.container_index, e.device_index, e.profile, e.placement.start, e.placement.size)
        for e in mig.decode(annotations[keys.MIG_ALLOCATIONS])
    ]


def test_mig_pods_filter_bind_and_allocate(
    service: Any, cluster: Any, plugin: DevicePlugin, mig_cluster: ClusterSpec, wait_for: Any
) -> None:
    node = mig_cluster.nodes[0]
    gpu = node.devices[0].id
    wait_for(lambda: service.debug_state(node.name)["registered"], 30, f"{node.name} in the inventory")

    # -- two 1g slices for one container ---------------------------------------------------------------
    first = cluster.create_pod(cluster.gpu_pod("mig-0", gpus=2, memory=4000))
    assert service.filter(first, [node.name])["NodeNames"] == [node.name]
    annotations = cluster.pod_annotations("mig-0")
    assert annotations[keys.TO_ALLOCATE] == f"{gpu},NVIDIA,4864,14:{gpu},NVIDIA,4864,14:;"
    assert annotations[keys.MIG_ALLOCATIONS] == (
        f'[{{"containerIndex":0,"deviceIndex":0,"gpuUUID":"{gpu}","profile":"1g.5gb",'
        f'"placement":{{"start":6,"size":1}}}},'
        f'{{"containerIndex":0,"deviceIndex":1,"gpuUUID":"{gpu}","profile":"1g.5gb",'
        f'"placement":{{"start":5,"size":1}}}}]'
    )
    assert service.bind(first, node.name) == {"Error": ""}
    served, index = plugin.allocate(2)
    assert (served["metadata"]["name"], index) == ("mig-0", 0)
    realized = mig.decode(cluster.pod_annotations("mig-0")[keys.MIG_ALLOCATIONS])
    assert all(e.instance is not None for e in realized)
    assert cluster.pod_annotations("mig-0")["hami.io/bind-phase"] == "success"
    assert plugin.mig.in_use(gpu) == [MigPlacement(6, 1), MigPlacement(5, 1)]

    # -- the next slice avoids those in use --------------------------------------------------------------
    second = cluster.create_pod(cluster.gpu_pod("mig-1", memory=15000))
    assert service.filter(second, [node.name])["NodeNames"] == [node.name]
    assert slices(cluster.pod_annotations("mig-1")) == [(0, 0, "3g.20gb", 0, 4)]  # 4..8 would overlap
    assert service.bind(second, node.name) == {"Error": ""}
    plugin.allocate(1)
    assert cluster.pod_annotations("mig-1")["hami.io/bind-phase"] == "success"

    # -- no free placement left for a 2g slice ------------------------------------------------------------
    third = cluster.create_pod(cluster.gpu_pod("mig-2", memory=5000))
    result = service.filter(third, [node.name])
    assert result["NodeNames"] is None
    assert result["FailedNodes"] == {node.name: "1/1 CardMigTopologyInfeasible"}

    # -- the worker's ledger follows the runtime identity the plugin wrote ---------------------------------
    if service.worker is not None:

        def realized_in_ledger() -> bool:
            entry = next((e for e in service.ledger.all_entries() if e.name == "mig-0"), None)
            held = entry.uses.get(gpu) if entry else None
            return bool(held and held.mig and all(s.instance is not None for s in held.mig))

        wait_for(realized_in_ledger, 30, "the ledger to carry the MIG instances")
