"""The seam between the decision core and one device vendor (HAMi's `Devices` interface, vendors §1.1).

The core owns the algorithm every vendor shares (requests per container, the init/app phases, device and
node scores, sorting, quota, usage accounting, the node locks at bind); a vendor owns what differs, and
everything HAMi's 13 vendors do differently fits one of these hooks without a special case in the core:

- discovery: `registered` / `discover` read a `NodeView` (annotations, labels, capacity, allocatable), so
  devices may come from a register annotation (NVIDIA, Ascend, Hygon, ...) or be derived from node capacity
  and labels (Cambricon, Mthreads, Kunlunxin, AWS Neuron, ...); node-wide facts go to `Discovery.info`;
  `reads` names the fields beyond the common ones, so the worker's informers keep them;
- health: `health` decides with the vendor's own rule (the generic handshake, NVIDIA's bookkeeping, "always
  healthy", "capacity > 0") and names the handshake stamp to write, if any;
- requests, visibility and Fit: `container_request`, `sees` (which devices a request may use), `fit` with
  the pod's earlier allocations of this vendor (`FitContext.allocated`) and the namespace quota callback;
- usage: `add_usage` (the working copy), `usage_tags` (what later Fits may need to know about the pods on a
  device, kept in the ledger: HAMi's PodInfos);
- node score: `score_node` (Ascend network topology, Metax topology), added to HAMi's base node score;
- filter annotations: `pod_annotations` with pod and node context (`AnnotationContext`), and `pod_keys`: every
  pod key it writes, by role (`PodKey`: the allocation the device plugin reads, the flags the plugin flips,
  informational). The vendor is the single source of truth for its keys: the webhook's stripping and
  protection, the stale-key cleanup of a re-filtered pod, the informers' pod shape and `inspect` all derive
  from these declarations (app.core.podkeys); the core keeps no vendor key list;
- webhook: `mutate_container`; quota: `resources` and `memory_factor`;
- node lock: `lock` (HAMi's shared `hami.io/mutex.lock`, Cambricon's own key, or none). Bind takes every
  distinct lock the pod's vendors name and releases all of them on any failure.

Vendors are pure and frozen; they live in `app.devices` (one folder each, listed in its registry), which
depends on this module and never the other way round. docs/vendors.md explains how to add one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, cast, runtime_checkable

from app.core.health import Health, Reported
from app.core.model import (
    ContainerDevice,
    ContainerDevices,
    DeviceInfo,
    DeviceRequest,
    DeviceUsage,
    DeviceUse,
    NodeDevices,
    PodRequests,
    PodSingleDevice,
)

MUTEX_LOCK = "hami.io/mutex.lock"  # HAMi's shared node lock (reference S§5.2)


class InvalidRequest(ValueError):
    """A container asks for a device resource with a value we refuse (e.g. memory `16Gi`)."""


class AdmissionError(ValueError):
    """The webhook must reject the pod with this message (HAMi `Errored(500, err)`)."""


class AddUsageError(ValueError):
    """A device chosen by `fit` cannot be accounted (HAMi `AddResourceUsage` failed, e.g. no MIG slice)."""


@dataclass(frozen=True, slots=True)
class ResourceNames:
    """A vendor's extended resources. `memory`/`cores` are also its quota resources (`limits.<name>`);
    names a vendor does not have are empty."""

    count: str
    memory: str = ""
    memory_percentage: str = ""
    cores: str = ""
    priority: str = ""


@dataclass(frozen=True, slots=True)
class NodeView:
    """What a vendor may read of a Node (plain JSON values, as the API server gives them)."""

    name: str
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    capacity: Mapping[str, Any] = field(default_factory=dict)
    allocatable: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Reads:
    """What of a Node and of a scheduled Pod a vendor reads, beyond what every vendor has kept for it:
    node annotations starting with `hami.io/node-`, the allocatable count resource, and pod annotations
    starting with `hami.io/` or naming an allocation. The worker's informers keep only these fields
    (workers/shapes.py), so a vendor whose discovery, health or `usage_tags` reads anything else names it
    here (Ascend's `hami-vnpu-core`, Cambricon's capacity, AWS Neuron's instance-type label, ...)."""

    node_annotations: tuple[str, ...] = ()
    node_labels: tuple[str, ...] = ()
    capacity: tuple[str, ...] = ()
    pod_annotations: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Discovery:
    """A vendor's devices on one node, and what it learned about the node as a whole (JSON values)."""

    devices: tuple[DeviceInfo, ...]
    info: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LockSpec:
    """A node lock a vendor's pods take at bind (reference vendors §1.5).

    `owned`: the value is HAMi's `<RFC3339>,<namespace>,<pod>` (the device plugin finds the pod through it,
    re-entrant for the same pod); otherwise a bare RFC3339 time that names nobody (Cambricon's
    `cambricon.com/dsmlu.lock`). `expire`: the vendor's own fixed expiry, None for HAMI_NODELOCK_EXPIRE.
    """

    annotation: str = MUTEX_LOCK
    owned: bool = True
    expire: timedelta | None = None


SHARED_LOCK = LockSpec()
# The lock a pod's bind takes for its vendors that take none and whose plugins find their pod by their own
# annotations (AWS Neuron, Moore Threads, Kunlunxin XPU, Enflame DRS). The bind re-check reads the node's pods
# and decides, and only a lock makes that read and the binding one step across replicas — without it two
# leaders' binds of pods given the same device both pass (the mixed two-leader storm bound one Neuron device
# twice, 12 ms apart). And it is held until the kubelet admitted the pod: these plugins serve "the oldest
# pod waiting on this node", so two such pods waiting at once can be served each other's devices (the CI
# storm: a Kunlunxin Allocate asking 4 XPUs was served a pod given 2). No plugin knows it: the next bind
# takes it over once its holder is admitted (app.core.nodelock, Holder.ALLOCATED), the leader's sweep
# releases it.
BIND_LOCK = LockSpec("hami.io/bind.lock")

# The roles of a pod key a vendor writes (`PodKey.role`).
ALLOCATION = "allocation"  # the device plugin hands out devices from it: immutable once the pod is bound
FLAG = "flag"  # the device plugin flips it after the bind (e.g. `NEURON_ALLOCATED: "false"` -> "true")
INFO = "info"  # informational (times): nobody allocates from it
ROLES = (ALLOCATION, FLAG, INFO)


def unchanged(old: str | None, new: str | None) -> bool:
    """The default `PodKey.amend`: no change at all."""
    return old == new


@dataclass(frozen=True, slots=True)
class PodKey:
    """One pod annotation a vendor writes at filter time, and who may change it afterwards.

    Only the webhook's trusted users (the scheduler's and the device plugins' service accounts) may change
    a declared key, on any pod; nobody else may add, change or remove one, and a new pod carrying one had
    it forged (removed at admission). Once the pod is bound:
    - an `ALLOCATION` key changes only as `amend(old, new)` allows, for trusted users too: by default not
      at all; a key the plugin works through (HAMi's to-allocate list it empties container by container,
      MIG runtime identity, Enflame's per-container `allocated` marks) declares the relation that allows
      exactly the plugin's own writes and nothing that names other devices;
    - a `FLAG` or `INFO` key may be changed by trusted users.
    `plugin` names the device plugin that writes the key after the bind ("" when only the scheduler
    writes it): the trusted users must include its service account (docs/install.md lists them).
    """

    name: str
    role: str = ALLOCATION
    plugin: str = ""
    amend: Callable[[str | None, str | None], bool] = field(default=unchanged, compare=False)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"pod key {self.name}: unknown role {self.role!r}")


@dataclass(frozen=True, slots=True)
class FitContext:
    """What a vendor's `fit` may look at besides the candidate devices and the request."""

    pod_annotations: Mapping[str, str]
    namespace: str
    policy: str
    node: NodeDevices
    # True when the chosen devices plus `candidate` still fit the namespace quota (built by the core).
    quota_fits: Callable[[Sequence[ContainerDevice]], bool] = field(default=lambda _devices: True)
    # This vendor's devices already given to the pod's earlier containers (one group per container).
    allocated: tuple[ContainerDevices, ...] = ()


@dataclass(frozen=True, slots=True)
class FitOutcome:
    ok: bool
    devices: tuple[ContainerDevice, ...]
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ScoreContext:
    """What `score_node` sees for one node that fits (HAMi `ScoreNode(node, podSingleDevice, previous,
    policy)`): every device of the node with its usage before this pod, and this vendor's allocation."""

    node: NodeDevices
    previous: Sequence[DeviceUsage]
    allocation: PodSingleDevice
    node_policy: str
    pod_annotations: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class AnnotationContext:
    """What `pod_annotations` may use besides the allocation: the pod, the chosen node, the annotations
    written before the vendors' (`hami.io/vgpu-node`, `hami.io/vgpu-time`), and the caller's clock."""

    node: str
    pod: Mapping[str, Any] = field(default_factory=dict)
    written: Mapping[str, str] = field(default_factory=dict)
    now_unix: int = 0
    now_nanos: int = 0


class Vendor(Protocol):
    """One device vendor ("backend"); implementations are frozen and stateless (`app.devices.*`)."""

    @property
    def key(self) -> str:
        """The vendor key ("common word") used in requests and annotations, e.g. `NVIDIA`, `DCU`, `MLU`."""

    @property
    def resources(self) -> ResourceNames: ...

    @property
    def memory_factor(self) -> int:
        """HAMi `MemoryFactor`: the quota's memory limit is multiplied by it when > 1."""

    @property
    def allocated_annotation(self) -> str:
        """Pod annotation holding the allocation the scheduler decodes (e.g. vgpu-devices-allocated)."""

    @property
    def to_allocate_annotation(self) -> str:
        """Pod annotation the device plugin consumes container by container ("" when the vendor has none)."""

    @property
    def source(self) -> str:
        """Where the devices come from, for reasons: the register annotation (`hami.io/node-nvidia-register`)
        or the capacity they are derived from (`capacity cambricon.com/mlu.smlu.vcore`)."""

    @property
    def handshake_annotation(self) -> str:
        """Node annotation of the vendor's handshake ("" when it has none); never part of discovery."""

    @property
    def reads(self) -> Reads:
        """The node and pod fields discovery, health and `usage_tags` read that are not kept anyway."""

    @property
    def lock(self) -> LockSpec | None:
        """The node lock this vendor's pods take at bind, None when they take none."""

    @property
    def pod_keys(self) -> tuple[PodKey, ...]:
        """Every pod annotation `pod_annotations` may write, and `allocated_annotation` and
        `to_allocate_annotation` when the vendor has them, by role (a re-filtered pod loses the ones not
        rewritten; the webhook strips them from new pods and protects them on UPDATE: `PodKey`)."""

    @property
    def scores_nodes(self) -> bool:
        """True when `score_node` may return something other than 0 (the fast path then evaluates every
        candidate: the winner depends on the allocation, not only on the node's usage)."""

    def registered(self, node: NodeView) -> bool:
        """Does the node carry this vendor's devices at all (its register annotation, its capacity)?"""

    def discover(self, node: NodeView) -> Discovery:
        """Decode the node's devices (HAMi `GetNodeDevices`); raises CodecError with the reason.

        Only called when `registered` is true; the devices' `vendor` must be this vendor's key."""

    def health(self, node: NodeView, reported: Reported, now: datetime) -> Health:
        """HAMi `CheckHealth` for a registered node: healthy or not (with why), the handshake stamp to write
        on `handshake_annotation` (None: none due), and the bookkeeping to keep for the next pass."""

    def container_request(self, container: Mapping[str, Any]) -> DeviceRequest | None:
        """The container's request for this vendor, None when it asks nothing; raises InvalidRequest."""

    def sees(self, device_type: str, device_vendor: str) -> bool:
        """May this vendor's requests use a device of this type registered by vendor `device_vendor`?"""

    def fit(self, devices: Sequence[DeviceUsage], request: DeviceRequest, ctx: FitContext) -> FitOutcome:
        """Choose devices for one container from `devices` (sorted; consumed from the end)."""

    def may_reuse_devices(
        self, devices: Sequence[DeviceUsage], request: DeviceRequest, annotations: Mapping[str, str]
    ) -> bool:
        """True when one of `devices` may serve several of `request.nums` (NVIDIA MIG slices, HAMi
        `isMIGRequest`): the core then does not require `nums` candidates (`NodeInsufficientDevice`)."""

    def add_usage(self, device: DeviceUsage, chosen: ContainerDevice) -> ContainerDevice:
        """Account `chosen` on `device` (mutating the working copy); returns the final allocation.

        Raises AddUsageError when it cannot be accounted."""

    def usage_tags(self, pod_annotations: Mapping[str, str]) -> tuple[str, ...]:
        """Tags recorded on every device this pod holds of this vendor (ledger and rebuild alike), for
        later Fits to read in `DeviceUsage.tags`; () for vendors that need none."""

    def score_node(self, ctx: ScoreContext) -> float:
        """The vendor's addition to the node score of a node that fits (HAMi `ScoreNode`, already multiplied
        for a policy-neutral vendor); only called when `scores_nodes`."""

    def pod_annotations(
        self, devices: PodSingleDevice, ctx: AnnotationContext | None = None
    ) -> dict[str, str]:
        """The annotations recording this vendor's allocation on the pod (HAMi `PatchAnnotations`)."""

    def mutate_container(self, container: dict[str, Any], pod: dict[str, Any]) -> bool:
        """Webhook mutation of one container (in place); True when it requests this vendor's devices."""


@runtime_checkable
class QuotaUnits(Protocol):
    """Optional for a vendor whose allocations do not record quota units in `usedmem`/`usedcores` (AWS
    Neuron records core bitmasks, vendors §3.10 #4): what one allocated device counts against the quota."""

    def quota_amounts(self, device: ContainerDevice) -> tuple[int, int]:
        """(memory, cores) of `device` in the units of `resources.memory` / `resources.cores`."""


@functools.cache
def _own_units(kind: type) -> bool:
    """Does this vendor class count quota its own way? (A runtime protocol check costs microseconds; this
    is asked for every device of every fit.)"""
    return issubclass(kind, QuotaUnits)


def quota_amounts(vendor: Vendor, device: ContainerDevice) -> tuple[int, int]:
    """What `device` counts against the namespace quota: its memory and cores, unless the vendor says."""
    if _own_units(type(vendor)):
        return cast(QuotaUnits, vendor).quota_amounts(device)
    return device.usedmem, device.usedcores


# --- the bind-time re-check and mask-shaped usage (optional hooks) ---------------------------------------


@runtime_checkable
class Placement(Protocol):
    """Optional for a vendor whose Fit places a task on a device by more than its slots, memory and cores
    (`app.core.recheck`): why one pod's use `own` of `device` cannot be next to `others` (the sum of the
    other pods' uses, their tags and masks included) as the vendor's Fit would decide it, or "".

    Reuse the Fit's own predicates; health, selectors and the pod's policy (`mutex`) are the filter's, never
    judged here. A vendor without the hook gets `app.core.recheck.capacity_misfit`: slots, memory and cores
    within `count`, `devmem`, `devcore`, and MIG slices that do not overlap on a `mig`-mode device."""

    def placement_misfit(self, device: DeviceInfo, others: DeviceUse, own: DeviceUse) -> str: ...


@runtime_checkable
class CoreMasks(Protocol):
    """Optional for a vendor whose allocations record a bitmask of the device's cores in `usedcores` (AWS
    Neuron): usage then keeps each holder's mask and ORs them (`DeviceUse.masks`), so that a core two pods
    were given stays taken instead of their sum naming another core."""

    def core_mask(self, device: ContainerDevice) -> int:
        """The core bits the allocated `device` takes."""


@functools.lru_cache(maxsize=64)
def _core_mask(vendor: Hashable) -> Callable[[ContainerDevice], int] | None:
    return vendor.core_mask if isinstance(vendor, CoreMasks) else None  # cached: the Protocol check is slow


def core_masks(vendors: Sequence[Vendor]) -> dict[str, Callable[[ContainerDevice], int]]:
    """Vendor key -> its `core_mask`, for the vendors that record core bitmasks."""
    masks = {vendor.key: _core_mask(cast(Hashable, vendor)) for vendor in vendors}
    return {key: mask for key, mask in masks.items() if mask is not None}


def node_locks(vendors: Sequence[Vendor]) -> tuple[LockSpec, ...]:
    """Every node lock the vendors take at bind, in annotation-key order: HAMi's shared one always (a pod
    of a vendor not enabled here may still hold it), our bind lock, and each vendor's own (Cambricon's)."""
    specs = {SHARED_LOCK.annotation: SHARED_LOCK, BIND_LOCK.annotation: BIND_LOCK}
    for vendor in vendors:
        if vendor.lock is not None:
            specs.setdefault(vendor.lock.annotation, vendor.lock)
    return tuple(specs[key] for key in sorted(specs))


def locks_for(requests: PodRequests, vendors: Sequence[Vendor]) -> tuple[LockSpec, ...]:
    """The node locks a pod's bind takes: one per distinct annotation among the locks of the vendors any of
    its containers asks for (init containers too, unlike HAMi: quirk #28) — `BIND_LOCK` for a vendor that
    takes none —, in annotation-key order, so two pods needing the same locks take them in the same order."""
    wanted = {key for container in requests.containers for key in container}
    specs: dict[str, LockSpec] = {}
    for vendor in vendors:
        spec = vendor.lock or BIND_LOCK
        if vendor.key in wanted:
            specs.setdefault(spec.annotation, spec)
    return tuple(specs[key] for key in sorted(specs))
