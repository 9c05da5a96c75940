"""MIG allocations: the `hami.io/vgpu-mig-allocations` pod annotation and the usage bookkeeping built on it
(reference §4.2, §4.10).

The scheduler writes one entry per MIG slice it assigns: which container and which of its devices, the GPU,
the profile and the exact placement. HAMi's device plugin creates exactly that instance and adds its
runtime identity (`migUUID`, `gpuInstanceID`, `computeInstanceID`: all three or none) to the same entry. A
later decision learns which slices of a GPU are taken only from these entries, matched to devices by GPU
UUID, with HAMi's fail-closed rules:

- a pod holding a device with MIG allocations on it: the slices are in use; if the device is not in `mig`
  mode the allocations and the device disagree and the device is unhealthy (HAMi keeps a `mps` device with
  exactly one allocation healthy; we do not: docs/compatibility.md);
- a pod holding a `mig` device without any allocation on it: the device is unhealthy (nobody knows which
  slice it uses);
- allocations on a GPU the pod's device list does not name (e.g. an init container's, once released) stay
  in use on that GPU; allocations on a GPU the node does not have make every `mig` device of the node
  unhealthy.

A pod's share of this is kept in its `DeviceUse` per GPU (`attach`), so that node usage stays a plain sum
of reservations; `healthy` applies the rules to the sum.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from app.core.codec import (
    INT32_MAX,
    INT32_MIN,
    UINT32_MAX,
    CodecError,
    fold_keys,
    go_field,
    go_json,
    go_object,
    int_field,
    str_field,
)
from app.core.model import (
    DeviceInfo,
    DeviceUse,
    MigInstance,
    MigPlacement,
    MigSlice,
    NodeDevices,
    NodeUse,
    PodSingleDevice,
)

ANNOTATION = "hami.io/vgpu-mig-allocations"
MIG_MODE = "mig"
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1  # Go `int`


def overlaps(a: MigPlacement, b: MigPlacement) -> bool:
    """Two slices share a memory slice (half-open ranges: an empty slice overlaps nothing)."""
    return a.start < b.start + b.size and b.start < a.start + a.size


@dataclass(frozen=True, slots=True)
class MigAllocation:
    """One entry of the annotation (HAMi `nvidia.MigAllocation`)."""

    container_index: int
    device_index: int
    gpu_uuid: str
    profile: str
    placement: MigPlacement
    instance: MigInstance | None = None

    @property
    def slice(self) -> MigSlice:
        return MigSlice(self.profile, self.placement, self.instance)


def allocations(containers: PodSingleDevice) -> tuple[MigAllocation, ...]:
    """The entries for an allocation (HAMi `EncodeMigAllocations`): one per device that carries a MIG
    assignment, indexed by container (init containers first, as in the device annotation) and by position
    in the container's list."""
    return tuple(
        MigAllocation(position, index, device.uuid, device.mig.profile, device.mig.placement)
        for position, devices in enumerate(containers)
        for index, device in enumerate(devices)
        if device.mig is not None and device.mig.profile and device.mig.placement.size != 0
    )


def encode(entries: Iterable[MigAllocation]) -> str:
    """Go's `json.Marshal([]MigAllocation)`: struct field order, runtime fields only when set."""
    items = []
    for a in entries:
        item: dict[str, Any] = {
            "containerIndex": a.container_index,
            "deviceIndex": a.device_index,
            "gpuUUID": a.gpu_uuid,
            "profile": a.profile,
            "placement": {"start": a.placement.start, "size": a.placement.size},
        }
        if a.instance is not None:
            if a.instance.uuid:
                item["migUUID"] = a.instance.uuid
            item["gpuInstanceID"] = a.instance.gpu_instance_id
            item["computeInstanceID"] = a.instance.compute_instance_id
        items.append(item)
    return go_json(items)


def _entry(position: int, raw: Any) -> tuple[MigAllocation, int]:
    """The entry and how many of its three runtime fields are present."""
    if raw is None:  # Go decodes `null` into a zero struct, which is incomplete
        raw = {}
    if not isinstance(raw, dict):
        raise CodecError(f"MIG allocation {position} is not an object")
    item = fold_keys(raw)
    placement_raw = go_field(item, "placement")
    if placement_raw is None:
        placement_raw = {}
    if not isinstance(placement_raw, dict):
        raise CodecError(f"MIG allocation {position}: placement is not an object")
    placement = fold_keys(placement_raw)
    mig_uuid = str_field(item, "migUUID")
    gi = go_field(item, "gpuInstanceID")
    ci = go_field(item, "computeInstanceID")
    gpu_instance = None if gi is None else int_field(item, "gpuInstanceID", 0, UINT32_MAX)
    compute_instance = None if ci is None else int_field(item, "computeInstanceID", 0, UINT32_MAX)
    present = (mig_uuid != "") + (gpu_instance is not None) + (compute_instance is not None)
    instance = None
    if gpu_instance is not None and compute_instance is not None:
        instance = MigInstance(mig_uuid, gpu_instance, compute_instance)
    entry = MigAllocation(
        container_index=int_field(item, "containerIndex", _INT_MIN, _INT_MAX),
        device_index=int_field(item, "deviceIndex", _INT_MIN, _INT_MAX),
        gpu_uuid=str_field(item, "gpuUUID"),
        profile=str_field(item, "profile"),
        placement=MigPlacement(
            int_field(placement, "start", INT32_MIN, INT32_MAX),
            int_field(placement, "size", INT32_MIN, INT32_MAX),
        ),
        instance=instance,
    )
    return entry, present


def decode(value: str) -> tuple[MigAllocation, ...]:
    """HAMi `DecodeMigAllocations`: unknown keys ignored, keys matched case-insensitively; an incomplete
    entry, a partial runtime identity or two entries for one (container, device) are errors."""
    if not value:
        return ()
    try:
        raw = json.loads(value, object_pairs_hook=go_object)
    except (ValueError, RecursionError) as exc:
        raise CodecError(f"invalid {ANNOTATION}: {exc}") from None
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise CodecError(f"invalid {ANNOTATION}: expected a JSON array")
    entries: list[MigAllocation] = []
    seen: set[tuple[int, int]] = set()
    for position, item in enumerate(raw):
        try:
            entry, runtime_fields = _entry(position, item)
        except CodecError as exc:
            raise CodecError(f"invalid {ANNOTATION}: {exc}") from None
        if (
            entry.container_index < 0
            or entry.device_index < 0
            or not entry.gpu_uuid
            or not entry.profile
            or entry.placement.size == 0
        ):
            raise CodecError(f"invalid {ANNOTATION}: MIG allocation {position} is incomplete")
        if runtime_fields not in (0, 3):
            raise CodecError(f"invalid {ANNOTATION}: MIG allocation {position} has partial runtime identity")
        key = (entry.container_index, entry.device_index)
        if key in seen:
            raise CodecError(
                f"invalid {ANNOTATION}: duplicate MIG allocation for container {key[0]} device {key[1]}"
            )
        seen.add(key)
        entries.append(entry)
    return tuple(entries)


def pod_allocations(annotations: Mapping[str, str]) -> tuple[MigAllocation, ...]:
    """The pod's allocations; none when the annotation is absent or corrupt (HAMi ignores a corrupt one,
    so the pod's `mig` devices become unhealthy below: fail closed)."""
    try:
        return decode(annotations.get(ANNOTATION, ""))
    except CodecError:
        return ()


def same_placements(old: str | None, new: str | None) -> bool:
    """Do two values of the annotation name the same slices? The device plugin adds each slice's runtime
    identity to the pod's allocations; the placements themselves never change (`PodKey.amend`)."""
    if old == new:
        return True

    def placements(value: str | None) -> set[tuple[object, ...]]:
        entries = pod_allocations({ANNOTATION: value or ""})
        return {(e.container_index, e.device_index, e.gpu_uuid, e.profile, e.placement) for e in entries}

    return placements(old) == placements(new)


def attach(uses: Mapping[str, DeviceUse], entries: Sequence[MigAllocation]) -> dict[str, DeviceUse]:
    """One pod's device uses with its MIG slices: on each GPU it holds, its slices and, when it has any
    there, its slots as `mig_slots`; slices on GPUs it does not hold come as uses of their own."""
    by_gpu: dict[str, list[MigSlice]] = {}
    for entry in entries:
        by_gpu.setdefault(entry.gpu_uuid, []).append(entry.slice)
    result: dict[str, DeviceUse] = {}
    for uuid, use in uses.items():
        slices = by_gpu.pop(uuid, [])
        result[uuid] = replace(
            use, mig_slots=use.slots if slices else 0, mig=tuple(sorted(slices, key=MigSlice.key))
        )
    for uuid, slices in by_gpu.items():
        result[uuid] = DeviceUse(mig=tuple(sorted(slices, key=MigSlice.key)))
    return result


def stray_slices(node: NodeDevices, use: NodeUse) -> bool:
    """Some pod holds MIG slices on a GPU this node does not have."""
    if not any(taken.mig for taken in use.values()):
        return False
    known = {d.id for d in node.devices}
    return any(taken.mig for uuid, taken in use.items() if uuid not in known)


def healthy(device: DeviceInfo, taken: DeviceUse, stray: bool) -> bool:
    """The device's health once the MIG rules are applied to its usage (`stray`: see `stray_slices`)."""
    if not device.health:
        return False
    if device.mode != MIG_MODE:
        return not taken.mig
    return not stray and taken.slots <= taken.mig_slots
