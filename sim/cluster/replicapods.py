"""Our replicas as the Pods of the chart's Deployment on the real control plane, so `kubectl drain` works.

Why: the test control plane runs no Deployment controller and no kubelets for the scheduler's own pods, so
nobody creates them, reports them Ready or stops their containers when they are evicted — all of which a
drain of the leader's node goes through. `ReplicaPods` plays
these parts for the replicas `sim.cluster.realcluster` started with `replica_nodes` (each with NODE_NAME set):

- creates the replicas' Nodes and the pods (`sim.cluster.realcluster.pod_name(i)`, the chart's pod labels,
  bound to node i) and the chart's PodDisruptionBudget;
- every 0.2 s sets each pod's Ready condition from the replica's /readyz, as the chart's readiness probe;
- once a pod is being deleted (an eviction), SIGTERMs the replica's containers together (worker, both
  Gunicorns, kube-scheduler) as a kubelet does, and then removes the pod (grace 0);
- the budget's status comes from kube-controller-manager's disruption controller, which the real control
  plane runs (sim.controlplane.controllermanager); started without it (`controller_manager=False`),
  `sim.cluster.disruption.DisruptionController` computes it instead.

Invariant: a replica's processes are stopped only after its pod was marked for deletion by someone else.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

import urllib3

from sim.cluster.disruption import DisruptionController
from sim.cluster.realcluster import pod_name, replica_suffix
from sim.cluster.stack import Stack
from sim.controlplane import chart, controllermanager
from sim.controlplane.base import RELEASE_NAMESPACE
from sim.kit.kube import KubeError
from sim.kit.ticker import Ticker

PODS = f"/api/v1/namespaces/{RELEASE_NAMESPACE}/pods"


def _node(name: str) -> dict[str, Any]:
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"conditions": [ready]},
    }


class ReplicaPods:
    def __init__(self, stack: Stack, values: Mapping[str, Any], nodes: Sequence[str]) -> None:
        assert stack.kube is not None
        self._stack, self._kube = stack, stack.kube
        self._objects = chart.render(values)
        self.names = [pod_name(i) for i in range(len(stack.replica_urls))]
        self._nodes = dict(zip(self.names, nodes, strict=True))
        budget = chart.find(self._objects, "PodDisruptionBudget")
        running = stack.control_plane.processes() if stack.control_plane is not None else {}
        name = budget["metadata"]["name"]
        self._budget_path = f"/apis/policy/v1/namespaces/{RELEASE_NAMESPACE}/poddisruptionbudgets/{name}"
        self._disruption = (
            None
            if controllermanager.NAME in running
            else DisruptionController(self._kube, RELEASE_NAMESPACE, name)
        )
        self._budget_object = budget
        self.ready_since: dict[str, float] = {}  # pod -> when its Ready condition last turned True
        self.stopped: dict[str, float] = {}  # pod -> when its deletion was seen and its containers stopped
        self._reported: dict[str, bool] = {}
        self._kubelet = Ticker("replica-kubelet", 0.2, self._tick)

    def __enter__(self) -> ReplicaPods:
        template = chart.find(self._objects, "Deployment")["spec"]["template"]
        for node in sorted(set(self._nodes.values())):
            self._kube.create("/api/v1/nodes", _node(node))
        for name, node in self._nodes.items():
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": RELEASE_NAMESPACE,
                    "labels": template["metadata"]["labels"],
                },
                "spec": {
                    "nodeName": node,
                    "terminationGracePeriodSeconds": 10,
                    "containers": [
                        {"name": c["name"], "image": c["image"]} for c in template["spec"]["containers"]
                    ],
                },
            }
            self._kube.create(PODS, pod)
            self._report(name, False)
        chart.apply(self._kube, [self._budget_object])
        if self._disruption is not None:
            self._disruption.start()
        self._kubelet.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._kubelet.stop(10)
        if self._disruption is not None:
            self._disruption.close()

    def budget_status(self) -> dict[str, Any]:
        """The chart's PodDisruptionBudget's status as the eviction API reads it."""
        return dict(self._kube.get(self._budget_path).get("status") or {})

    def _report(self, name: str, ready: bool) -> None:
        if self._reported.get(name) == ready:
            return
        condition = {"type": "Ready", "status": str(ready)}
        self._kube.patch(f"{PODS}/{name}/status", {"status": {"phase": "Running", "conditions": [condition]}})
        self._reported[name] = ready

    def _ready(self, index: int) -> bool:
        try:
            url = f"{self._stack.replica_urls[index]}/readyz"
            return bool(self._stack.http.request("GET", url, retries=False, timeout=2.0).status == 200)
        except (OSError, urllib3.exceptions.HTTPError):  # a stopped replica refuses the connection
            return False

    def _terminate(self, index: int, name: str) -> None:
        """The kubelet's part of a pod deletion: SIGTERM every container at once, then remove the pod."""
        self.stopped[name] = time.monotonic()
        suffix = replica_suffix(index)
        self._stack.stop(f"scheduler{suffix}", f"extender{suffix}", f"service{suffix}", f"worker{suffix}")
        try:
            self._kube.delete(f"{PODS}/{name}", grace=0)
        except KubeError as exc:
            if exc.status != 404:
                raise

    def _tick(self) -> None:
        for index, name in enumerate(self.names):
            if name in self.stopped:
                continue
            try:
                pod = self._kube.get_or_none(f"{PODS}/{name}")
                if pod is None or pod["metadata"].get("deletionTimestamp"):
                    self._terminate(index, name)
                    continue
                ready = self._ready(index)
                if ready:
                    self.ready_since.setdefault(name, time.monotonic())
                else:
                    self.ready_since.pop(name, None)
                self._report(name, ready)
            except KubeError:  # the next round tries again
                continue
