"""The Moore Threads vendor (reference vendors §2.7, quirks §3.7): HAMi's `MthreadsDevices`.

Devices are derived from node capacity: the plugin advertises `mthreads.com/sgpu-core` (16 per GPU) and
`mthreads.com/sgpu-memory` (512 MiB units), and HAMi makes `cores / 16` identical GPUs
`<node>-mthreads-<i>`. Health is always good; no node lock; no handshake. The webhook turns a count into
whole GPUs (16 cores, 96 memory units each) unless a single GPU names one of the legal memory sizes; the
request splits cores and memory per card; Fit is the template with a case-sensitive type check and the
rule that all of a pod's Moore Threads devices are one device (§3.7 #5, kept). The filter writes the
allocation and `mthreads.com/gpu-index` / `predicate-node` / `predicate-time` for Moore Threads' plugin.

Differences (docs/compatibility.md): out-of-range or non-integer values are refused, not dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.core import quantity
from app.core.model import DeviceRequest, DeviceUsage, PodSingleDevice
from app.core.vendor import (
    ALLOCATION,
    INFO,
    AdmissionError,
    AnnotationContext,
    Discovery,
    FitContext,
    FitOutcome,
    NodeView,
    PodKey,
)
from app.devices.common import requests, template
from app.devices.common.base import device_lists
from app.devices.common.capacity import CapacityDevices
from app.devices.common.config import SectionNames, parse_names
from app.devices.common.placement import TemplatePlacement

VENDOR = "Mthreads"
CORES_PER_GPU = 16
MEMORY_PER_GPU = 96  # memory units of a whole GPU
MEMORY_FACTOR = 512  # one memory unit is 512 MiB
LEGAL_MEMORY = (2, 4, 8, 16, 32, 64, 96)
TO_ALLOCATE = "hami.io/mthreads-vgpu-devices-to-allocate"  # registered by HAMi, never written (§3.7 #1)
ALLOCATED = "hami.io/mthreads-vgpu-devices-allocated"
GPU_INDEX = "mthreads.com/gpu-index"
PREDICATE_NODE = "mthreads.com/predicate-node"
PREDICATE_TIME = "mthreads.com/predicate-time"
REQUEST_GPU_NUM = "mthreads.com/request-gpu-num"
USE_UUID, NOUSE_UUID = "mthreads.ai/use-gpuuuid", "mthreads.ai/nouse-gpuuuid"
ASSIGNED_NODE = "hami.io/vgpu-node"
INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class MthreadsConfig(SectionNames):
    """The `mthreads:` section (chart defaults, vendors §1.3)."""

    resource_count_name: str = "mthreads.com/vgpu"
    resource_memory_name: str = "mthreads.com/sgpu-memory"
    resource_core_name: str = "mthreads.com/sgpu-core"


def parse_mthreads_config(value: Any) -> MthreadsConfig:
    return parse_names(value, "mthreads", MthreadsConfig())


def _contains_type(annotations: Mapping[str, str], device: DeviceUsage) -> bool:
    return VENDOR in device.type  # `strings.Contains(dev.Type, k.Type)`, case-sensitive


def _one_device(device: DeviceUsage, ctx: FitContext) -> bool:
    """§2.4/§2.7 custom rule: every device the pod's earlier containers got is this device."""
    return all(d.uuid == device.id for group in ctx.allocated for d in group)


RULES = template.Rules(VENDOR, USE_UUID, NOUSE_UUID, type_check=_contains_type, custom=_one_device)


def _limits(container: dict[str, Any]) -> dict[str, Any]:
    resources = container.get("resources")
    if not isinstance(resources, dict):
        resources = container["resources"] = {}
    limits = resources.get("limits")
    if not isinstance(limits, dict):
        limits = resources["limits"] = {}
    return limits


@dataclass(frozen=True, slots=True)
class Mthreads(TemplatePlacement, CapacityDevices):
    config: MthreadsConfig = field(default_factory=MthreadsConfig)

    @property
    def key(self) -> str:
        return VENDOR

    @property
    def memory_factor(self) -> int:
        return MEMORY_FACTOR

    @property
    def allocated_annotation(self) -> str:
        return ALLOCATED

    @property
    def to_allocate_annotation(self) -> str:
        return TO_ALLOCATE

    @property
    def lock(self) -> None:
        return None

    @property
    def pod_keys(self) -> tuple[PodKey, ...]:
        return (
            # HAMi registers the to-allocate key but never writes it (§3.7 #1): declared, so never forged;
            # no plugin works through it
            PodKey(TO_ALLOCATE, ALLOCATION),
            PodKey(ALLOCATED, ALLOCATION),
            PodKey(GPU_INDEX, ALLOCATION),  # the GPU indexes the plugin hands out
            PodKey(PREDICATE_NODE, ALLOCATION),  # the node whose plugin serves the pod
            PodKey(PREDICATE_TIME, INFO),
        )

    def discover(self, node: NodeView) -> Discovery:
        """HAMi `GetNodeDevices` (§2.7): `cores / 16` GPUs, `memory x 512 x 16 / cores` MiB each."""
        return self.derive(
            node,
            cores_per_device=CORES_PER_GPU,
            unit_mib=MEMORY_FACTOR,
            word="mthreads",
            count=100,
            devcore=CORES_PER_GPU,
        )

    def container_request(self, container: Mapping[str, Any]) -> DeviceRequest | None:
        """§2.7: memory in 512 MiB units, cores default 0, both split evenly over the cards (int32 /)."""
        c = self.config
        nums = requests.count(container, c.resource_count_name)
        if nums is None:
            return None
        units = requests.integer(
            container, c.resource_memory_name, INT32_MAX // MEMORY_FACTOR, "memory units"
        )
        cores = requests.integer(container, c.resource_core_name, INT32_MAX, "sGPU cores") or 0
        memory = (units or 0) * MEMORY_FACTOR
        return DeviceRequest(nums, VENDOR, memory // nums, 100 if memory == 0 else 0, cores // nums)

    def memory_text(self, amount: int) -> str:
        return f"{amount} MiB"

    def cores_text(self, amount: int) -> str:
        """`app.core.units.Units`: cores are counted in the GPU's own units, 16 per GPU."""
        return f"{amount}/{CORES_PER_GPU} cores"

    def request_cores_text(self, amount: int) -> str:
        return self.cores_text(amount)

    def fit(self, devices: Sequence[DeviceUsage], request: DeviceRequest, ctx: FitContext) -> FitOutcome:
        return template.fit(devices, request, ctx, RULES)

    def pod_annotations(
        self, devices: PodSingleDevice, ctx: AnnotationContext | None = None
    ) -> dict[str, str]:
        """§2.7: the allocation (no to-allocate key, §3.7 #1); the GPU indexes of the LAST non-empty
        container (§3.7 #2, kept: the plugin reads one list), the node and the time in nanoseconds."""
        result = device_lists(devices, ALLOCATED)
        if not result:
            return result
        last = [group for group in devices if group][-1]
        result[GPU_INDEX] = ",".join(str(d.idx) for d in last)
        result[PREDICATE_TIME] = str(ctx.now_nanos if ctx is not None else 0)
        result[PREDICATE_NODE] = ctx.written.get(ASSIGNED_NODE, "") if ctx is not None else ""
        return result

    def mutate_container(self, container: dict[str, Any], pod: dict[str, Any]) -> bool:
        """§2.7 MutateAdmission: whole GPUs for a count above 1 or a single GPU without memory; a single GPU
        with memory must name a legal size."""
        c = self.config
        raw = requests.lookup(container, c.resource_count_name)
        if raw is None:
            return False
        count = quantity.ceil_value(raw)
        if count is None or count <= 0:
            raise AdmissionError(f"{c.resource_count_name} must be greater than 0 (a whole number of GPUs)")
        limits = _limits(container)
        if count > 1:
            limits[c.resource_core_name] = str(count * CORES_PER_GPU)
            limits[c.resource_memory_name] = str(count * MEMORY_PER_GPU)
            metadata = pod.setdefault("metadata", {})
            annotations = metadata.get("annotations")
            if not isinstance(annotations, dict):
                annotations = metadata["annotations"] = {}
            annotations[REQUEST_GPU_NUM] = str(count)
            return True
        memory = limits.get(c.resource_memory_name)
        if memory is None:
            limits[c.resource_core_name] = str(CORES_PER_GPU)
            limits[c.resource_memory_name] = str(MEMORY_PER_GPU)
        elif quantity.as_int64(memory) not in LEGAL_MEMORY:
            raise AdmissionError(
                "sGPU memory request value is invalid, valid values are [2, 4, 8, 16, 32, 64, 96]"
            )
        return True
