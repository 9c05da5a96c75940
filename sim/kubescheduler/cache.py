"""kube-scheduler's cache for the simulated scheduler: the node tree (zone round robin), the requested
resources per node (bound pods + assumed pods) and the in-tree filters that run before the extender.

The order of `NodeNames` the extender receives is kube-scheduler's: `nodeTree.list()` visits the zones in the
order they first appeared and takes one node per zone per round (node 1 of zone a, node 1 of zone b, ...,
node 2 of zone a, ...), zone key = region + ":\\x00:" + zone. As in `findNodesThatPassFilters`, the search
starts at a rotating index and stops after `numFeasibleNodesToFind` feasible nodes (all nodes below 100; else
the adaptive percentage 50 - n/125, at least 5 % and 100 nodes).

In-tree filters (the subset that matters here): NodeUnschedulable, TaintToleration (NoSchedule/NoExecute),
NodeAffinity via `spec.nodeSelector`, and NodeResourcesFit for cpu, memory, ephemeral-storage, pods and
extended resources; the extender's managed resources (`ignoredByScheduler: true`) are not checked.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from app.core import quantity
from sim.kit import podutil

Obj = dict[str, Any]
ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")
MIN_FEASIBLE_NODES = 100
MIN_FEASIBLE_PERCENT = 5


def zone_key(node: Mapping[str, Any]) -> str:
    """utilnode.GetZoneKey."""
    labels = podutil.labels(node)
    zone = next((labels[k] for k in ZONE_LABELS if k in labels), "")
    region = next((labels[k] for k in REGION_LABELS if k in labels), "")
    return "" if not zone and not region else f"{region}:\x00:{zone}"


class NodeTree:
    """kube-scheduler's nodeTree: zones in order of first appearance, nodes in order of addition."""

    def __init__(self) -> None:
        self.zones: list[str] = []
        self.tree: dict[str, list[str]] = {}

    def add(self, name: str, zone: str) -> None:
        nodes = self.tree.get(zone)
        if nodes is None:
            self.zones.append(zone)
            self.tree[zone] = [name]
        elif name not in nodes:
            nodes.append(name)

    def remove(self, name: str, zone: str) -> None:
        nodes = self.tree.get(zone)
        if nodes is None or name not in nodes:
            return
        nodes.remove(name)
        if not nodes:
            del self.tree[zone]
            self.zones.remove(zone)

    def list(self) -> list[str]:
        result: list[str] = []
        total = sum(len(n) for n in self.tree.values())
        index = 0
        while len(result) < total:
            for zone in self.zones:
                nodes = self.tree[zone]
                if index < len(nodes):
                    result.append(nodes[index])
            index += 1
        return result


def feasible_to_find(all_nodes: int, percentage: int = 0) -> int:
    """numFeasibleNodesToFind (percentage 0 = adaptive)."""
    if all_nodes < MIN_FEASIBLE_NODES:
        return all_nodes
    if percentage <= 0:
        percentage = max(MIN_FEASIBLE_PERCENT, 50 - all_nodes // 125)
    return max(MIN_FEASIBLE_NODES, all_nodes * percentage // 100)


def _tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator") == "Exists":
            if not t.get("key") or t.get("key") == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _pod_request(pod: Mapping[str, Any], ignored: frozenset[str]) -> dict[str, Fraction]:
    request = {k: v for k, v in podutil.pod_requests(pod).items() if k not in ignored and v > 0}
    request["pods"] = Fraction(1)
    return request


class SchedulerCache:
    """Nodes, the node tree and the resources requested on each node. Thread-safe."""

    def __init__(self, ignored_resources: Iterable[str] = (), percentage: int = 0) -> None:
        self.ignored = frozenset(ignored_resources)
        self.percentage = percentage
        self._lock = threading.Lock()
        self.nodes: dict[str, Obj] = {}
        self._zones: dict[str, str] = {}
        self.tree = NodeTree()
        self._allocatable: dict[str, dict[str, Fraction]] = {}
        self._requested: dict[str, dict[str, Fraction]] = {}
        self._pods: dict[str, tuple[str, dict[str, Fraction]]] = {}  # pod key -> node, request
        self._assumed: set[str] = set()
        self._next_start = 0

    # --- nodes ----------------------------------------------------------------------------------------------

    def set_node(self, node: Obj) -> None:
        name = podutil.name(node)
        zone = zone_key(node)
        status = node.get("status") or {}
        allocatable: dict[str, Fraction] = {}
        for res, raw in (status.get("allocatable") or {}).items():
            try:
                allocatable[str(res)] = quantity.parse(raw)
            except quantity.QuantityError:
                continue
        with self._lock:
            old_zone = self._zones.get(name)
            if old_zone is not None and old_zone != zone:
                self.tree.remove(name, old_zone)
            if old_zone != zone:
                self.tree.add(name, zone)
            self._zones[name] = zone
            self.nodes[name] = node
            self._allocatable[name] = allocatable

    def remove_node(self, name: str) -> None:
        with self._lock:
            zone = self._zones.pop(name, None)
            if zone is not None:
                self.tree.remove(name, zone)
            self.nodes.pop(name, None)
            self._allocatable.pop(name, None)

    # --- pods -----------------------------------------------------------------------------------------------

    def _add(self, key: str, node: str, request: dict[str, Fraction]) -> None:
        self._drop(key)
        self._pods[key] = (node, request)
        totals = self._requested.setdefault(node, {})
        for res, amount in request.items():
            totals[res] = totals.get(res, Fraction(0)) + amount

    def _drop(self, key: str) -> None:
        previous = self._pods.pop(key, None)
        self._assumed.discard(key)
        if previous is not None:
            totals = self._requested.get(previous[0], {})
            for res, amount in previous[1].items():
                totals[res] = totals.get(res, Fraction(0)) - amount

    def set_pod(self, pod: Mapping[str, Any]) -> None:
        """A pod seen by the informer: counted on its node while bound and not terminal."""
        key, node = podutil.key(pod), podutil.node_name(pod)
        with self._lock:
            if not node or podutil.phase(pod) in podutil.TERMINAL:
                if key not in self._assumed or node:
                    self._drop(key)
                return
            self._add(key, node, _pod_request(pod, self.ignored))

    def remove_pod(self, key: str) -> None:
        with self._lock:
            self._drop(key)

    def assume(self, pod: Mapping[str, Any], node: str) -> None:
        with self._lock:
            self._add(podutil.key(pod), node, _pod_request(pod, self.ignored))
            self._assumed.add(podutil.key(pod))

    def forget(self, key: str) -> None:
        with self._lock:
            if key in self._assumed:
                self._drop(key)

    # --- filtering ------------------------------------------------------------------------------------------

    def _fits(self, pod: Mapping[str, Any], name: str, request: Mapping[str, Fraction]) -> str:
        """Empty when the node passes the in-tree filters, else the reason."""
        node = self.nodes[name]
        spec = node.get("spec") or {}
        tolerations = [t for t in podutil.spec(pod).get("tolerations") or [] if isinstance(t, dict)]
        if spec.get("unschedulable") and not _tolerates(
            tolerations, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
        ):
            return "node(s) were unschedulable"
        for taint in spec.get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(tolerations, taint):
                return "node(s) had untolerated taint"
        selector = podutil.spec(pod).get("nodeSelector") or {}
        labels = podutil.labels(node)
        if any(labels.get(k) != v for k, v in selector.items()):
            return "node(s) didn't match Pod's node affinity/selector"
        allocatable = self._allocatable.get(name, {})
        requested = self._requested.get(name, {})
        for res, amount in request.items():
            if requested.get(res, Fraction(0)) + amount > allocatable.get(res, Fraction(0)):
                return "Too many pods" if res == "pods" else f"Insufficient {res}"
        return ""

    def feasible(self, pod: Mapping[str, Any]) -> tuple[list[str], dict[str, str]]:
        """The nodes passing the in-tree filters in kube-scheduler's order, and the reasons of the others."""
        request = _pod_request(pod, self.ignored)
        with self._lock:
            order = self.tree.list()
            if not order:
                return [], {}
            wanted = feasible_to_find(len(order), self.percentage)
            start = self._next_start % len(order)
            feasible: list[str] = []
            failed: dict[str, str] = {}
            processed = 0
            for offset in range(len(order)):
                name = order[(start + offset) % len(order)]
                processed += 1
                reason = self._fits(pod, name, request)
                if reason:
                    failed[name] = reason
                else:
                    feasible.append(name)
                    if len(feasible) >= wanted:
                        break
            self._next_start = (start + processed) % len(order)
            return feasible, failed
