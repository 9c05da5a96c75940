"""What follows a run's window in `python -m bench --control-plane real` (bench/real.py): waiting for the
run's pods to be Running, the correctness check from the API alone, and removing the pods before the next
run. The run's pods are those of `namespace` matching the label `selector`; every call goes through the
client the caller gives, so the run's own API requests are counted (bench/apicounts.py).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sim.cluster.stack import Stack, wait_until
from sim.kit import podutil
from sim.kit.kube import Kube, KubeError, pod_path
from sim.workload.report import summarize

Obj = dict[str, Any]


def settle(stack: Stack, kube: Kube, namespace: str, selector: str, timeout: float) -> float:
    """Wait until every bound pod of the run is Running (its Allocate done, its node lock released); the
    seconds waited (`timeout` at most)."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        stack.check()
        pods = kube.list(pod_path(namespace), labelSelector=selector)[1]
        if all(podutil.phase(p) == "Running" for p in pods if podutil.node_name(p)):
            break
        time.sleep(0.5)
    return round(time.perf_counter() - started, 2)


def correctness(kube: Kube, namespace: str, selector: str, pods: int) -> Obj:
    """The cluster as the API shows it: no device oversubscribed, misplaced or undecodable, no node lock
    held, and each of the run's `pods` pods bound."""
    # whole lists at 5,000 nodes on a loaded machine: more time than one API call's default
    all_pods = kube.request("GET", "/api/v1/pods", timeout=180.0)["items"]
    all_nodes = kube.request("GET", "/api/v1/nodes", timeout=180.0)["items"]
    verdict = summarize(all_pods, all_nodes)
    key, _, value = selector.partition("=")
    mine = [p for p in all_pods if podutil.namespace(p) == namespace and podutil.labels(p).get(key) == value]
    bound = sum(1 for p in mine if podutil.node_name(p))
    result = {
        "oversubscribed_devices": verdict["oversubscribed_devices"],
        "misplaced_devices": verdict["misplaced_devices"][:10],
        "undecodable_allocations": verdict["undecodable_allocations"][:10],
        "node_locks_held": verdict["node_locks_held"],
        "bound": bound,
        "running": sum(1 for p in mine if podutil.phase(p) == "Running"),
    }
    result["ok"] = (
        verdict["oversubscribed_devices"] == 0
        and not verdict["misplaced_devices"]
        and not verdict["undecodable_allocations"]
        and verdict["node_locks_held"] == 0
        and bound == pods
    )
    return result


def _delete_pod(kube: Kube, namespace: str, name: str) -> None:
    try:
        kube.delete(pod_path(namespace, name), grace=0)
    except KubeError as exc:
        if exc.status != 404:
            raise


def delete_all(stack: Stack, kube: Kube, namespace: str, selector: str, timeout: float = 300.0) -> None:
    """Delete the run's pods and wait until they are gone."""
    # one DELETE per pod, in parallel: a deletecollection of hundreds of pods outlasts kube-apiserver's
    # request timeout on this machine at 5,000 nodes; grace 0: removed at once, as a finished kubelet would
    names = [podutil.name(p) for p in kube.list(pod_path(namespace), labelSelector=selector)[1]]
    with ThreadPoolExecutor(8, thread_name_prefix="bench-delete") as executor:
        list(executor.map(lambda name: _delete_pod(kube, namespace, name), names))
    wait_until(
        f"the pods {selector} to be gone",
        lambda: not kube.list(pod_path(namespace), labelSelector=selector)[1],
        timeout,
        stack,
        0.5,
    )
