"""The MIG part of the simulated device plugin: realize the slices the scheduler reserved (HAMi v2.10's
dynamic MIG, reference §4.10).

On Allocate for a container whose devices are `mig`-mode GPUs, HAMi's plugin reads the container's entries
of `hami.io/vgpu-mig-allocations` (one per device of the container's group: same container index, device
index and GPU), checks that the profile and placement are ones the GPU offers, creates exactly that GPU
instance and its compute instance, and writes the runtime identity (`migUUID`, `gpuInstanceID`,
`computeInstanceID`) into the same entries. It never picks another placement: a missing entry, an unknown
profile or placement, or a placement overlapping an instance another pod holds fails the Allocate.
Instances live until their pod is deleted or finishes (`release`).

Here an "instance" is bookkeeping: a GPU instance id (the lowest free one on the GPU), compute instance 0
and a MIG UUID derived from the GPU and the instance id.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace

from app.core import mig
from app.core.codec import CodecError
from app.core.model import ContainerDevices, DeviceInfo, MigInstance, MigPlacement


class MigError(Exception):
    """The reserved slice cannot be realized; Allocate fails with this message."""


@dataclass(frozen=True)
class _Held:
    pod_uid: str
    key: tuple[int, int]  # (container index, device index)
    profile: str
    placement: MigPlacement
    instance: MigInstance


class MigInstances:
    """The MIG instances of one node's GPUs; thread-safe (Allocate and pod events run on other threads)."""

    def __init__(self, devices: Mapping[str, DeviceInfo]) -> None:
        self.devices = devices
        self._lock = threading.Lock()
        self._held: dict[str, list[_Held]] = {}  # GPU UUID -> instances

    def realize(
        self, pod_uid: str, annotations: Mapping[str, str], index: int, group: ContainerDevices
    ) -> str:
        """Create the instances of container `index` (its device `group`); returns the annotation value
        with their runtime identities, or "" when none of the group's GPUs is in MIG mode."""
        if not any(self.devices[d.uuid].mode == mig.MIG_MODE for d in group):
            return ""
        try:
            entries = list(mig.decode(annotations.get(mig.ANNOTATION, "")))
        except CodecError as exc:
            raise MigError(str(exc)) from None
        with self._lock:
            for position, device in enumerate(group):
                found = [
                    n
                    for n, e in enumerate(entries)
                    if (e.container_index, e.device_index, e.gpu_uuid) == (index, position, device.uuid)
                ]
                if not found:
                    raise MigError(
                        f"no MIG allocation for container {index} device {position} ({device.uuid})"
                    )
                entry = entries[found[0]]
                entries[found[0]] = replace(entry, instance=self._create(pod_uid, entry))
        return mig.encode(entries)

    def _create(self, pod_uid: str, entry: mig.MigAllocation) -> MigInstance:
        gpu = self.devices[entry.gpu_uuid]
        profile = next((p for p in gpu.mig_profiles if p.name == entry.profile), None)
        if profile is None or entry.placement not in profile.placements:
            raise MigError(f"{entry.gpu_uuid} offers no MIG profile {entry.profile} at {entry.placement}")
        held = self._held.setdefault(entry.gpu_uuid, [])
        key = (entry.container_index, entry.device_index)
        for other in held:
            same = other.key == key or (other.profile, other.placement) == (entry.profile, entry.placement)
            if other.pod_uid == pod_uid and same:
                # a repeated Allocate, or an init and an app container given the same slice (HAMi fits
                # them on the same pre-pod usage): one instance, as HAMi's plugin keys them by slice
                return other.instance
            if mig.overlaps(other.placement, entry.placement):
                raise MigError(f"{entry.gpu_uuid}: placement {entry.placement} overlaps an instance in use")
        taken = {h.instance.gpu_instance_id for h in held}
        gi = next(n for n in range(len(held) + 1) if n not in taken)
        instance = MigInstance(f"MIG-{uuid.uuid5(uuid.NAMESPACE_URL, f'{entry.gpu_uuid}/{gi}')}", gi, 0)
        held.append(_Held(pod_uid, key, entry.profile, entry.placement, instance))
        return instance

    def release(self, pod_uid: str) -> int:
        """Destroy the pod's instances; how many there were."""
        with self._lock:
            released = 0
            for gpu, held in self._held.items():
                kept = [h for h in held if h.pod_uid != pod_uid]
                released += len(held) - len(kept)
                self._held[gpu] = kept
            return released

    def in_use(self, gpu: str) -> list[MigPlacement]:
        with self._lock:
            return [h.placement for h in self._held.get(gpu, [])]
