"""/bind asks the device's vendor whether the pod's allocation still fits (app.core.recheck, issue 19
finding 2), through real processes: AWS Neuron cores are bits, so two pods that two leaders each gave
NeuronCore 0 (mask 1 each) must not both be bound, though their summed cores (2) are within the device's
`devcore` (3) and its two slots.

"A previous leader filtered it" is staged as in test_bind_recheck: the pod is filtered by the service and
its row is then removed from the service's ledger file, so the service knows of it only through the API.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.integration

NODE = "neuron-recheck"
DEVICE = f"{NODE}-AWSNeuron-0"
ALLOCATED = "hami.io/aws-neuron-devices-allocated"


def _neuron_node() -> dict[str, Any]:
    """One Trainium device with two NeuronCores, derived from capacity as HAMi does (vendors §2.10)."""
    capacity = {"aws.amazon.com/neuron": "1", "aws.amazon.com/neuroncore": "2"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE,
            "labels": {"kubernetes.io/hostname": NODE, "node.kubernetes.io/instance-type": "trn1.32xlarge"},
        },
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def _core_pod(name: str) -> dict[str, Any]:
    limits = {"aws.amazon.com/neuroncore": "1"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "hami-scheduler",
            "containers": [{"name": "c", "image": "x", "resources": {"limits": limits, "requests": limits}}],
        },
    }


@pytest.fixture(scope="module")
def service(
    start_service: Any, cluster: Any, emulator: Any, wait_for: Any, tmp_path_factory: pytest.TempPathFactory
) -> Any:
    emulator.reset()
    config: Path = tmp_path_factory.mktemp("neuron") / "device-config.yaml"
    sections = {
        "nvidia": {"resourceCountName": "nvidia.com/gpu"},
        "awsneuron": {"resourceCountName": "aws.amazon.com/neuron"},
    }
    config.write_text(yaml.safe_dump(sections), encoding="utf-8")
    emulator.seed([_neuron_node()])  # with its status: capacity is where Neuron devices come from
    svc = start_service(env={"HAMI_DEVICE_CONFIG_FILE": str(config)}, registrar="worker")
    wait_for(lambda: svc.debug_state(NODE)["registered"], 15, f"{NODE} registered")
    return svc


def test_a_neuron_core_two_leaders_gave_twice_is_not_bound_twice(service: Any, cluster: Any) -> None:
    stranger = cluster.create_pod(_core_pod("stranger"))
    assert service.filter(stranger, [NODE])["NodeNames"] == [NODE]
    assert service.ledger.forget(stranger["metadata"]["uid"])  # as if a previous leader had filtered it
    own = cluster.create_pod(_core_pod("own"))
    assert service.filter(own, [NODE])["NodeNames"] == [NODE]
    for name in ("stranger", "own"):  # both were given core 0: mask 1 on the device
        assert cluster.pod_annotations(name)[ALLOCATED] == f"{DEVICE},AWSNeuron,0,1:;"

    answer = service.bind(cluster.pod("stranger"), NODE)
    assert answer["Error"] == (
        f"pod default/stranger no longer fits on node {NODE} (core 0 of {DEVICE} is held by another pod); "
        "it will be filtered again"
    )
    assert "nodeName" not in cluster.pod("stranger")["spec"]
    assert service.ledger.get(stranger["metadata"]["uid"]) is None

    assert service.bind(cluster.pod("own"), NODE) == {"Error": ""}
    assert cluster.pod("own")["spec"]["nodeName"] == NODE
