"""The main flow through real processes: filter -> bind -> device-plugin allocation (reference §4.10, §5).

A GPU pod is filtered and gets HAMi's annotations and label byte-for-byte; bind takes the node lock
(`<RFC3339>,<ns>,<pod>`), stamps `bind-phase: allocating` and `bind-time`, and binds; the device plugin's
Allocate (performed here through the real client, as HAMi's plugin does it) pops the to-allocate groups,
sets `success` and releases the lock. A second pod is refused while the first holds the lock, with HAMi's
contention text in our bounded-wait variant, and binds after the release (after kube-scheduler's
re-filter, which is what follows a failed bind).

Runs once with the registrar stand-in, and once with the real registration worker when `python -m
workers` exists.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from app.core.codec import decode_pod_single_device

pytestmark = pytest.mark.integration

NODE = "gpu-a"
LOCK_WAIT = "1s"
LOCK_VALUE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ),(?P<ns>[^,]+),(?P<name>[^,]+)$")
DEVICES = re.compile(rf"^GPU-{NODE}-[01],NVIDIA,(\d+),(\d+):;$")


@pytest.fixture(scope="module", params=["standin", "worker"])
def flow(request: pytest.FixtureRequest, start_service: Any, cluster: Any, emulator: Any) -> Iterator[Any]:
    if request.param == "worker" and not request.getfixturevalue("worker_is_available"):
        pytest.skip("python -m workers is not available")
    emulator.reset()
    cluster.add_nodes(cluster.gpu_node(NODE, gpus=2))
    service = start_service(env={"HAMI_BIND_LOCK_WAIT": LOCK_WAIT}, registrar=request.param)
    yield service
    service.close()  # before the other variant starts


def _registered(service: Any, node: str) -> bool:
    return bool(service.debug_state(node)["registered"])


def _reservation(service: Any, node: str, uid: str) -> dict[str, Any] | None:
    found = [r for r in service.debug_state(node)["reservations"] if r["uid"] == uid]
    return found[0] if found else None


def test_filter_bind_allocate_and_lock_contention(flow: Any, cluster: Any, wait_for: Any) -> None:
    service = flow
    wait_for(lambda: _registered(service, NODE), 15, f"{NODE} in the inventory")

    # -- filter: one node, HAMi's annotations and label ------------------------------------------------
    first = cluster.create_pod(cluster.gpu_pod("train-0", memory=4000, cores=30))
    before = int(time.time())
    result = service.filter(first, [NODE, "cpu-only"])
    assert result["Error"] == ""
    assert result["NodeNames"] == [NODE]
    annotations = cluster.pod_annotations("train-0")
    assert annotations["hami.io/vgpu-node"] == NODE
    assert before - 1 <= int(annotations["hami.io/vgpu-time"]) <= int(time.time()) + 1
    to_allocate = annotations["hami.io/vgpu-devices-to-allocate"]
    assert DEVICES.match(to_allocate), to_allocate
    assert to_allocate.endswith(",NVIDIA,4000,30:;")
    assert annotations["hami.io/vgpu-devices-allocated"] == to_allocate
    assert cluster.pod("train-0")["metadata"]["labels"]["hami.io/vgpu-node"] == NODE
    assert "hami.io/bind-phase" not in annotations
    reservation = _reservation(service, NODE, first["metadata"]["uid"])
    assert reservation is not None and reservation["state"] == "confirmed"

    # -- bind: the lock, bind-phase allocating, bind-time, the binding ---------------------------------
    assert service.bind(first, NODE) == {"Error": ""}
    bound = cluster.pod("train-0")
    assert bound["spec"]["nodeName"] == NODE
    annotations = bound["metadata"]["annotations"]
    assert annotations["hami.io/bind-phase"] == "allocating"
    assert before - 1 <= int(annotations["hami.io/bind-time"]) <= int(time.time()) + 1
    lock = cluster.node_lock(NODE)
    match = LOCK_VALUE.match(lock or "")
    assert match and match["ns"] == "default" and match["name"] == "train-0", lock
    stamped = datetime.strptime(match[1], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    assert before - 2 <= stamped <= time.time() + 1
    assert _reservation(service, NODE, first["metadata"]["uid"])["state"] == "bound"  # type: ignore[index]

    # -- a second pod fits, but its bind finds the node locked by train-0 ------------------------------
    second = cluster.create_pod(cluster.gpu_pod("train-1", memory=2000))
    assert service.filter(second, [NODE])["NodeNames"] == [NODE]
    refused = service.bind(second, NODE)
    assert refused["Error"] == (
        f"timed out after {LOCK_WAIT} waiting for node {NODE} to be unlocked: node lock contention"
    )
    assert cluster.node_lock(NODE) == lock  # train-0's lock is untouched
    assert "nodeName" not in cluster.pod("train-1")["spec"]
    assert _reservation(service, NODE, second["metadata"]["uid"]) is None  # forgotten on failure

    # -- the device plugin allocates train-0: groups popped, success, lock released ---------------------
    assert cluster.allocate(NODE) == ("default", "train-0")
    annotations = cluster.pod_annotations("train-0")
    assert annotations["hami.io/bind-phase"] == "success"
    assert "NVIDIA" not in annotations["hami.io/vgpu-devices-to-allocate"]
    assert annotations["hami.io/vgpu-devices-allocated"] == to_allocate
    assert cluster.node_lock(NODE) is None

    # -- kube-scheduler retries train-1: filter again, bind, allocate ----------------------------------
    again = service.filter(cluster.pod("train-1"), [NODE])
    assert again["NodeNames"] == [NODE] and again["Error"] == ""
    assert service.bind(second, NODE) == {"Error": ""}
    lock = cluster.node_lock(NODE)
    assert lock is not None and lock.endswith(",default,train-1")
    assert cluster.allocate(NODE) == ("default", "train-1")
    assert cluster.node_lock(NODE) is None

    # both reservations are counted on the node, and they match the pods' own annotations
    state = service.debug_state(NODE)
    reserved = {r["pod"]: r for r in state["reservations"]}
    assert set(reserved) == {"default/train-0", "default/train-1"}
    used_mem = sum(d["used"]["memory"] for d in state["devices"])
    assert used_mem == 6000
    for name in ("train-0", "train-1"):
        allocated = decode_pod_single_device(cluster.pod_annotations(name)["hami.io/vgpu-devices-allocated"])
        assert sum(d.usedmem for group in allocated for d in group) in (4000, 2000)

    # the events kube-scheduler users look at were posted
    def reasons() -> set[str]:
        events = cluster.core.list_namespaced_event("default").items
        return {e.reason for e in events if e.involved_object.name == "train-0"}

    wait_for(lambda: {"FilteringSucceed", "BindingSucceed"} <= reasons(), 10, "filter and bind events")
