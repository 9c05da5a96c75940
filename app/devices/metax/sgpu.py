"""Metax sGPU shares (reference vendors §2.5, quirks §3.5): HAMi's `MetaxSDevices`.

Devices come from Metax's own node annotation `metax-tech.com/node-gpu-devices` (a JSON array of
`{uuid, model, totalDevCount, totalCompute, totalVRam, numa, healthy, qosPolicy, linkZone, ...}`); pods
take the shared node lock. Requests read limits only; a bare memory number is GiB, a quantity whose
canonical form has a unit is bytes. The webhook checks the app class (`online`/`offline`, one device) and
gives pods that are not online the default QoS `best-effort`. The filter writes HAMi's device lists, the
allocation in Metax's own JSON (`metax-tech.com/gpu-devices-allocated`) and `metax-tech.com/predicate-time`.
Fit, the policy-neutral node score and the bind re-check's rules (`placement_misfit`) are in `sgpu_fit`.

Differences (docs/compatibility.md): the QoS and app class of the tasks on a device are usage tags kept in
the ledger (HAMi: a process cache, §3.5 #3); a device held by an exclusive task of another QoS reports
`CardQosPolicyMismatch` where HAMi's cache reports a core reason (the device is refused either way);
values HAMi turns into a zero request (a non-integer or out-of-range count, cores or memory) are refused;
a register entry that is not a device (no uuid, a negative size, `null`) excludes the node with a reason.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.core import codec, health, quantity
from app.core.health import Health, Reported
from app.core.model import DeviceInfo, DeviceRequest, DeviceUsage, DeviceUse, PodSingleDevice
from app.core.vendor import (
    ALLOCATION,
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
    ScoreContext,
)
from app.devices.common import requests
from app.devices.common.base import device_lists
from app.devices.common.podkeys import hami_lists
from app.devices.common.registered import Keys, Registered
from app.devices.metax import sgpu_fit
from app.devices.metax.config import MetaxConfig
from app.devices.metax.sgpu_fit import APP_CLASS, OFFLINE, ONLINE, QOS_POLICY, VENDOR

REGISTER = "metax-tech.com/node-gpu-devices"
TO_ALLOCATE = "hami.io/metax-sgpu-devices-to-allocate"
ALLOCATED = "hami.io/metax-sgpu-devices-allocated"
KEYS = Keys(VENDOR, REGISTER, "", TO_ALLOCATE, ALLOCATED)  # no handshake: healthy while it lists devices
METAX_ALLOCATED = "metax-tech.com/gpu-devices-allocated"
PREDICATE_TIME = "metax-tech.com/predicate-time"
MEMORY_FACTOR = 1024  # a bare vmemory value is GiB
QOS_POLICIES = ("best-effort", "fixed-share", "burst-share")
INT32_MAX, INT32_MIN = 2**31 - 1, -(2**31)
_BINARY_SUFFIXES = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def has_unit(raw: Any, value: int) -> bool:
    """Does Go's canonical `Quantity.String()` of this integer quantity contain a letter? (The API server
    stores quantities in that form.) Binary quantities of 1024 and more print in Ki/Mi/... when they are a
    multiple of 1024; everything else prints with k/M/G/... (or `e3`) when it is a multiple of 1000."""
    if value == 0:
        return False
    binary = isinstance(raw, str) and raw.strip().endswith(_BINARY_SUFFIXES)
    if binary and abs(value) >= 1024:
        return value % 1024 == 0
    return value % 1000 == 0


def _device(position: int, item: Any) -> DeviceInfo:
    if not isinstance(item, dict):
        raise codec.CodecError(f"device {position} is not an object")
    raw = codec.fold_keys(item)
    healthy = codec.go_field(raw, "healthy")
    if healthy is not None and not isinstance(healthy, bool):
        raise codec.CodecError(f"device {position}: invalid healthy field: expected a boolean")
    uuid = codec.str_field(raw, "uuid")
    if not uuid:
        raise codec.CodecError(f"device {position} has no uuid")
    return DeviceInfo(
        id=uuid,
        index=position,
        count=codec.int_field(raw, "totalDevCount", 0, INT32_MAX),
        devmem=codec.int_field(raw, "totalVRam", 0, INT32_MAX),
        devcore=codec.int_field(raw, "totalCompute", 0, INT32_MAX),
        type=VENDOR,
        numa=codec.int_field(raw, "numa", INT32_MIN, INT32_MAX),
        mode="",
        health=bool(healthy),
        vendor=VENDOR,
        custom={
            "QosPolicy": codec.str_field(raw, "qosPolicy"),
            "Model": codec.str_field(raw, "model"),
            "LinkZone": codec.int_field(raw, "linkZone", INT32_MIN, INT32_MAX),
        },
    )


def decode_devices(value: str) -> tuple[DeviceInfo, ...]:
    """`metax-tech.com/node-gpu-devices` -> devices (HAMi `convertMetaxSDeviceToHAMIDevice`)."""
    try:
        raw = json.loads(value, object_pairs_hook=codec.go_object)
    except (ValueError, RecursionError) as exc:
        raise codec.CodecError(f"invalid JSON: {exc}") from None
    if raw is not None and not isinstance(raw, list):
        raise codec.CodecError("expected a JSON array of devices")
    devices = tuple(_device(position, item) for position, item in enumerate(raw or []))
    if not devices:
        raise codec.CodecError("no sdevice found on node")
    return devices


@dataclass(frozen=True, slots=True)
class MetaxSgpu(Registered):
    config: MetaxConfig = field(default_factory=MetaxConfig)

    @property
    def keys(self) -> Keys:
        return KEYS

    @property
    def resources(self) -> ResourceNames:
        c = self.config
        return ResourceNames(c.resource_vcount_name, c.resource_vmemory_name, "", c.resource_vcore_name)

    @property
    def memory_factor(self) -> int:
        return MEMORY_FACTOR

    @property
    def reads(self) -> Reads:
        return Reads(node_annotations=(REGISTER,), pod_annotations=(APP_CLASS, QOS_POLICY))

    @property
    def pod_keys(self) -> tuple[PodKey, ...]:
        return (
            *hami_lists(TO_ALLOCATE, ALLOCATED, "Metax's sgpu device plugin"),
            PodKey(METAX_ALLOCATED, ALLOCATION),  # the sGPUs Metax's plugin hands out
            PodKey(PREDICATE_TIME, INFO),
        )

    @property
    def scores_nodes(self) -> bool:
        return True

    def discover(self, node: NodeView) -> Discovery:
        return Discovery(decode_devices(node.annotations[REGISTER]))

    def health(self, node: NodeView, reported: Reported, now: datetime) -> Health:
        """§1.10: healthy while the annotation lists devices (discovery refuses a node that lists none)."""
        return health.ALWAYS_HEALTHY

    def container_request(self, container: Mapping[str, Any]) -> DeviceRequest | None:
        """§2.5 (limits only): cores default 100; memory a bare GiB count, or bytes with a unit."""
        c = self.config
        nums = requests.count(container, c.resource_vcount_name, limits_only=True)
        if nums is None:
            return None
        cores = requests.integer(
            container, c.resource_vcore_name, INT32_MAX, "percent of a GPU", limits_only=True
        )
        memory = self._memory(container)
        return DeviceRequest(nums, VENDOR, memory, 100 if memory == 0 else 0, 100 if cores is None else cores)

    def _memory(self, container: Mapping[str, Any]) -> int:
        name = self.config.resource_vmemory_name
        raw = requests.lookup(container, name, limits_only=True)
        if raw is None:
            return 0
        value = quantity.as_int64(raw)
        if value is not None and value >= 0:
            if has_unit(raw, value):
                memory = value // 1024 // 1024
            elif value <= INT32_MAX // MEMORY_FACTOR:
                memory = value * MEMORY_FACTOR
            else:
                memory = -1
            if 0 <= memory <= INT32_MAX:
                return memory
        raise InvalidRequest(
            f"invalid {name} value {requests.show(raw)}: must be a whole number of GiB between 0 and "
            f"{INT32_MAX // MEMORY_FACTOR}, or a quantity with a unit of at most {INT32_MAX} MiB"
        )

    def usage_tags(self, pod_annotations: Mapping[str, str]) -> tuple[str, ...]:
        return sgpu_fit.usage_tags(pod_annotations)

    def placement_misfit(self, device: DeviceInfo, others: DeviceUse, own: DeviceUse) -> str:
        return sgpu_fit.placement_misfit(device, others, own)

    def fit(self, devices: Sequence[DeviceUsage], request: DeviceRequest, ctx: FitContext) -> FitOutcome:
        return sgpu_fit.fit(devices, request, ctx)

    def score_node(self, ctx: ScoreContext) -> float:
        return sgpu_fit.score(ctx, self.config.sgpu_topology_aware)

    def pod_annotations(
        self, devices: PodSingleDevice, ctx: AnnotationContext | None = None
    ) -> dict[str, str]:
        """§2.5 PatchAnnotations: HAMi's lists, Metax's JSON (one array per container, `compute`/`vRam`
        omitted when 0) and the time in nanoseconds."""
        result = device_lists(devices, TO_ALLOCATE, ALLOCATED)
        if not result:
            return result
        metax = [
            [
                {
                    "uuid": d.uuid,
                    **({"compute": d.usedcores} if d.usedcores else {}),
                    **({"vRam": d.usedmem} if d.usedmem else {}),
                }
                for d in group
            ]
            for group in devices
        ]
        result[METAX_ALLOCATED] = codec.go_json(metax)
        result[PREDICATE_TIME] = str(ctx.now_nanos if ctx is not None else 0)
        return result

    def mutate_container(self, container: dict[str, Any], pod: dict[str, Any]) -> bool:
        """§2.5 MutateAdmission: app-class pods are online or offline and ask one device; pods that are not
        online get `sgpu-qos-policy: best-effort` unless they name one of the three policies."""
        count = requests.lookup(container, self.config.resource_vcount_name, limits_only=True)
        if count is None:
            return False
        metadata = pod.setdefault("metadata", {})
        notes = metadata.get("annotations")
        if not isinstance(notes, dict):
            notes = {}
        app = notes.get(APP_CLASS)
        if app is not None:
            if app not in (ONLINE, OFFLINE):
                raise AdmissionError(f"{APP_CLASS} must be set one of [{ONLINE}, {OFFLINE}]")
            if quantity.ceil_value(count) != 1:
                raise AdmissionError("app-class pod must request single device")
        if app != ONLINE:
            policy = notes.get(QOS_POLICY)
            if policy is None:
                metadata["annotations"] = {**notes, QOS_POLICY: QOS_POLICIES[0]}
            elif policy not in QOS_POLICIES:
                raise AdmissionError(f"{QOS_POLICY} must be set one of [{', '.join(QOS_POLICIES)}]")
        return True
