"""Helpers shared by the failover tests (test_failover_*.py): the two GPU nodes they schedule on, timing and
reporting a measured duration, one kube-scheduler cycle, a replica's refusal, and invariant 3 on a replica.

Test modules cannot import from conftest, so these live here (tests/integration is on pytest's pythonpath).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
import urllib3

from workers.reconcile import compare, same

T = TypeVar("T")
NODES = ["gpu-a", "gpu-b"]


def timed(call: Callable[[], T]) -> tuple[T, float]:
    started = time.perf_counter()
    result = call()
    return result, time.perf_counter() - started


def ready(service: Any) -> bool:
    try:
        return bool(service.get("/readyz").status == 200)
    except urllib3.exceptions.HTTPError:  # a killed replica refuses connections
        return False


def report(request: pytest.FixtureRequest, name: str, seconds: float) -> None:
    request.node.user_properties.append((name, round(seconds, 3)))
    sys.stdout.write(f"\n[measured] {request.node.name}: {name} = {seconds:.3f} s\n")


def place(service: Any, cluster: Any, name: str, memory: int) -> str:
    """kube-scheduler's cycle for one GPU pod through `service`, then the device plugin's Allocate."""
    pod = cluster.create_pod(cluster.gpu_pod(name, memory=memory))
    answer = service.filter(pod, NODES)
    assert answer["Error"] == "" and len(answer["NodeNames"] or []) == 1, answer
    node = str(answer["NodeNames"][0])
    assert service.bind(pod, node) == {"Error": ""}
    assert cluster.allocate(node) == ("default", name)
    return node


def assert_refuses(
    service: Any,
    cluster: Any,
    name: str,
    why: str,
    request: pytest.FixtureRequest,
    memory: int,
    label: str = "",
) -> None:
    """/filter and /bind answer `why` as a retryable Error within 1 s and change nothing."""
    pod = cluster.create_pod(cluster.gpu_pod(name, memory=memory))
    answer, filter_seconds = timed(lambda: service.filter(pod, NODES))
    assert answer["Error"] == f"hami-scheduler: {why}; retry later" and not answer["NodeNames"], answer
    bound, bind_seconds = timed(lambda: service.bind(pod, NODES[0]))
    assert bound == {"Error": f"hami-scheduler: {why}; retry later"}
    report(request, f"/filter refusal{label}", filter_seconds)
    report(request, f"/bind refusal{label}", bind_seconds)
    assert filter_seconds < 1.0 and bind_seconds < 1.0
    after = cluster.pod(name)
    assert "nodeName" not in after["spec"]
    assert not any(k.startswith("hami.io/") for k in after["metadata"].get("annotations") or {})
    assert service.ledger.get(pod["metadata"]["uid"]) is None
    assert all(cluster.node_lock(n) is None for n in NODES)


def served_usage(service: Any) -> dict[str, dict[str, int]]:
    """GPU UUID -> the usage the replica serves decisions from (/debug/state), for used devices."""
    usage = {}
    for node in NODES:
        for device in service.debug_state(node)["devices"]:
            if any(device["used"].values()):
                usage[device["uuid"]] = device["used"]
    return usage


def assert_ledger_matches_api(service: Any, cluster: Any) -> None:
    """Invariant 3 on `service`: its ledger equals a rebuild from a fresh pod list (in-flight rows too),
    and the usage it serves equals what the pods' annotations hold."""
    rebuilt = {e.uid: e for e in cluster.rebuild_ledger()}
    live = {e.uid: e for e in service.ledger.all_entries()}
    assert not compare(rebuilt.values(), live.values())
    assert live.keys() == rebuilt.keys() and all(same(rebuilt[u], live[u]) for u in live), (rebuilt, live)
    assert served_usage(service) == cluster.device_usage()
