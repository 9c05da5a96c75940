"""The kubelet and HAMi's device plugin of every simulated GPU node (the Allocate side of the contract).

For each pod bound to one of our nodes the simulated kubelet admits it (one pod at a time per node, as the
kubelet's sync loop does) and calls the device plugin's Allocate once per container that requests
`nvidia.com/gpu` (init containers first). Allocate behaves like HAMi's (reference §4.10; HAMi
`plugin/server.go` Allocate, `pkg/util` GetPendingPod, `pkg/device` PodAllocationTrySuccess/Failed):

1. find the pod through the node lock `hami.io/mutex.lock` (`<time>,<ns>,<name>`, the pod must still be in
   bind-phase allocating or success), else fall back to a Pending pod on this node with `hami.io/bind-time`,
   bind-phase `allocating` and `hami.io/vgpu-node` = this node;
2. take the first non-empty container group of `hami.io/vgpu-devices-to-allocate`; its device count must
   equal the container's `nvidia.com/gpu` and every UUID must exist on this node; erase the group (re-encode
   the rest, which grows the value by one `;` like HAMi, quirk #43) and patch it;
3. for a group on `mig`-mode GPUs: realize the container's reserved MIG slices and write their runtime
   identity into `hami.io/vgpu-mig-allocations` (sim/nodes/migplugin.py);
4. when no `NVIDIA` device is left: `hami.io/bind-phase: success` and release the lock (a delete with a
   resourceVersion precondition, only if the lock names this pod); on any error: `failed` and release.

Allocate is called by the simulated kubelet (sim/nodes/kubelet.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from typing import Any

from app.core import codec, mig, nodelock
from app.core.model import ContainerDevices
from sim.kit import podutil
from sim.kit.kube import Kube, KubeError, node_path, pod_path
from sim.nodes.migplugin import MigError, MigInstances
from sim.nodes.objects import NodeSpec
from sim.nodes.part import VendorPart
from sim.nodes.vendorplugins import AllocateError

logger = logging.getLogger(__name__)

LOCK = nodelock.LOCK_ANNOTATION
TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
ASSIGNED_NODE = "hami.io/vgpu-node"
VENDOR = "NVIDIA"
Obj = dict[str, Any]


class Stats:
    """Counters and latencies, safe to update from several threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counters: Counter[str] = Counter()
        self.allocate_ms: list[float] = []
        self.admit_ms: list[float] = []

    def count(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self.counters[name] += amount

    def record(self, series: list[float], value: float) -> None:
        with self._lock:
            series.append(value)

    def as_json(self) -> Obj:
        with self._lock:
            return {
                "counters": dict(sorted(self.counters.items())),
                "allocate": podutil.summary(self.allocate_ms),
                "admit": podutil.summary(self.admit_ms),
            }


class DevicePlugin:
    """HAMi's device plugin on one node: Allocate with the same API calls HAMi makes.

    The NVIDIA plugin by default; with `part`, the same protocol for another vendor's HAMi plugin (Ascend,
    Hygon: their own to-allocate annotation; Ascend also needs its `huawei.com/<cw>` runtime info, V§2.1.9).
    `words` are HAMi's DevicesToHandle: the allocation is complete once the plugin's own to-allocate
    annotation contains none of them."""

    def __init__(
        self,
        kube: Kube,
        spec: NodeSpec,
        stats: Stats,
        latency: float = 0.0,
        *,
        part: VendorPart | None = None,
        words: tuple[str, ...] = (VENDOR,),
    ) -> None:
        self.kube = kube
        self.spec = spec
        self.stats = stats
        self.latency = latency
        devices = part.devices if part is not None else spec.devices
        self.to_allocate = part.to_allocate if part is not None else TO_ALLOCATE
        self.runtime = f"huawei.com/{part.key}" if part is not None and part.key.startswith("Ascend") else ""
        self.words = words
        self.uuids = frozenset(d.id for d in devices)
        self.mig = MigInstances({d.id: d for d in devices})

    @property
    def node(self) -> str:
        return self.spec.name

    def pending_pod(self) -> Obj:
        """HAMi's GetPendingPod: the node lock's pod, else the bind-time fallback."""
        node = self.kube.get(node_path(self.node))
        value = podutil.annotations_of(node).get(LOCK)
        if value:
            try:
                lock = nodelock.parse_lock(value)
            except nodelock.LockParseError as exc:
                raise AllocateError(str(exc)) from None
            if lock.namespace and lock.name:
                pod = self.kube.get_or_none(pod_path(lock.namespace, lock.name))
                phase = podutil.annotations_of(pod).get(nodelock.BIND_PHASE) if pod else None
                if pod is not None and phase in (nodelock.PHASE_ALLOCATING, nodelock.PHASE_SUCCESS):
                    return pod
        self.stats.count("pending_pod_fallback")
        _, pods = self.kube.list("/api/v1/pods", fieldSelector=f"spec.nodeName={self.node}")
        for pod in pods:
            notes = podutil.annotations_of(pod)
            # `success` too while devices of ours are left: another vendor's plugin finished first and
            # released the lock (HAMi's multi-vendor quirk, V§1.5)
            phase = notes.get(nodelock.BIND_PHASE)
            left = any(word in notes.get(self.to_allocate, "") for word in self.words)
            if (
                podutil.phase(pod) == "Pending"
                and nodelock.BIND_TIME in notes
                and (phase == nodelock.PHASE_ALLOCATING or (phase == nodelock.PHASE_SUCCESS and left))
                and notes.get(ASSIGNED_NODE) == self.node
            ):
                return pod
        raise AllocateError(f"no binding pod found on node {self.node}")

    def allocate(self, requested: int) -> tuple[Obj, int]:
        """One kubelet Allocate call for a container asking `requested` GPUs. Returns the pod served and the
        container index its device group belonged to."""
        started = time.perf_counter()
        if self.latency > 0:
            time.sleep(self.latency)
        current: Obj | None = None
        try:
            current = self.pending_pod()
            index, devices = self._pop_group(current)
            if len(devices) != requested:
                raise AllocateError("device number not matched")
            missing = [d.uuid for d in devices if d.uuid not in self.uuids]
            if missing:
                raise AllocateError(f"device {missing[0]} not found on node {self.node}")
            if self.runtime and self.runtime not in podutil.annotations_of(current):
                raise AllocateError(f"annotation {self.runtime} not found on the pod")
            self._realize_mig(current, index, devices)
            self._try_success(current)
        except (AllocateError, KubeError, codec.CodecError, MigError) as exc:
            self.stats.count("allocate_failed")
            if current is not None:
                self._finish(current, nodelock.PHASE_FAILED)
            raise AllocateError(str(exc)) from None
        self.stats.record(self.stats.allocate_ms, (time.perf_counter() - started) * 1000.0)
        self.stats.count("allocate_ok")
        return current, index

    def forget(self, uid: str) -> None:
        self.mig.release(uid)  # the plugin's reconciliation frees the pod's instances

    def _realize_mig(self, pod: Obj, index: int, devices: ContainerDevices) -> None:
        realized = self.mig.realize(podutil.uid(pod), podutil.annotations_of(pod), index, devices)
        if realized:
            patch = {"metadata": {"annotations": {mig.ANNOTATION: realized}}}
            self.kube.patch(pod_path(podutil.namespace(pod), podutil.name(pod)), patch)
            self.stats.count("mig_allocations")

    def _pop_group(self, pod: Obj) -> tuple[int, ContainerDevices]:
        """GetNextDeviceRequest + EraseNextDeviceTypeFromAnnotation."""
        key = self.to_allocate
        groups = list(codec.decode_pod_single_device(podutil.annotations_of(pod).get(key, "")))
        for index, group in enumerate(groups):
            if group:
                groups[index] = ()
                patch = {"metadata": {"annotations": {key: codec.encode_pod_single_device(tuple(groups))}}}
                self.kube.patch(pod_path(podutil.namespace(pod), podutil.name(pod)), patch)
                return index, group
        raise AllocateError("device request not found")

    def _try_success(self, pod: Obj) -> None:
        """PodAllocationTrySuccess: success once no device of ours is left to allocate."""
        fresh = self.kube.get(pod_path(podutil.namespace(pod), podutil.name(pod)))
        left = podutil.annotations_of(fresh).get(self.to_allocate, "")
        if not any(word in left for word in self.words):
            self._finish(fresh, nodelock.PHASE_SUCCESS)

    def _finish(self, pod: Obj, phase: str) -> None:
        """PodAllocationSuccess / PodAllocationFailed: the bind phase, then release the node lock."""
        try:
            patch = {"metadata": {"annotations": {nodelock.BIND_PHASE: phase}}}
            self.kube.patch(pod_path(podutil.namespace(pod), podutil.name(pod)), patch)
        except KubeError as exc:
            logger.warning(
                "%s: setting bind-phase %s on %s failed: %s", self.node, phase, podutil.key(pod), exc
            )
        self.release_lock(podutil.namespace(pod), podutil.name(pod))
        self.stats.count(f"bind_phase_{phase}")

    def release_lock(self, namespace: str, name: str) -> bool:
        """HAMi's ReleaseNodeLock with the owner check: delete only our pod's lock, only if unchanged."""
        for _ in range(5):
            node = self.kube.get(node_path(self.node))
            value = podutil.annotations_of(node).get(LOCK)
            if value is None:
                return False
            if "," in value and not nodelock.is_owned_by(value, namespace, name):
                self.stats.count("lock_release_not_owner")
                return False
            rv = podutil.meta(node).get("resourceVersion")
            try:
                self.kube.patch(
                    node_path(self.node), {"metadata": {"annotations": {LOCK: None}, "resourceVersion": rv}}
                )
                self.stats.count("lock_released")
                return True
            except KubeError as exc:
                if exc.status != 409:
                    raise
        return False
