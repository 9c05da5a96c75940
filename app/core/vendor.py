"""The seam between the generic decision core and one device vendor (HAMi's `Devices` interface).

The core owns the algorithm every vendor shares (requests per container, the init/app phases, device and
node scores, sorting, quota, usage accounting); a vendor owns what differs: its resource names, how a
container's resources become a request, the per-device fit rule, how usage is added, its annotation keys
and its admission mutation. Vendors are pure too; they live in `app.devices`, which depends on this module
and never the other way round.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.core.model import (
    ContainerDevice,
    DeviceInfo,
    DeviceRequest,
    DeviceUsage,
    NodeDevices,
    PodSingleDevice,
)


class InvalidRequest(ValueError):
    """A container asks for a device resource with a value we refuse (e.g. memory `16Gi`)."""


class AdmissionError(ValueError):
    """The webhook must reject the pod with this message (HAMi `Errored(500, err)`)."""


class AddUsageError(ValueError):
    """A device chosen by `fit` cannot be accounted (HAMi `AddResourceUsage` failed, e.g. no MIG slice)."""


@dataclass(frozen=True, slots=True)
class ResourceNames:
    count: str
    memory: str
    memory_percentage: str
    cores: str
    priority: str


@dataclass(frozen=True, slots=True)
class FitContext:
    """What a vendor's `fit` may look at besides the candidate devices and the request."""

    pod_annotations: Mapping[str, str]
    namespace: str
    policy: str
    node: NodeDevices
    # True when the chosen devices plus `candidate` still fit the namespace quota (built by the core).
    quota_fits: Callable[[Sequence[ContainerDevice]], bool] = field(default=lambda _devices: True)


@dataclass(frozen=True, slots=True)
class FitOutcome:
    ok: bool
    devices: tuple[ContainerDevice, ...]
    reason: str = ""


class Vendor(Protocol):
    """One device vendor, e.g. NVIDIA. Implementations are frozen and stateless."""

    @property
    def key(self) -> str:
        """The vendor key ("common word") used in requests and annotations, e.g. `NVIDIA`."""

    @property
    def resources(self) -> ResourceNames: ...

    @property
    def memory_factor(self) -> int: ...

    @property
    def allocated_annotation(self) -> str:
        """Pod annotation holding the allocation the scheduler decodes (e.g. vgpu-devices-allocated)."""

    @property
    def to_allocate_annotation(self) -> str:
        """Pod annotation the device plugin consumes container by container."""

    @property
    def register_annotation(self) -> str: ...

    @property
    def handshake_annotation(self) -> str: ...

    def container_request(self, container: Mapping[str, Any]) -> DeviceRequest | None:
        """The container's request for this vendor, None when it asks nothing; raises InvalidRequest."""

    def node_devices(self, annotations: Mapping[str, str]) -> tuple[DeviceInfo, ...]:
        """Decode the node's registered devices; raises CodecError with the reason."""

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

    def pod_annotations(self, devices: PodSingleDevice) -> dict[str, str]:
        """The annotations recording this vendor's allocation on the pod."""

    def mutate_container(self, container: dict[str, Any], pod: dict[str, Any]) -> bool:
        """Webhook mutation of one container (in place); True when it requests this vendor's devices."""
