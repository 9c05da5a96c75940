"""The AWS Neuron vendor (reference vendors §2.10, quirks §3.10): HAMi's `AWSNeuronDevices`.

Devices are derived from node capacity: `aws.amazon.com/neuron` devices `<node>-AWSNeuron-<i>`, each with
`neuroncore / neuron` cores (its `count`) and the core bitmask `2^cores - 1` as `devcore`; no memory. The
node's `node.kubernetes.io/instance-type` label tells Inferentia (`inf*`) from Trainium. Health is always
good; no node lock, no handshake, no to-allocate annotation.

Requests: `aws.amazon.com/neuron: n` asks n whole devices; `aws.amazon.com/neuroncore: c` asks one device
with c cores when c <= 2, else c/2 whole devices (c must then be even). A device's cores in use are a
bitmask in `usedcores` (the allocation records the mask it takes, so a rebuild from annotations ORs them
back). Fit (`fit.py`): one device = the first candidate from the end with enough free cores, taking the
lowest free core bits; several devices = a contiguous run of idle devices (Inferentia: any start; Trainium:
1, 4, 8 or 16 devices aligned to their size), else `NumaNotFit`. The filter writes the allocation and the
annotations the Neuron scheduler extension's device plugin reads: `AWS_NEURON_IDS` (device indexes, or core
ids `cores x index + bit` for core requests, all containers in order), `NEURON_RESOURCE_TYPE`,
`NEURON_ALLOC_TIME` (ns), `NEURON_ALLOCATED: "false"` and `aws.amazon.com/predicate-node`.

Differences (docs/compatibility.md): cores per device are the node's own (HAMi learns them once, from the
first node it decodes, for every node and every request, §3.10 #1): a whole-device request carries a
marker (`mem_percentage` 100, "every core of the device") instead of HAMi's learned core count, and a core
request splits by 2 (HAMi's `min(learned, 2)`, 2 on every Neuron instance type); contiguous runs are of
device indexes, checked device by device (HAMi picks list positions and takes the devices whose index
equals them, busy ones included, §3.10 #2); a container whose device count is only in `requests` gets
device indexes (HAMi treats it as a core request, §3.10 #5); bad values are refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.core import codec, health, pods, quantity, units
from app.core.health import Health, Reported
from app.core.model import (
    ContainerDevice,
    DeviceInfo,
    DeviceRequest,
    DeviceUsage,
    DeviceUse,
    PodSingleDevice,
)
from app.core.recheck import capacity_misfit
from app.core.vendor import (
    ALLOCATION,
    FLAG,
    INFO,
    AdmissionError,
    AnnotationContext,
    Discovery,
    FitContext,
    FitOutcome,
    InvalidRequest,
    NodeView,
    PodKey,
    Reads,
    ResourceNames,
)
from app.devices.awsneuron import fit as neuron_fit
from app.devices.common import requests
from app.devices.common.base import VendorDefaults, device_lists
from app.devices.common.config import section_of, string
from app.devices.common.nodes import capacity_int64

VENDOR = "AWSNeuron"
ALLOCATED = "hami.io/aws-neuron-devices-allocated"
IDS = "AWS_NEURON_IDS"
ALLOC_TIME = "NEURON_ALLOC_TIME"
RESOURCE_TYPE = "NEURON_RESOURCE_TYPE"
ALLOCATED_FLAG = "NEURON_ALLOCATED"
PREDICATE_NODE = "aws.amazon.com/predicate-node"
ASSIGNED_NODE = "hami.io/vgpu-node"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
SPLIT = 2  # cores per device when splitting a core request (HAMi: min(learned cores per device, 2))
MAX_CORES_PER_DEVICE = 30  # the core mask is an int32
INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class AwsNeuronConfig:
    """The `awsneuron:` section (chart defaults, vendors §1.3)."""

    resource_count_name: str = "aws.amazon.com/neuron"
    resource_core_name: str = "aws.amazon.com/neuroncore"


def parse_awsneuron_config(value: Any) -> AwsNeuronConfig:
    section, path, default = section_of(value, "awsneuron"), "awsneuron", AwsNeuronConfig()
    return AwsNeuronConfig(
        string(section, "resourceCountName", default.resource_count_name, path),
        string(section, "resourceCoreName", default.resource_core_name, path),
    )


def validated(raw: Any, name: str, high: int) -> int:
    """HAMi `validateResourceRequest`: an integer in 1..high, with HAMi's messages."""
    number = quantity.as_int64(raw)
    within = f" (a whole number between 1 and {high})"  # after HAMi's words, which name one bound at most
    if number is None:
        raise InvalidRequest(f"{name} must be an integer{within}")
    if number <= 0:
        raise InvalidRequest(f"{name} must be greater than 0{within}")
    if number > high:
        raise InvalidRequest(f"{name} must not exceed {high}{within}")
    return number


def split_cores(cores: int, name: str) -> tuple[int, int]:
    """HAMi `splitCoreRequest`: (devices, cores per device)."""
    if cores <= SPLIT:
        return 1, cores
    if cores % SPLIT:
        raise InvalidRequest(f"{name} must be 1 or a multiple of {SPLIT}, got {cores}")
    nums = cores // SPLIT
    if nums > INT32_MAX:
        raise InvalidRequest(f"{name} needs {nums} devices, which exceeds the maximum of {INT32_MAX}")
    return nums, SPLIT


@dataclass(frozen=True, slots=True)
class AwsNeuron(VendorDefaults):
    config: AwsNeuronConfig = field(default_factory=AwsNeuronConfig)

    @property
    def key(self) -> str:
        return VENDOR

    @property
    def resources(self) -> ResourceNames:
        return ResourceNames(self.config.resource_count_name, cores=self.config.resource_core_name)

    @property
    def memory_factor(self) -> int:
        return 0

    @property
    def allocated_annotation(self) -> str:
        return ALLOCATED

    @property
    def to_allocate_annotation(self) -> str:
        return ""

    @property
    def handshake_annotation(self) -> str:
        return ""

    @property
    def source(self) -> str:
        return f"capacity {self.config.resource_count_name}"

    @property
    def reads(self) -> Reads:
        c = self.config
        return Reads(node_labels=(INSTANCE_TYPE,), capacity=(c.resource_count_name, c.resource_core_name))

    @property
    def lock(self) -> None:
        return None

    @property
    def pod_keys(self) -> tuple[PodKey, ...]:
        return (
            PodKey(ALLOCATED, ALLOCATION),
            PodKey(IDS, ALLOCATION),  # the device or core ids the plugin hands out
            PodKey(RESOURCE_TYPE, ALLOCATION),  # whether those ids are devices or cores
            PodKey(PREDICATE_NODE, ALLOCATION),  # the node whose plugin serves the pod
            PodKey(ALLOCATED_FLAG, FLAG, plugin="AWS's Neuron device plugin (scheduler extension)"),
            PodKey(ALLOC_TIME, INFO),
        )

    def registered(self, node: NodeView) -> bool:
        value = node.capacity.get(self.config.resource_count_name)
        return value is not None and value not in ("0", 0)

    def discover(self, node: NodeView) -> Discovery:
        """HAMi `GetNodeDevices` (§2.10), with this node's own cores per device."""
        c = self.config
        counts = capacity_int64(node, c.resource_count_name) or 0
        if counts <= 0:
            raise codec.CodecError(f"device not found {c.resource_count_name}")
        cores = max(quantity.as_int64(node.capacity.get(c.resource_core_name, 0)) or 0, 0) // counts
        if cores > MAX_CORES_PER_DEVICE:
            raise codec.CodecError(
                f"capacity {c.resource_core_name}: {cores} cores per device, at most {MAX_CORES_PER_DEVICE}"
            )
        custom = {neuron_fit.NODE_TYPE: node.labels.get(INSTANCE_TYPE, "")}
        devices = tuple(
            DeviceInfo(
                f"{node.name}-{VENDOR}-{i}",
                i,
                cores,
                0,
                2**cores - 1,
                VENDOR,
                0,
                "",
                True,
                VENDOR,
                custom=custom,
            )
            for i in range(counts)
        )
        return Discovery(devices)

    def health(self, node: NodeView, reported: Reported, now: datetime) -> Health:
        return health.ALWAYS_HEALTHY

    def container_request(self, container: Mapping[str, Any]) -> DeviceRequest | None:
        """§2.10 GenerateResourceRequests: the device count wins over the core count (limits, then
        requests); a count of 0 asks nothing, as in HAMi (its webhook refuses it)."""
        c = self.config
        raw = requests.lookup(container, c.resource_count_name)
        if raw is not None:
            if quantity.as_int64(raw) == 0:
                return None
            nums = validated(raw, c.resource_count_name, INT32_MAX)
            return DeviceRequest(nums, VENDOR, 0, neuron_fit.WHOLE, SPLIT)
        raw = requests.lookup(container, c.resource_core_name)
        if raw is None:
            return None
        cores = validated(raw, c.resource_core_name, 2 * INT32_MAX)
        nums, per_device = split_cores(cores, c.resource_core_name)
        return DeviceRequest(nums, VENDOR, 0, 0, per_device)

    def memory_text(self, amount: int) -> str:
        return f"{amount} MiB"

    def cores_text(self, amount: int) -> str:
        """`app.core.units.Units`: an allocation records the mask of the NeuronCores it takes."""
        return units.mask_text(amount, "NeuronCore")

    def request_cores_text(self, amount: int) -> str:
        return f"{amount} NeuronCores"

    def fit(self, devices: Sequence[DeviceUsage], request: DeviceRequest, ctx: FitContext) -> FitOutcome:
        if request.nums > 1:
            return neuron_fit.contiguous(devices, request, ctx)
        return neuron_fit.one_device(devices, request, ctx)

    def core_mask(self, device: ContainerDevice) -> int:
        """`CoreMasks`: an allocated device's `usedcores` is the mask of the cores it takes."""
        return device.usedcores

    def placement_misfit(self, device: DeviceInfo, others: DeviceUse, own: DeviceUse) -> str:
        """`Placement`: the holders within the device's cores (`count`), and no core bit twice."""
        return capacity_misfit(device, others, own) or neuron_fit.overlap(device.id, others, own)

    def quota_amounts(self, device: ContainerDevice) -> tuple[int, int]:
        """`QuotaUnits`: a device's cores count as the cores its mask names (HAMi sums the masks, so one
        core on bit 1 counts 2, a whole 2-core device 3: quirk §3.10 #4, fixed)."""
        return 0, neuron_fit.popcount(device.usedcores)

    def pod_annotations(
        self, devices: PodSingleDevice, ctx: AnnotationContext | None = None
    ) -> dict[str, str]:
        """§2.10 PatchAnnotations: the allocation, then the ids of every container's devices (device
        indexes for device requests, core ids for core requests) in container order."""
        result = device_lists(devices, ALLOCATED)
        if not result or ctx is None:
            return result
        containers = [*pods.init_containers(ctx.pod), *pods.containers(ctx.pod)]
        ids: list[str] = []
        for position, group in enumerate(devices):
            if not group or position >= len(containers):
                continue
            raw = requests.lookup(containers[position], self.config.resource_count_name)
            whole = (quantity.as_int64(raw) or 0) > 0 if raw is not None else False
            for device in group:
                if whole:
                    ids.append(str(device.idx))
                    continue
                per_device = neuron_fit.cores_of(device)
                for bit in range(per_device):
                    if device.usedcores & (1 << bit):
                        ids.append(str(per_device * device.idx + bit))
                        result[RESOURCE_TYPE] = self.config.resource_core_name
            if ids:
                result[IDS] = ",".join(ids)
                result[ALLOC_TIME] = str(ctx.now_nanos)
                result[ALLOCATED_FLAG] = "false"
                result[PREDICATE_NODE] = ctx.written.get(ASSIGNED_NODE, "")
        return result

    def mutate_container(self, container: dict[str, Any], pod: dict[str, Any]) -> bool:
        """§2.10 MutateAdmission: no mutation; the count (else the core count) must be valid."""
        try:
            c = self.config
            raw = requests.lookup(container, c.resource_count_name)
            if raw is not None:
                validated(raw, c.resource_count_name, INT32_MAX)
                return True
            raw = requests.lookup(container, c.resource_core_name)
            if raw is None:
                return False
            split_cores(validated(raw, c.resource_core_name, 2 * INT32_MAX), c.resource_core_name)
            return True
        except InvalidRequest as exc:
            raise AdmissionError(str(exc)) from None
