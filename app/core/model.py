"""The plain data the decision core reasons about.

Every type here mirrors one of HAMi's (reference §0) so that a reader of HAMi's Go code recognises it, but
as frozen dataclasses: the core receives them, never mutates them, and returns new ones. The one mutable
type, `DeviceUsage`, is a per-decision working copy that never leaves the core.

Units follow HAMi everywhere: memory in MiB, cores in percent of one GPU (100 = the whole card), `count` the
number of tasks that may share a device ("split count").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

_T = TypeVar("_T")
_O = TypeVar("_O", str, int)

# The sentinel HAMi uses for "no memory percentage requested" (reference §0, §3.1).
PERCENT_UNSET = 101


@dataclass(frozen=True, slots=True)
class MigPlacement:
    start: int
    size: int


@dataclass(frozen=True, slots=True)
class MigProfile:
    """One MIG profile a `mig`-mode GPU offers, as the device plugin registers it."""

    name: str
    memory_mb: int
    core: int
    slice_count: int
    placements: tuple[MigPlacement, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """One physical GPU registered on a node (HAMi `DeviceInfo`)."""

    id: str
    index: int
    count: int
    devmem: int
    devcore: int
    type: str
    numa: int
    mode: str
    health: bool
    vendor: str = ""
    mig_profiles: tuple[MigProfile, ...] = ()
    pair_scores: Mapping[str, int] = field(default_factory=dict)
    # HAMi `CustomInfo`: vendor-defined JSON values (e.g. Ascend's NetworkID), never read by the core.
    custom: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NodeDevices:
    """What registration knows about one node: its devices (registration order) and cordoned UUIDs.

    `info` holds, per vendor key, what a vendor learned about the node as a whole when it discovered its
    devices (JSON values, e.g. Ascend's `hami-vnpu-core` switch); the core never reads it.
    """

    name: str
    devices: tuple[DeviceInfo, ...]
    cordoned: frozenset[str] = frozenset()
    info: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """What one container asks from one vendor (HAMi `ContainerDeviceRequest`)."""

    nums: int
    type: str
    memreq: int = 0
    mem_percentage: int = PERCENT_UNSET
    coresreq: int = 0


# vendor key -> request, for one container; only vendors with nums > 0 appear.
ContainerRequests = Mapping[str, DeviceRequest]


@dataclass(frozen=True, slots=True)
class PodRequests:
    """Per-container requests of a pod, init containers first (HAMi `PodDeviceRequests`)."""

    containers: tuple[ContainerRequests, ...]
    init_count: int

    @property
    def any(self) -> bool:
        return any(self.containers)


@dataclass(frozen=True, slots=True)
class MigAssignment:
    """The MIG slice chosen for one allocated device (HAMi's ContainerDevice custom info)."""

    profile: str
    placement: MigPlacement


@dataclass(frozen=True, slots=True)
class ContainerDevice:
    """One GPU allocated to one container (HAMi `ContainerDevice`).

    `idx` is not encoded in annotations; `slots` is only meaningful in collapsed usage (0 counts as 1).
    """

    uuid: str
    type: str
    usedmem: int
    usedcores: int
    idx: int = 0
    slots: int = 0
    mig: MigAssignment | None = None
    # Vendor-defined facts about this allocation (HAMi's ContainerDevice CustomInfo), as string pairs;
    # never encoded in the device lists, only used by the vendor's own annotations at filter time.
    custom: tuple[tuple[str, str], ...] = ()


ContainerDevices = tuple[ContainerDevice, ...]
# One ContainerDevices per container (init first), as encoded in the pod annotation.
PodSingleDevice = tuple[ContainerDevices, ...]
# vendor key -> per-container device lists.
PodDevices = Mapping[str, PodSingleDevice]


@dataclass(frozen=True, slots=True)
class MigInstance:
    """The runtime identity HAMi's device plugin adds to a MIG allocation once it created the instance."""

    uuid: str
    gpu_instance_id: int
    compute_instance_id: int


@dataclass(frozen=True, slots=True)
class MigSlice:
    """One MIG instance a pod holds on a GPU (HAMi `MigAllocation` in `MigAllocationsInUse`)."""

    profile: str
    placement: MigPlacement
    instance: MigInstance | None = None

    def key(self) -> tuple[int, int, str, str, int, int]:
        """Sort key: by placement, then the rest (None's identity sorts first)."""
        i = self.instance or MigInstance("", -1, -1)
        return (
            self.placement.start,
            self.placement.size,
            self.profile,
            i.uuid,
            i.gpu_instance_id,
            i.compute_instance_id,
        )


def _without(items: tuple[_T, ...], removed: tuple[_T, ...]) -> tuple[_T, ...]:
    """Multiset difference, keeping the order of `items`."""
    if not removed:
        return items
    remaining = list(items)
    for item in removed:
        if item in remaining:
            remaining.remove(item)
    return tuple(remaining)


def _sorted_union(a: tuple[_O, ...], b: tuple[_O, ...]) -> tuple[_O, ...]:
    """Two sorted multisets as one."""
    return tuple(sorted(a + b)) if a and b else a or b


def _merged(a: tuple[MigSlice, ...], b: tuple[MigSlice, ...]) -> tuple[MigSlice, ...]:
    return tuple(sorted((*a, *b), key=MigSlice.key)) if a and b else a or b


@dataclass(frozen=True, slots=True)
class DeviceUse:
    """Capacity of one device taken by existing reservations.

    `mig` are the MIG instances held on the device (sorted, a multiset: equal uses compare equal) and
    `mig_slots` the slots of the pods that hold it with a MIG allocation; on a `mig`-mode device a slot
    without one means a pod holds it without a known placement, which makes the device unhealthy
    (`app.core.mig`, reference §4.2).

    `masks` are kept for a device whose cores are a bitmask of core units (a vendor declaring
    `app.core.vendor.CoreMasks`, AWS Neuron): each holder's mask, a sorted multiset. Such a use's `cores`
    is the OR of its masks, never their sum: two holders given the same core (two leaders, each deciding
    without the other) must leave that core taken, not turn the sum into another core's bit.
    """

    slots: int = 0
    mem: int = 0
    cores: int = 0
    mig_slots: int = 0
    mig: tuple[MigSlice, ...] = ()
    # Vendor tags of the pods holding the device (`Vendor.usage_tags`, HAMi's PodInfos), a sorted multiset.
    tags: tuple[str, ...] = ()
    masks: tuple[int, ...] = ()

    def plus(self, other: DeviceUse) -> DeviceUse:
        masked = bool(self.masks or other.masks)
        masks = _sorted_union(self._masks(masked), other._masks(masked))
        return DeviceUse(
            self.slots + other.slots,
            self.mem + other.mem,
            union_of(masks) if masked else self.cores + other.cores,
            self.mig_slots + other.mig_slots,
            _merged(self.mig, other.mig),
            _sorted_union(self.tags, other.tags),
            masks,
        )

    def minus(self, other: DeviceUse) -> DeviceUse:
        """This use without `other` (one of the reservations it is the sum of)."""
        masked = bool(self.masks)
        masks = _without(self.masks, other._masks(masked))
        return DeviceUse(
            self.slots - other.slots,
            self.mem - other.mem,
            union_of(masks) if masked else self.cores - other.cores,
            self.mig_slots - other.mig_slots,
            _without(self.mig, other.mig),
            _without(self.tags, other.tags),
            masks,
        )

    def _masks(self, masked: bool) -> tuple[int, ...]:
        """The masks to combine with a masked use: a use without them (a row written before masks were
        kept) counts its cores as one mask, so its bits stay taken."""
        if self.masks or not masked:
            return self.masks
        return (self.cores,) if self.cores else ()


def union_of(masks: tuple[int, ...]) -> int:
    """The bits any of `masks` holds."""
    result = 0
    for mask in masks:
        result |= mask
    return result


# device UUID -> use, for one node (HAMi matches usage to devices by UUID only).
NodeUse = Mapping[str, DeviceUse]


@dataclass(slots=True)
class DeviceUsage:
    """Per-decision working copy of one device (HAMi `DeviceUsage`); mutated while fitting one pod."""

    id: str
    index: int
    used: int
    count: int
    usedmem: int
    totalmem: int
    totalcore: int
    usedcores: int
    mode: str
    numa: int
    type: str
    health: bool
    mig_profiles: tuple[MigProfile, ...] = ()
    mig_in_use: list[MigPlacement] = field(default_factory=list)
    # Read-only facts for vendors, not part of the working copy's state (not compared): the key of the
    # vendor that registered the device, its CustomInfo, and the vendor tags of its holders.
    vendor: str = field(default="", compare=False)
    custom: Mapping[str, Any] = field(default_factory=dict, compare=False)
    tags: tuple[str, ...] = field(default=(), compare=False)

    def copy(self) -> DeviceUsage:
        return DeviceUsage(
            self.id,
            self.index,
            self.used,
            self.count,
            self.usedmem,
            self.totalmem,
            self.totalcore,
            self.usedcores,
            self.mode,
            self.numa,
            self.type,
            self.health,
            self.mig_profiles,
            list(self.mig_in_use),
            self.vendor,
            self.custom,
            self.tags,
        )


@dataclass(frozen=True, slots=True)
class QuotaEntry:
    """One tracked quota resource in one namespace (HAMi QuotaManager entry)."""

    used: int = 0
    limit: int = 0
    limit_set: bool = False


# namespace -> resource name (e.g. "nvidia.com/gpumem") -> entry
QuotaView = Mapping[str, Mapping[str, QuotaEntry]]
