"""MIG slices on NVIDIA `mig`-mode GPUs: which profile and which placement (reference §4.4, §4.7 check 13).

The device plugin registers, per GPU, the profiles it may create with their memory, compute share, slice
count and the placements NVML allows (`migProfiles`). For a container's memory request the scheduler picks
the smallest profile with at least that much memory (ties: fewer slices; a larger profile when none of the
smaller one's placements is free) and the first free placement of it: the highest `start` first for `1g.*`
and `3g.*` profiles, the lowest first for the others, free meaning not overlapping (half-open slice ranges)
any slice in use on the GPU or already chosen for the same container (HAMi `selectMigCandidate`,
`CustomFilterRule`).

Two choices of ours where HAMi says nothing:
- `migProfileAllowlist` (device config) restricts the profiles of a GPU when one of its entries names the
  GPU's model: an entry names a model when one of its `models` is a substring of the registered device type
  (e.g. `A100-SXM4-40GB` in `NVIDIA A100-SXM4-40GB`); the allowed profiles are the union of all entries
  naming the model. When no entry names it, the registered profiles are used as they are (HAMi's device
  plugin publishes only allowlisted profiles in the first place; HAMi's scheduler does not filter again).
- placements of size 0 or less are never chosen: they would overlap nothing, and HAMi would hand out the
  same empty slice forever.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from app.core.mig import overlaps
from app.core.model import DeviceRequest, DeviceUsage, MigPlacement, MigProfile
from app.devices.nvidia import keys
from app.devices.nvidia.config import MigAllowlistEntry

_HIGH_FIRST = ("1g.", "3g.")


def usable_profiles(device: DeviceUsage, allowlist: Sequence[MigAllowlistEntry]) -> tuple[MigProfile, ...]:
    """The device's registered profiles that the allowlist permits for its model (see the module doc)."""
    naming = [entry for entry in allowlist if any(model in device.type for model in entry.models)]
    if not naming:
        return device.mig_profiles
    allowed = {name for entry in naming for name in entry.profiles}
    return tuple(p for p in device.mig_profiles if p.name in allowed)


def ordered_placements(profile: MigProfile) -> list[MigPlacement]:
    """The profile's usable placements in the order they are tried (stable for equal starts)."""
    usable = [p for p in profile.placements if p.size > 0]
    if profile.name.startswith(_HIGH_FIRST):
        return sorted(usable, key=lambda p: -p.start)
    return sorted(usable, key=lambda p: p.start)


def select(
    profiles: Sequence[MigProfile], occupied: Sequence[MigPlacement], memory: int
) -> tuple[MigProfile, MigPlacement] | None:
    """The profile and placement for `memory` MiB next to the `occupied` slices, None when nothing fits.

    A profile's placements are those of the first registered profile of that name (HAMi `findMigProfile`).
    """
    first: dict[str, MigProfile] = {}
    for profile in profiles:
        first.setdefault(profile.name, profile)
    for profile in sorted(profiles, key=lambda p: (p.memory_mb, p.slice_count)):
        if profile.memory_mb < memory:
            continue
        for candidate in ordered_placements(first[profile.name]):
            if not any(overlaps(candidate, taken) for taken in occupied):
                return profile, candidate
    return None


def fits(
    profiles: Sequence[MigProfile], occupied: Sequence[MigPlacement], queued: Sequence[int], memory: int
) -> bool:
    """Check 13: the slices already chosen for this container on the GPU (`queued`, their memory requests,
    in order) and one more of `memory` MiB can all be placed next to the slices in use."""
    taken = list(occupied)
    for wanted in queued:
        chosen = select(profiles, taken, wanted)
        if chosen is None:
            return False
        taken.append(chosen[1])
    return select(profiles, taken, memory) is not None


def is_mig_request(
    devices: Sequence[DeviceUsage], request: DeviceRequest, annotations: Mapping[str, str]
) -> bool:
    """HAMi `isMIGRequest`: an NVIDIA request of a pod whose `nvidia.com/vgpu-mode` is absent or contains
    `mig`, with at least one `mig`-mode candidate (one GPU may then serve several of `nums`)."""
    mode = annotations.get(keys.VGPU_MODE)
    return (
        request.type == keys.VENDOR
        and (mode is None or keys.MIG_MODE in mode)
        and any(d.mode == keys.MIG_MODE for d in devices)
    )
