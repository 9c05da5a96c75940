"""The Allocate side of the device plugins that do not follow HAMi's lock-and-to-allocate protocol.

- Cambricon's dsmlu plugin (reference vendors §2.3, *plugin not verified*): it serves the pending pod on its
  node whose `CAMBRICON_DSMLU_ASSIGNED` is `false` (the oldest bind first), reads
  `CAMBRICON_DSMLU_PROFILE` (`<card>_<cores>_<256 MiB units>`), sets `CAMBRICON_DSMLU_ASSIGNED: "true"` and
  removes the node's `cambricon.com/dsmlu.lock`.
- Moore Threads' plugin (§2.7, *not verified*): it serves the pending pod whose `mthreads.com/predicate-node`
  is its node (the oldest `predicate-time` first) and checks `mthreads.com/gpu-index` names its GPUs; it
  writes nothing back (HAMi's annotations say nothing about it).
- The AWS Neuron plugin with the scheduler extension (§2.10, *not verified*): it serves the pending pod on its
  node with `NEURON_ALLOCATED: "false"` and `aws.amazon.com/predicate-node` naming the node (the oldest
  `NEURON_ALLOC_TIME` first), hands each container the next ids of `AWS_NEURON_IDS` (device indexes, or core
  ids when `NEURON_RESOURCE_TYPE` names the core resource), checks they exist on the node, and sets
  `NEURON_ALLOCATED: "true"` once every id is handed out.
- Kunlunxin's XPU plugin (§2.8, *not verified*): it serves the pending pod bound to its node whose
  `BAIDU_COM_DEVICE_IDX` names its cards (the oldest bind first), one per Allocate, and checks the count.
- Enflame's DRS plugin (§2.9, *not verified*): it serves the pending pod on its node with
  `enflame.com/gcu-assigned: "false"` (the oldest `gcu-assigned-time` first), marks the first container
  entry of `assigned-containers` asking this many slices allocated, and sets `gcu-assigned: "true"` once
  every entry is.
HAMi's own protocol (NVIDIA, Ascend, Hygon, AMD, Vastai, Biren, Iluvatar, Metax, Kunlun vXPU, Enflame GCU) is
sim.nodes.hamiplugin.DevicePlugin; `PLUGINS` maps a part's `plugin` to the others.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any, Protocol

from sim.kit import podutil
from sim.kit.kube import Kube, KubeError, node_path, pod_path
from sim.nodes.part import VendorPart

Obj = dict[str, Any]
ASSIGNED, PROFILE = "CAMBRICON_DSMLU_ASSIGNED", "CAMBRICON_DSMLU_PROFILE"
DSMLU_LOCK = "cambricon.com/dsmlu.lock"
RELEASE_TRIES = 5
NEURON_IDS, NEURON_ALLOCATED, NEURON_TIME, NEURON_TYPE, NEURON_NODE = (
    "AWS_NEURON_IDS",
    "NEURON_ALLOCATED",
    "NEURON_ALLOC_TIME",
    "NEURON_RESOURCE_TYPE",
    "aws.amazon.com/predicate-node",
)
GPU_INDEX, PREDICATE_NODE, PREDICATE_TIME = (
    "mthreads.com/gpu-index",
    "mthreads.com/predicate-node",
    "mthreads.com/predicate-time",
)


class AllocateError(Exception):
    """Allocate failed; the kubelet rejects the pod with this message."""


class Plugin(Protocol):
    def allocate(self, requested: int) -> tuple[Obj, int | None]:
        """Serve one container asking `requested` devices: the pod served and the container index its
        devices belonged to (None when the plugin cannot tell)."""

    def forget(self, uid: str) -> None:
        """The pod is gone or finished."""


def _oldest_waiting(
    kube: Kube, node: str, waits: Callable[[Obj], bool], stamp: str, numeric: bool, what: str
) -> Obj:
    """The pending pod on `node` this plugin serves next: among those `waits` accepts, the one with the
    oldest `stamp` annotation (a number or an RFC3339 text); AllocateError naming `what` when none waits."""
    _, pods = kube.list("/api/v1/pods", fieldSelector=f"spec.nodeName={node}")
    waiting = [p for p in pods if podutil.phase(p) == "Pending" and not podutil.terminating(p) and waits(p)]
    if not waiting:
        raise AllocateError(f"no pod waits for {what} on node {node}")
    if numeric:
        return min(waiting, key=lambda p: int(podutil.annotations_of(p).get(stamp, "0") or 0))
    return min(waiting, key=lambda p: podutil.annotations_of(p).get(stamp, ""))


def _not_allocated(flag: str, node_key: str, node: str) -> Callable[[Obj], bool]:
    """Accepts a pod whose `flag` annotation still says "false" and whose `node_key` names `node`."""

    def waits(pod: Obj) -> bool:
        notes = podutil.annotations_of(pod)
        return notes.get(flag) == "false" and notes.get(node_key) == node

    return waits


class DsmluPlugin:
    def __init__(self, kube: Kube, node: str, part: VendorPart) -> None:
        self.kube, self.node, self.cards = kube, node, len(part.devices)

    def allocate(self, requested: int) -> tuple[Obj, int | None]:
        pod = _oldest_waiting(
            self.kube,
            self.node,
            lambda p: podutil.annotations_of(p).get(ASSIGNED) == "false",
            "hami.io/bind-time",
            False,
            "a Cambricon MLU",
        )
        profile = podutil.annotations_of(pod).get(PROFILE, "")
        parts = profile.split("_")
        if len(parts) != 3 or not all(p.isdigit() for p in parts) or int(parts[0]) >= self.cards:
            raise AllocateError(f"invalid {PROFILE} {profile!r} on node {self.node}")
        path = pod_path(podutil.namespace(pod), podutil.name(pod))
        self.kube.patch(path, {"metadata": {"annotations": {ASSIGNED: "true"}}})
        for attempt in range(RELEASE_TRIES):  # as HAMi's own release of this lock: retried on a conflict
            try:
                self.kube.patch(node_path(self.node), {"metadata": {"annotations": {DSMLU_LOCK: None}}})
                break
            except KubeError as exc:
                if exc.status != 409 or attempt + 1 == RELEASE_TRIES:
                    raise
        return pod, None

    def forget(self, uid: str) -> None:
        return None


class MthreadsPlugin:
    def __init__(self, kube: Kube, node: str, part: VendorPart) -> None:
        self.kube, self.node, self.gpus = kube, node, len(part.devices)
        self._served: set[str] = set()
        self._lock = threading.Lock()

    def allocate(self, requested: int) -> tuple[Obj, int | None]:
        with self._lock:
            pod = _oldest_waiting(
                self.kube,
                self.node,
                lambda p: (
                    podutil.annotations_of(p).get(PREDICATE_NODE) == self.node
                    and podutil.uid(p) not in self._served
                ),
                PREDICATE_TIME,
                True,
                "a Moore Threads GPU",
            )
            indexes = podutil.annotations_of(pod).get(GPU_INDEX, "").split(",")
            if not indexes or not all(i.isdigit() and int(i) < self.gpus for i in indexes):
                raise AllocateError(f"invalid {GPU_INDEX} {indexes!r} on node {self.node}")
            self._served.add(podutil.uid(pod))
        return pod, None

    def forget(self, uid: str) -> None:
        with self._lock:
            self._served.discard(uid)


class NeuronPlugin:
    def __init__(self, kube: Kube, node: str, part: VendorPart) -> None:
        self.kube, self.node = kube, node
        self.devices = len(part.devices)
        self.cores = max((d.count for d in part.devices), default=0)
        self._given: dict[str, int] = {}  # pod UID -> ids handed out so far
        self._lock = threading.Lock()

    def allocate(self, requested: int) -> tuple[Obj, int | None]:
        with self._lock:
            pod = _oldest_waiting(
                self.kube,
                self.node,
                _not_allocated(NEURON_ALLOCATED, NEURON_NODE, self.node),
                NEURON_TIME,
                True,
                "AWS Neuron devices",
            )
            notes = podutil.annotations_of(pod)
            ids = [i for i in notes.get(NEURON_IDS, "").split(",") if i]
            limit = self.devices * self.cores if NEURON_TYPE in notes else self.devices
            if not all(i.isdigit() and int(i) < limit for i in ids):
                raise AllocateError(f"invalid {NEURON_IDS} {ids!r} on node {self.node}")
            uid = podutil.uid(pod)
            start = self._given.get(uid, 0)
            if start + requested > len(ids):
                raise AllocateError(
                    f"{NEURON_IDS} has {len(ids) - start} ids left, the container asks {requested}"
                )
            self._given[uid] = start + requested
            done = start + requested == len(ids)
        if done:
            path = pod_path(podutil.namespace(pod), podutil.name(pod))
            self.kube.patch(path, {"metadata": {"annotations": {NEURON_ALLOCATED: "true"}}})
        return pod, None

    def forget(self, uid: str) -> None:
        with self._lock:
            self._given.pop(uid, None)


# --- Kunlunxin XPU, Enflame DRS ---
DEVICE_IDX = "BAIDU_COM_DEVICE_IDX"
ASSIGNED_NODE, BIND_TIME = "hami.io/vgpu-node", "hami.io/bind-time"
GCU_ASSIGNED, GCU_TIME, GCU_INDEX, CONTAINERS = (
    "enflame.com/gcu-assigned",
    "enflame.com/gcu-assigned-time",
    "enflame.com/gcu-assigned-index",
    "assigned-containers",
)


class KunlunPlugin:
    def __init__(self, kube: Kube, node: str, part: VendorPart) -> None:
        self.kube, self.node, self.cards = kube, node, len(part.devices)
        self._served: set[str] = set()
        self._lock = threading.Lock()

    def allocate(self, requested: int) -> tuple[Obj, int | None]:
        with self._lock:
            pod = _oldest_waiting(
                self.kube,
                self.node,
                lambda p: (
                    DEVICE_IDX in podutil.annotations_of(p)
                    and podutil.annotations_of(p).get(ASSIGNED_NODE) == self.node
                    and podutil.uid(p) not in self._served
                ),
                BIND_TIME,
                False,
                "a Kunlunxin XPU",
            )
            indexes = podutil.annotations_of(pod)[DEVICE_IDX].split(",")
            if not all(i.isdigit() and int(i) < self.cards for i in indexes):
                raise AllocateError(f"invalid {DEVICE_IDX} {indexes!r} on node {self.node}")
            if len(indexes) != requested:
                raise AllocateError(
                    f"device number not matched: annotation has {len(indexes)}, request has {requested}"
                )
            self._served.add(podutil.uid(pod))
        return pod, None

    def forget(self, uid: str) -> None:
        with self._lock:
            self._served.discard(uid)


class DrsPlugin:
    def __init__(self, kube: Kube, node: str, part: VendorPart) -> None:
        self.kube, self.node, self.gcus = kube, node, len(part.devices)
        self._lock = threading.Lock()

    def allocate(self, requested: int) -> tuple[Obj, int | None]:
        with self._lock:
            pod = _oldest_waiting(
                self.kube,
                self.node,
                _not_allocated(GCU_ASSIGNED, ASSIGNED_NODE, self.node),
                GCU_TIME,
                True,
                "an Enflame DRS partition",
            )
            notes = podutil.annotations_of(pod)
            try:
                entries = json.loads(notes.get(CONTAINERS, ""))
            except ValueError:
                raise AllocateError(f"invalid {CONTAINERS} on pod {podutil.key(pod)}") from None
            index = notes.get(GCU_INDEX, "")
            if not index.isdigit() or int(index) >= self.gcus:
                raise AllocateError(f"invalid {GCU_INDEX} {index!r} on node {self.node}")
            entry = next(
                (e for e in entries.values() if not e.get("allocated") and e.get("request") == requested),
                None,
            )
            if entry is None:
                raise AllocateError(f"no container of {podutil.key(pod)} asks {requested} slices")
            entry["allocated"] = True
            done = all(e.get("allocated") for e in entries.values())
            patch = {CONTAINERS: json.dumps(entries, separators=(",", ":"), sort_keys=True)}
            if done:
                patch[GCU_ASSIGNED] = "true"
            path = pod_path(podutil.namespace(pod), podutil.name(pod))
            self.kube.patch(path, {"metadata": {"annotations": patch}})
        return pod, None

    def forget(self, uid: str) -> None:
        return None


# the plugins that do not follow HAMi's protocol, by VendorPart.plugin
PLUGINS: dict[str, Callable[[Kube, str, VendorPart], Plugin]] = {
    "dsmlu": DsmluPlugin,
    "mthreads": MthreadsPlugin,
    "neuron": NeuronPlugin,
    "kunlun": KunlunPlugin,
    "enflame-drs": DrsPlugin,
}
