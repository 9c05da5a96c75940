"""`hami-scheduler inspect` from its three sources shows what the pods' annotations say.

A cluster on the API emulator with a real Gunicorn service and registration worker: pods filtered, bound
and allocated by the simulated device plugin, one pod filtered but not bound yet (reserved), one that
finished. `inspect` reads (1) the live API through the kubeconfig, (2) a dump written by the real
`kubectl get nodes,pods,resourcequotas -A -o json`, (3) the replica's /debug/state. Each must show per
device exactly the memory, cores and slots — and the pods — that the `hami.io/vgpu-devices-allocated`
annotations add up to (`sim.workload.inspection`, parsed independently of the scheduler's codec). The real
control plane's twin is tests/real/test_real_inspect.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sim.workload.inspection import expected_usage, inspected, kubectl_dump

pytestmark = [pytest.mark.integration, pytest.mark.kubectl]

NODES = ("gpu-i0", "gpu-i1")
PODS = {  # name -> (gpus, memory MiB, cores)
    "one": (1, 3000, 20),
    "two": (2, 8000, 0),
    "three": (1, 12000, 50),
    "four": (1, 1000, 10),
}


@pytest.fixture(scope="module")
def placed(start_service: Any, cluster: Any, emulator: Any, wait_for: Any) -> tuple[Any, list[str]]:
    emulator.reset()
    cluster.add_nodes(*(cluster.gpu_node(name, gpus=2) for name in NODES))
    service = start_service(workers=2)
    wait_for(lambda: all(service.debug_state(n)["registered"] for n in NODES), 15, "nodes registered")
    names = []
    for name, (gpus, memory, cores) in PODS.items():
        pod = cluster.create_pod(cluster.gpu_pod(name, gpus=gpus, memory=memory, cores=cores or None))
        (node,) = service.filter(pod, list(NODES))["NodeNames"]
        if name != "four":  # "four" stays filtered but unbound: a reservation in flight
            assert service.bind(cluster.pod(name), node) == {"Error": ""}
            cluster.allocate(node)
        names.append(name)
    return service, names


def test_every_source_shows_the_annotations(placed: Any, cluster: Any, emulator: Any, tmp_path: Path) -> None:
    service, names = placed
    pods = [cluster.pod(name) for name in names]
    expected = expected_usage(pods)
    assert (
        sum(e["slots"] for e in expected.values()) == 5
        and len({p for e in expected.values() for p in e["pods"]}) == 4
    )

    live = inspected("--kubeconfig", str(emulator.kubeconfig))
    assert live == expected

    dump = kubectl_dump(emulator.kubeconfig, tmp_path / "cluster.json")
    assert inspected("--cluster", str(dump)) == expected

    # The replica's ledger: the same allocations (the reserved pod included, as its filter recorded it).
    assert inspected("--url", service.url) == expected


def test_a_finished_pod_frees_its_devices_in_every_source(
    placed: Any, cluster: Any, emulator: Any, wait_for: Any
) -> None:
    service, names = placed
    cluster.core.patch_namespaced_pod_status("one", "default", {"status": {"phase": "Succeeded"}})
    expected = expected_usage([cluster.pod(name) for name in names])
    assert all("default/one" not in e["pods"] for e in expected.values())
    assert inspected("--kubeconfig", str(emulator.kubeconfig)) == expected
    wait_for(lambda: inspected("--url", service.url) == expected, 15, "the replica's ledger to drop the pod")
