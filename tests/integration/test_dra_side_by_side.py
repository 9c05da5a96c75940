"""DRA side by side over real processes (Gunicorn + the registration worker) and the API emulator serving
resource.k8s.io/v1 (docs/compatibility.md).

One module, in order: without DRA objects a pod is placed as usual; a ResourceSlice of NVIDIA's DRA driver
on one of our GPU nodes makes /filter refuse that node (FailedAndUnresolvableNodes, with the driver in the
reason) and place the pod on the other; a DeviceClass with `extendedResourceName: nvidia.com/gpu` makes
/filter refuse the pod on every node and the webhook warn when it admits one; the worker's gauges and
/debug/state say the same; removing the DeviceClass lifts the refusal. A cluster without resource.k8s.io
(404) has no DRA and the worker logs no error.
"""

from __future__ import annotations

import urllib.request
from typing import Any

import pytest
from test_service_webhook import api_pod, review

pytestmark = pytest.mark.integration

DRA_NODE, PLAIN_NODE = "gpu-dra", "gpu-plain"
CLASS = "gpu.nvidia.com"


def device_class(name: str = CLASS, resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    """A DeviceClass of NVIDIA's DRA driver serving `resource` (KEP-5004); also used by tests/real."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {
            "selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}],
            "extendedResourceName": resource,
        },
    }


def resource_slice(node: str, devices: int = 2) -> dict[str, Any]:
    """The node-local ResourceSlice NVIDIA's DRA driver would publish for `node`'s GPUs."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu.nvidia.com"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}"} for i in range(devices)],
        },
    }


@pytest.fixture(scope="module")
def service(start_service: Any, cluster: Any, emulator: Any, wait_for: Any) -> Any:
    emulator.reset()
    cluster.add_nodes(cluster.gpu_node(DRA_NODE, gpus=2), cluster.gpu_node(PLAIN_NODE, gpus=2))
    svc = start_service(registrar="worker")
    wait_for(lambda: svc.debug_state()["nodes"] == 2, 15, "both nodes in the inventory")
    return svc


def _dra(service: Any) -> dict[str, Any]:
    reply = service.get("/debug/state?all=true")
    assert reply.status == 200
    return dict(reply.json()["dra"])


def _worker_metrics(service: Any) -> str:
    url = f"http://{service.worker_env['HAMI_WORKER_METRICS_BIND']}/metrics?hami_gauges=0"
    with urllib.request.urlopen(url, timeout=5) as reply:
        return str(reply.read().decode())


def _filter(service: Any, cluster: Any, name: str, wait_for: Any, until: Any) -> dict[str, Any]:
    """Filter a new pod until `until(result)`: each Gunicorn worker re-reads the facts at most a second
    after the registration worker published them (app/state/drafacts.py)."""
    pod = cluster.create_pod(cluster.gpu_pod(name, memory=1000))  # a share: every pod fits

    def attempt() -> dict[str, Any] | None:
        result: dict[str, Any] = service.filter(pod, [DRA_NODE, PLAIN_NODE])
        return result if until(result) else None

    found: dict[str, Any] = wait_for(attempt, 5, f"filter {name}")
    return found


def test_without_dra_objects_nothing_is_refused(service: Any, cluster: Any, wait_for: Any) -> None:
    wait_for(lambda: _dra(service)["available"], 15, "the worker's first DRA check")
    assert _dra(service)["collisions"] == [] and _dra(service)["overlaps"] == []
    result = _filter(service, cluster, "plain-0", wait_for, lambda r: r["NodeNames"])
    assert result["Error"] == "" and result["NodeNames"] and result["FailedAndUnresolvableNodes"] is None


def test_a_node_whose_gpus_are_dra_devices_is_refused(
    service: Any, cluster: Any, emulator: Any, wait_for: Any
) -> None:
    emulator.seed([resource_slice(DRA_NODE)])
    wait_for(lambda: _dra(service)["overlaps"], 15, "the overlap published")
    assert _dra(service)["overlaps"] == [{"node": DRA_NODE, "drivers": ["gpu.nvidia.com"], "devices": 2}]
    result = _filter(service, cluster, "overlap-0", wait_for, lambda r: r["FailedAndUnresolvableNodes"])
    assert result["Error"] == ""
    assert result["NodeNames"] == [PLAIN_NODE]
    reason = result["FailedAndUnresolvableNodes"][DRA_NODE]
    assert reason.startswith(
        f"hami-scheduler: node {DRA_NODE} also publishes 2 devices through DRA driver gpu.nvidia.com"
    )
    assert "hami_worker_dra_overlapping_nodes 1.0" in _worker_metrics(service)


def test_a_resource_served_by_a_device_class_is_refused_and_warned(
    service: Any, cluster: Any, emulator: Any, wait_for: Any
) -> None:
    emulator.seed([device_class()])
    wait_for(lambda: _dra(service)["collisions"], 15, "the collision published")
    result = _filter(service, cluster, "collided-0", wait_for, lambda r: not r["NodeNames"])
    assert result["Error"] == "" and not result["NodeNames"]
    refused = result["FailedAndUnresolvableNodes"]
    assert set(refused) == {DRA_NODE, PLAIN_NODE}
    assert all(
        r.startswith(f"hami-scheduler: nvidia.com/gpu is served by DRA DeviceClass {CLASS}")
        for r in refused.values()
    )
    assert cluster.pod_annotations("collided-0") == {}  # nothing decided, nothing written

    answer = service.post_json(
        "/webhook", review(api_pod("warned", {"nvidia.com/gpu": "1"}), "uid-warned")
    ).json()
    assert answer["response"]["allowed"] is True
    assert answer["response"]["warnings"] == [
        f"hami-scheduler: nvidia.com/gpu (DeviceClass {CLASS}) is also served by DRA; hami-scheduler will "
        "not place this pod while the DeviceClass maps it (docs/compatibility.md, DRA side by side)"
    ]
    cpu_only = service.post_json("/webhook", review(api_pod("cpu", {"cpu": "1"}), "uid-cpu")).json()
    assert "warnings" not in cpu_only["response"]
    assert 'hami_worker_dra_collisions{resource="nvidia.com/gpu",vendor="NVIDIA"} 1.0' in _worker_metrics(
        service
    )

    emulator.delete("deviceclasses.resource.k8s.io", CLASS)
    wait_for(lambda: not _dra(service)["collisions"], 15, "the collision gone")
    assert "hami_worker_dra_collisions{" not in _worker_metrics(service)
    assert _filter(service, cluster, "collided-1", wait_for, lambda r: r["NodeNames"])["NodeNames"] == [
        PLAIN_NODE
    ]


def test_a_cluster_without_the_resource_api_has_no_dra(service: Any, emulator: Any, wait_for: Any) -> None:
    rule = emulator.add_fault(action="error", status=404, path="^/apis/resource.k8s.io/")
    try:
        wait_for(lambda: not _dra(service)["available"], 15, "DRA unavailable")
        assert _dra(service) == {
            "available": False,
            "checked_at": _dra(service)["checked_at"],
            "collisions": [],
            "overlaps": [],
        }
        assert "hami_worker_dra_available 0.0" in _worker_metrics(service)
    finally:
        emulator.remove_fault(rule)
    log = service.worker.tail(400)
    assert "DRA objects not readable" not in log and "Traceback" not in log
