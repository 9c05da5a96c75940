"""Invariant 1 across processes: 200 pods filtered at once by 4 Gunicorn workers never oversubscribe a GPU.

Capacity: 5 nodes x 2 GPUs x 10 slots (32768 MiB each). Every pod asks for one GPU with 1000 MiB and no
cores, so memory (32 per card) and cores never bind: exactly 10 pods fit per GPU, exactly 100 in all,
whatever the placement. 200 such pods are sent concurrently to /filter with all 5 nodes as candidates.

What the service promises, checked here:
- exactly 100 pods are placed (`NodeNames` = one node), and it is the pods' own annotations in the API —
  not the ledger — that show no device with more than 10 tasks or more memory than it has;
- every other pod is answered with `FailedNodes` naming every candidate with a HAMi reason, or with a
  retryable `Error` (`... retry later`) when capacity raced — never a 5xx, and never an error while
  capacity was still free (that would leave fewer than 100 placed);
- the ledger holds exactly the 100 placed pods, each on the node its annotations name.

Then binds racing for one node's lock from several processes take turns: one CAS wins, the others wait
(bounded) and bind after the device plugin released the lock; none fails.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import pytest
import urllib3

from app.core.codec import decode_pod_single_device

pytestmark = pytest.mark.integration

NODES = [f"node-{i}" for i in range(5)]
GPUS, SLOTS, MEMORY = 2, 10, 32768
PODS, ASK_MEMORY = 200, 1000
CAPACITY = len(NODES) * GPUS * SLOTS  # 100


@pytest.fixture(scope="module")
def service(start_service: Any, cluster: Any, emulator: Any) -> Any:
    emulator.reset()
    cluster.add_nodes(*(cluster.gpu_node(n, gpus=GPUS, count=SLOTS, memory=MEMORY) for n in NODES))
    emulator.seed([cluster.gpu_pod(f"p-{i:03d}", memory=ASK_MEMORY) for i in range(PODS)])
    svc = start_service(workers=4, threads=4)
    return svc


def test_200_concurrent_filters_place_exactly_the_capacity(service: Any, cluster: Any, wait_for: Any) -> None:
    wait_for(lambda: all(service.debug_state(n)["registered"] for n in NODES), 15, "all nodes registered")
    pods = {p["metadata"]["name"]: p for p in cluster.emulator.list("pods", "default")}
    assert len(pods) == PODS

    http = urllib3.PoolManager(maxsize=64, retries=False, timeout=urllib3.Timeout(60.0))

    def send(pod: dict[str, Any]) -> tuple[str, int, dict[str, Any]]:
        body = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": NODES})
        response = http.request(
            "POST",
            f"{service.url}/filter",
            body=body,
            headers={"Content-Type": "application/json", "Connection": "close"},  # spread over workers
        )
        return pod["metadata"]["name"], response.status, orjson.loads(response.data)

    try:
        with ThreadPoolExecutor(max_workers=64) as pool:
            answers = list(pool.map(send, pods.values()))
    finally:
        http.clear()

    assert {status for _, status, _ in answers} == {200}
    placed = {name: a["NodeNames"][0] for name, _, a in answers if a["NodeNames"]}
    errors = {name: a["Error"] for name, _, a in answers if a["Error"]}
    refused = {name: a["FailedNodes"] for name, _, a in answers if not a["NodeNames"] and not a["Error"]}

    assert len(placed) == CAPACITY, f"placed {len(placed)}; errors: {Counter(errors.values())}"
    assert not set(placed) & set(errors)
    for name, answer in ((n, a) for n, _, a in answers if n in placed):
        assert answer["NodeNames"] == [placed[name]] and answer["FailedNodes"] is None and not answer["Error"]
    for name, failed in refused.items():
        assert set(failed) == set(NODES), name
        assert all("CardTimeSlicingExhausted" in reason for reason in failed.values()), failed
    for message in errors.values():  # only a raced capacity may be an Error, and it must say retry
        assert message.startswith("hami-scheduler:") and message.endswith("retry later"), message
    assert len(placed) + len(refused) + len(errors) == PODS
    served = service.counter_by_worker("hami_scheduler_filter_results")
    assert sum(served.values()) == PODS and len(served) >= 2, served  # several processes decided at once

    # -- the API's view, independent of the ledger: sum the allocations the pods carry ------------------
    slots: Counter[str] = Counter()
    memory: Counter[str] = Counter()
    annotated = {}
    for pod in cluster.emulator.list("pods", "default"):
        annotations = pod["metadata"].get("annotations") or {}
        name = pod["metadata"]["name"]
        if "hami.io/vgpu-node" not in annotations:
            continue
        annotated[name] = annotations["hami.io/vgpu-node"]
        assert pod["metadata"]["labels"]["hami.io/vgpu-node"] == annotated[name]
        for group in decode_pod_single_device(annotations["hami.io/vgpu-devices-allocated"]):
            for device in group:
                assert device.uuid.startswith(f"GPU-{annotated[name]}-"), (name, device.uuid)
                slots[device.uuid] += 1
                memory[device.uuid] += device.usedmem
    assert annotated == placed  # exactly the placed pods carry a decision, and on the node answered
    assert len(slots) == len(NODES) * GPUS
    assert max(slots.values()) <= SLOTS and max(memory.values()) <= MEMORY
    assert sum(slots.values()) == CAPACITY  # every slot is used exactly once: all GPUs full

    # -- the ledger agrees with the API ----------------------------------------------------------------
    assert service.debug_state()["reservations"] == CAPACITY
    by_node: defaultdict[str, set[str]] = defaultdict(set)
    for node in NODES:
        state = service.debug_state(node)
        by_node[node] = {r["pod"].split("/")[1] for r in state["reservations"]}
        for device in state["devices"]:
            assert device["used"]["slots"] == slots[device["uuid"]]
            assert device["used"]["memory"] == memory[device["uuid"]]
    assert {pod: node for node, names in by_node.items() for pod in names} == placed


BIND_NODE, BINDS = "bind-node", 8


def test_concurrent_binds_on_one_node_take_turns_on_the_lock(
    service: Any, cluster: Any, wait_for: Any
) -> None:
    """Binds racing for one node's lock from several processes: the CAS lets one in at a time, the others
    wait (bounded) and bind once the device plugin has allocated and released — none fails."""
    cluster.add_nodes(cluster.gpu_node(BIND_NODE, gpus=1, count=SLOTS, memory=MEMORY))
    wait_for(lambda: service.debug_state(BIND_NODE)["registered"], 15, f"{BIND_NODE} registered")
    pods = []
    for i in range(BINDS):
        pod = cluster.create_pod(cluster.gpu_pod(f"b-{i}", memory=ASK_MEMORY))
        assert service.filter(pod, [BIND_NODE])["NodeNames"] == [BIND_NODE]
        pods.append(pod)

    stop = threading.Event()
    holders: list[str] = []
    errors: list[BaseException] = []

    def device_plugin() -> None:
        """Allocate for whoever holds the lock, once kubelet would call Allocate (the pod is bound)."""
        while not stop.is_set():
            try:
                lock = cluster.node_lock(BIND_NODE)
                if lock:
                    name = lock.split(",")[2]
                    if cluster.pod(name)["spec"].get("nodeName") == BIND_NODE:
                        holders.append(name)
                        cluster.allocate(BIND_NODE)
                        continue
            except Exception as exc:  # reported below instead of dying silently
                errors.append(exc)
                return
            stop.wait(0.02)

    plugin = threading.Thread(target=device_plugin, name="device-plugin")
    plugin.start()
    try:
        with ThreadPoolExecutor(max_workers=BINDS) as pool:
            answers = list(pool.map(lambda p: service.bind(p, BIND_NODE), pods))
        wait_for(lambda: errors or cluster.node_lock(BIND_NODE) is None, 15, "the last allocation")
    finally:
        stop.set()
        plugin.join(10)

    assert not errors, errors
    assert answers == [{"Error": ""}] * BINDS
    assert sorted(holders) == sorted(p["metadata"]["name"] for p in pods)  # one turn each
    for pod in pods:
        live = cluster.pod(pod["metadata"]["name"])
        assert live["spec"]["nodeName"] == BIND_NODE
        assert live["metadata"]["annotations"]["hami.io/bind-phase"] == "success"
