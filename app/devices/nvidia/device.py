"""The NVIDIA vendor: HAMi's `NvidiaGPUDevices`, as a frozen, stateless implementation of `Vendor` (and of
`BatchFit`, the array form of its Fit checks that the service's fast path uses)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.core import codec
from app.core import mig as core_mig
from app.core.health import Health, Reported, check
from app.core.model import (
    ContainerDevice,
    DeviceInfo,
    DeviceRequest,
    DeviceUsage,
    MigAssignment,
    PodSingleDevice,
)
from app.core.vendor import (
    ALLOCATION,
    SHARED_LOCK,
    AddUsageError,
    AnnotationContext,
    Discovery,
    FitContext,
    FitOutcome,
    LockSpec,
    NodeView,
    PodKey,
    Reads,
    ResourceNames,
    ScoreContext,
)
from app.devices.batch import Classified, DeviceColumns
from app.devices.common.nodes import allocatable_count
from app.devices.common.placement import TemplatePlacement
from app.devices.common.podkeys import hami_lists
from app.devices.nvidia import admission, batch, fit, keys, mig, requests
from app.devices.nvidia.config import NvidiaConfig


@dataclass(frozen=True, slots=True)
class Nvidia(TemplatePlacement):
    config: NvidiaConfig = field(default_factory=NvidiaConfig)

    @property
    def key(self) -> str:
        return keys.VENDOR

    @property
    def resources(self) -> ResourceNames:
        c = self.config
        return ResourceNames(
            count=c.resource_count_name,
            memory=c.resource_memory_name,
            memory_percentage=c.resource_memory_percentage_name,
            cores=c.resource_core_name,
            priority=c.resource_priority_name,
        )

    @property
    def memory_factor(self) -> int:
        return self.config.memory_factor

    @property
    def allocated_annotation(self) -> str:
        return keys.ALLOCATED

    @property
    def to_allocate_annotation(self) -> str:
        return keys.TO_ALLOCATE

    @property
    def register_annotation(self) -> str:
        return keys.REGISTER

    @property
    def handshake_annotation(self) -> str:
        return keys.HANDSHAKE

    @property
    def source(self) -> str:
        return keys.REGISTER

    @property
    def reads(self) -> Reads:
        return Reads()  # register, pair scores and handshake are all `hami.io/node-*`

    @property
    def lock(self) -> LockSpec:
        return SHARED_LOCK

    @property
    def pod_keys(self) -> tuple[PodKey, ...]:
        plugin = "HAMi's NVIDIA device plugin"
        return (
            *hami_lists(keys.TO_ALLOCATE, keys.ALLOCATED, plugin),
            # the plugin adds each slice's runtime identity; the placements stay (app.core.mig)
            PodKey(keys.MIG_ALLOCATIONS, ALLOCATION, plugin=plugin, amend=core_mig.same_placements),
        )

    @property
    def scores_nodes(self) -> bool:
        return False  # NVIDIA's ScoreNode is 0

    def registered(self, node: NodeView) -> bool:
        return keys.REGISTER in node.annotations

    def discover(self, node: NodeView) -> Discovery:
        return Discovery(self.node_devices(node.annotations))

    def health(self, node: NodeView, reported: Reported, now: datetime) -> Health:
        """HAMi's generic handshake refined by `NvidiaGPUDevices.CheckHealth`'s bookkeeping (§2.3)."""
        count = self.config.resource_count_name
        return check(
            node.annotations.get(keys.HANDSHAKE),
            allocatable_count(node, count),
            node.annotations.get(keys.REGISTER, ""),
            reported,
            now,
            count,
        )

    def container_request(self, container: Mapping[str, Any]) -> DeviceRequest | None:
        return requests.container_request(self.config, container)

    def sees(self, device_type: str, device_vendor: str) -> bool:
        """HAMi's rule: the device model contains `nvidia` (case-insensitive, vendors §1.4)."""
        return keys.VENDOR.lower() in device_type.lower()

    def usage_tags(self, pod_annotations: Mapping[str, str]) -> tuple[str, ...]:
        return ()

    def score_node(self, ctx: ScoreContext) -> float:
        return 0.0

    def node_devices(self, annotations: Mapping[str, str]) -> tuple[DeviceInfo, ...]:
        """HAMi `GetNodeDevices` (§2.2) plus pair scores; raises CodecError with HAMi's messages."""
        encoded = annotations.get(keys.REGISTER)
        if encoded is None:
            raise codec.CodecError(f"annos not found {keys.REGISTER}")
        devices = codec.decode_register_json(encoded, keys.VENDOR)
        if not devices:
            raise codec.CodecError("no gpu found on node")
        pair = annotations.get(keys.PAIR_SCORE)
        if pair is None:
            return devices
        scores = codec.decode_pair_scores(pair)
        return tuple(
            dataclasses.replace(d, pair_scores=scores[d.id]) if d.id in scores else d for d in devices
        )

    def fit(self, devices: Sequence[DeviceUsage], request: DeviceRequest, ctx: FitContext) -> FitOutcome:
        return fit.fit(devices, request, ctx, self.config.mig_profile_allowlist)

    def may_reuse_devices(
        self, devices: Sequence[DeviceUsage], request: DeviceRequest, annotations: Mapping[str, str]
    ) -> bool:
        return mig.is_mig_request(devices, request, annotations)

    @property
    def reasons(self) -> Sequence[str]:
        return batch.REASONS

    @property
    def annotation_keys(self) -> Sequence[str]:
        return batch.ANNOTATION_KEYS

    def classify(
        self, columns: DeviceColumns, request: DeviceRequest, annotations: Mapping[str, str], policy: str
    ) -> Classified:
        """`fit`'s per-device checks for every device at once (the service's fast path, `BatchFit`)."""
        return batch.classify(columns, request, annotations, policy)

    def add_usage(self, device: DeviceUsage, chosen: ContainerDevice) -> ContainerDevice:
        """HAMi `AddResourceUsage`; on a `mig` GPU the slice is chosen now (profile and placement), and the
        allocation takes the profile's memory and cores."""
        if device.mode == keys.MIG_MODE:
            profiles = mig.usable_profiles(device, self.config.mig_profile_allowlist)
            selected = mig.select(profiles, device.mig_in_use, chosen.usedmem)
            if selected is None:
                raise AddUsageError("MIG profile and placement allocation failed")
            profile, placement = selected
            chosen = dataclasses.replace(
                chosen,
                usedmem=profile.memory_mb,
                usedcores=profile.core,
                mig=MigAssignment(profile.name, placement),
            )
            device.mig_in_use.append(placement)
        device.used += 1
        device.usedcores += chosen.usedcores
        device.usedmem += chosen.usedmem
        return chosen

    def pod_annotations(
        self, devices: PodSingleDevice, ctx: AnnotationContext | None = None
    ) -> dict[str, str]:
        """The device lists (§4.10) and, when some device got a MIG slice, `hami.io/vgpu-mig-allocations`."""
        if not devices:
            return {}
        encoded = codec.encode_pod_single_device(devices)
        annotations = {keys.TO_ALLOCATE: encoded, keys.ALLOCATED: encoded}
        slices = core_mig.allocations(devices)
        if slices:
            annotations[keys.MIG_ALLOCATIONS] = core_mig.encode(slices)
        return annotations

    def mutate_container(self, container: dict[str, Any], pod: dict[str, Any]) -> bool:
        return admission.mutate_container(self.config, container, pod)
