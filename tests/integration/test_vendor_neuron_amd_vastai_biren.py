"""AWS Neuron, AMD, Vastai and Biren through real processes (the API emulator, Gunicorn, the registration
worker), on nodes as their device plugins publish them (sim.nodes.vendors): Neuron devices derived from
capacity and the instance-type label, AMD/Vastai/Biren from their register annotations (Vastai in die mode).
Pods of each vendor, and pods asking two of them at once, are filtered, bound and allocated by the simulated
device plugins (HAMi's lock-and-to-allocate protocol for AMD, Vastai and Biren; the Neuron scheduler
extension's `AWS_NEURON_IDS`/`NEURON_ALLOCATED` for Neuron); then no device is oversubscribed, no Neuron core
is given twice, no node lock is left, and a ledger rebuilt from the pods equals the live one.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_vendor_mixed_cluster import (
    assert_rebuild_equals_live,
    kubelets,
    pod,
    schedule_all,
    start_with_sections,
)

from app.devices import build_vendors
from sim.nodes.objects import ClusterSpec, build_cluster
from sim.nodes.vendors import parse_vendors
from sim.workload.report import summarize

pytestmark = pytest.mark.integration
__all__ = ["kubelets"]  # the mixed-cluster module's fixture: the simulated kubelets of `spec`

MIX = "awsneuron+amd,vastai+biren,nvidia+amd"
SECTIONS = {
    "nvidia": {"resourceCountName": "nvidia.com/gpu"},
    "awsneuron": {"resourceCountName": "aws.amazon.com/neuron"},
    "amd": {"resourceCountName": "amd.com/gpu"},
    "vastai": {"resourceCountName": "vastaitech.com/va"},
    "biren": {"resourceCountName": "birentech.com/gpu"},
}
VENDORS = build_vendors(SECTIONS, frozenset())
MUTEX = "hami.io/mutex.lock"


PODS = [
    pod("neuron-run", {"aws.amazon.com/neuron": "2"}),  # two contiguous Inferentia devices
    pod("neuron-core-a", {"aws.amazon.com/neuroncore": "1"}),
    pod("neuron-core-b", {"aws.amazon.com/neuroncore": "1"}),
    pod("neuron-two", {"aws.amazon.com/neuroncore": "1"}, {"aws.amazon.com/neuron": "1"}),
    pod("amd-quarter", {"amd.com/gpu": "1", "amd.com/gpumem": "16384", "amd.com/gpucores": "25"}),
    pod("amd-whole", {"amd.com/gpu": "1"}),
    pod("vastai-dies", {"vastaitech.com/va": "2"}),
    pod("biren", {"birentech.com/gpu": "1"}),
    pod(
        "nv-amd",
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "2000", "amd.com/gpu": "1", "amd.com/gpucores": "10"},
    ),
    pod(
        "amd-neuron",
        {"amd.com/gpu": "1", "amd.com/gpumem": "8192", "amd.com/gpucores": "10"},
        {"aws.amazon.com/neuroncore": "2"},
    ),
]


@pytest.fixture(scope="module")
def spec() -> ClusterSpec:
    return build_cluster(3, seed=3, gpus_per_node=2, zones=1, vendors=parse_vendors(MIX))


@pytest.fixture(scope="module")
def service(
    start_service: Any, cluster: Any, spec: ClusterSpec, tmp_path_factory: pytest.TempPathFactory
) -> Any:
    folder = tmp_path_factory.mktemp("vendors3")
    return start_with_sections(start_service, cluster, spec, folder, SECTIONS, {})


def test_neuron_amd_vastai_biren_are_scheduled_and_allocated(
    service: Any, cluster: Any, spec: ClusterSpec, kubelets: Any, wait_for: Any
) -> None:
    placed = schedule_all(service, cluster, spec, PODS, wait_for)
    names = [node.name for node in spec.nodes]
    nodes = [cluster.node(n) for n in names]
    assert not any(MUTEX in (n["metadata"].get("annotations") or {}) for n in nodes), "no lock left"
    report = summarize(cluster.pods(), nodes)
    assert report["oversubscribed_devices"] == 0 and report["misplaced_devices"] == []
    assert report["pods_bound_by_vendor"] == {"AMD": 4, "AWSNeuron": 5, "Biren": 1, "NVIDIA": 1, "Vastai": 1}
    assert kubelets.stats.counters["allocate_failed"] == 0

    run = cluster.pod_annotations("neuron-run")
    first, second = (int(i) for i in run["AWS_NEURON_IDS"].split(","))
    assert second == first + 1 and run["NEURON_ALLOCATED"] == "true"  # contiguous; the plugin's flag
    cores = [cluster.pod_annotations(n) for n in ("neuron-core-a", "neuron-core-b")]
    assert all(c["NEURON_RESOURCE_TYPE"] == "aws.amazon.com/neuroncore" for c in cores)
    if placed["neuron-core-a"] == placed["neuron-core-b"]:  # a NeuronCore is never handed out twice
        assert cores[0]["AWS_NEURON_IDS"] != cores[1]["AWS_NEURON_IDS"]
    quarter = cluster.pod_annotations("amd-quarter")["hami.io/amd-devices-allocated"]
    assert quarter.endswith(",AMD Instinct MI300X VF,16384,76:;")  # 25% of 304 CUs (V§2.11 example)
    dies = cluster.pod_annotations("vastai-dies")["hami.io/Vastai-devices-allocated"]
    indexes = [int(entry.split(",")[0].rsplit("-", 1)[1]) for entry in dies.split(":")[:2]]
    assert len(set(indexes)) == 2 and indexes[0] // 2 == indexes[1] // 2  # two dies of one card (AIC)

    assert_rebuild_equals_live(cluster, service, VENDORS, placed)
