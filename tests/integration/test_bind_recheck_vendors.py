"""/bind asks the device's vendor whether the pod's allocation still fits (app.core.recheck, issue 19
finding 2), through real processes: AWS Neuron cores are bits, so two pods that two leaders each gave
NeuronCore 0 (mask 1 each) must not both be bound, though their summed cores (2) are within the device's
`devcore` (3) and its two slots.

"A previous leader filtered it" is staged as in test_bind_recheck: the pod is filtered by the service and
its row is then removed from the service's ledger file, so the service knows of it only through the API.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
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
    assert (
        service.ledger.remove([stranger["metadata"]["uid"]]) == 1
    )  # as if a previous leader had filtered it
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


RACE = "neuron-race"


def test_two_leaders_binding_one_neuron_core_at_once_bind_one(
    service: Any, start_service: Any, cluster: Any, emulator: Any, wait_for: Any, tmp_path: Path
) -> None:
    """Two leaders (two replicas, each its own ledger, neither counting the other's pending pods: a 1 ms
    in-flight TTL) give NeuronCore 0 of one device to two pods and bind them at the same moment, each
    binding held up in the API server so that both re-checks read the node before either pod is bound.
    AWS Neuron takes no node lock in HAMi; the bind takes our own (`hami.io/bind.lock`), so the re-checks
    cannot overlap: one pod is bound, the other refused (the mixed two-leader storm bound both, 12 ms
    apart, before the lock)."""
    config = tmp_path / "device-config.yaml"
    sections = {
        "nvidia": {"resourceCountName": "nvidia.com/gpu"},
        "awsneuron": {"resourceCountName": "aws.amazon.com/neuron"},
    }
    config.write_text(yaml.safe_dump(sections), encoding="utf-8")
    race = _neuron_node()
    race["metadata"]["name"] = race["metadata"]["labels"]["kubernetes.io/hostname"] = RACE
    emulator.seed([race])
    env = {"HAMI_DEVICE_CONFIG_FILE": str(config), "HAMI_INFLIGHT_TTL": "1ms"}
    leaders = [start_service(workers=1, env=env, registrar="worker") for _ in range(2)]
    for leader in leaders:
        wait_for(lambda leader=leader: leader.debug_state(RACE)["registered"], 15, f"{RACE} registered")
    pods = [cluster.create_pod(_core_pod(f"race-{i}")) for i in range(2)]
    for leader, pod in zip(leaders, pods, strict=True):
        assert leader.filter(pod, [RACE])["NodeNames"] == [RACE]
    for pod in pods:  # core 0 twice: each leader decided without the other's pod
        assert (
            cluster.pod_annotations(pod["metadata"]["name"])[ALLOCATED]
            == f"{RACE}-AWSNeuron-0,AWSNeuron,0,1:;"
        )
    emulator.add_fault(action="delay", delay=0.8, verb="create", resource="pods", subresource="binding")
    try:
        with ThreadPoolExecutor(2) as pool:
            answers = list(
                pool.map(
                    lambda pair: pair[0].bind(cluster.pod(pair[1]["metadata"]["name"]), RACE),
                    zip(leaders, pods, strict=True),
                )
            )
    finally:
        emulator.clear_faults()
    bound = [
        p["metadata"]["name"] for p in pods if cluster.pod(p["metadata"]["name"])["spec"].get("nodeName")
    ]
    assert len(bound) == 1, answers
    refused = [a["Error"] for a in answers if a["Error"]]
    # the second bind either re-checked after the first and found the core taken, or still waited for the
    # lock, which the bound pod holds until its kubelet admits it (none runs here)
    assert len(refused) == 1, answers
    assert ("no longer fits" in refused[0] and "is held by another pod" in refused[0]) or (
        "node lock contention" in refused[0]
    ), answers
    node = cluster.node(RACE)["metadata"].get("annotations") or {}
    assert node["hami.io/bind.lock"].endswith(f",default,{bound[0]}")
