"""/bind re-checks the pod's allocation against the node's other reservations (app.core.recheck).

Leader election is no fence: after a failover, pods a previous leader filtered carry allocations the new
leader's ledger may not have. Here "a previous leader filtered it" is staged exactly: the pod is filtered
by the service (real annotations on the pod) and its row is then removed from the service's ledger file, so
the service knows of it only through the API, as a new leader would. Then:
- a second pod is given the same capacity (the ledger does not know the first): both now claim more memory
  than the GPU has, as after a double allocation by two leaders;
- binding the stranger fails with a clear Error, takes no lock and leaves no reservation; the service's own
  pod binds;
- a stranger whose allocation still fits is adopted: it binds, and the ledger then holds its row.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.integration

NODE = "gpu-recheck"
GPU = f"GPU-{NODE}-0"


@pytest.fixture(scope="module")
def service(start_service: Any, cluster: Any, emulator: Any, wait_for: Any) -> Any:
    emulator.reset()
    cluster.add_nodes(cluster.gpu_node(NODE, gpus=1, memory=32768))
    svc = start_service()
    wait_for(lambda: svc.debug_state(NODE)["registered"], 15, f"{NODE} registered")
    return svc


def _filtered_by_another_leader(service: Any, cluster: Any, name: str, memory: int) -> dict[str, Any]:
    pod = cluster.create_pod(cluster.gpu_pod(name, memory=memory))
    assert service.filter(pod, [NODE])["NodeNames"] == [NODE]
    assert service.ledger.remove([pod["metadata"]["uid"]]) == 1
    return pod


def _reserved(service: Any, uid: str) -> bool:
    return any(r["uid"] == uid for r in service.debug_state(NODE)["reservations"])


def test_a_double_allocation_by_two_leaders_is_not_bound_twice(service: Any, cluster: Any) -> None:
    stranger = _filtered_by_another_leader(service, cluster, "stranger", 20000)
    own = cluster.create_pod(cluster.gpu_pod("own", memory=20000))
    assert service.filter(own, [NODE])["NodeNames"] == [NODE]
    for name in ("stranger", "own"):  # both claim 20000 of the GPU's 32768 MiB
        assert cluster.pod_annotations(name)["hami.io/vgpu-devices-to-allocate"].startswith(
            f"{GPU},NVIDIA,20000"
        )

    answer = service.bind(stranger, NODE)
    assert answer["Error"] == (
        f"pod default/stranger no longer fits on node {NODE} ({GPU} would hold 40000 of 32768 memory); "
        "it will be filtered again"
    )
    assert cluster.node_lock(NODE) is None
    assert "nodeName" not in cluster.pod("stranger")["spec"]
    assert service.ledger.get(stranger["metadata"]["uid"]) is None
    assert not _reserved(service, stranger["metadata"]["uid"])

    assert service.bind(own, NODE) == {"Error": ""}
    assert cluster.allocate(NODE) == ("default", "own")
    assert service.ledger.get(own["metadata"]["uid"]).state == "bound"


def test_a_stranger_that_still_fits_is_adopted(service: Any, cluster: Any) -> None:
    stranger = _filtered_by_another_leader(service, cluster, "fits", 5000)
    uid = stranger["metadata"]["uid"]
    assert service.ledger.get(uid) is None
    assert service.bind(stranger, NODE) == {"Error": ""}
    adopted = service.ledger.get(uid)
    assert adopted is not None and adopted.state == "bound" and adopted.node == NODE
    assert adopted.uses[GPU].mem == 5000
    assert cluster.allocate(NODE) == ("default", "fits")
    assert cluster.pod("fits")["spec"]["nodeName"] == NODE
