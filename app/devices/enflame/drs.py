"""Enflame DRS partitions (reference vendors §2.9 `Enflame`, quirks §3.9): HAMi's DRS backend.

Devices come from `enflame.com/gcu-drs-capacity` (`profiles`): each GCU `<node>-enflame-drs-<index>` with
its slice count (`Count`), the largest profile's memory and 100 cores. Every container asks one device; the
request names a slice count or memory/cores, the Fit picks the profile first (`profiles.select`, else
`1/<n> ModeNotFit`), then the device. No lock, no handshake, no to-allocate key: the filter writes
`hami.io/enflame-vgpu-devices-allocated` and Enflame's own keys (`enflame.com/gcu-assigned: "false"`, the
time, index, id, minor, request size of the first container, and `assigned-containers`), which the DRS
device plugin reads and flips.

Differences (docs/compatibility.md):
- one slot per allocation, as a rebuild from the pods counts it (HAMi: `Used += slices` inside one Filter,
  one per pod afterwards, §3.9 #3); the slices on a device stay within its largest profile because each
  allocation also takes `ceil(slices x 100 / max slices)` percent of the cores;
- the namespace quota (`limits.enflame.com/gcu-memory` in MiB, `gcu-core` in percent: the units recorded)
  is checked in Fit with the chosen profile (`ResourceQuotaNotFit`); HAMi checks only the raw request
  values at admission (slice counts or GB as memory, §3.9 #1), which we keep as a lower bound;
- a negative or out-of-range value is refused instead of dropped.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.core import codec, health, pods, quantity
from app.core import reasons as r
from app.core.health import Health, Reported
from app.core.model import ContainerDevice, DeviceInfo, DeviceRequest, DeviceUsage, PodSingleDevice
from app.core.policy import MUTEX, policy_contains
from app.core.vendor import (
    ALLOCATION,
    FLAG,
    INFO,
    AdmissionError,
    AnnotationContext,
    Discovery,
    FitContext,
    FitOutcome,
    NodeView,
    PodKey,
    Reads,
    ResourceNames,
)
from app.devices.common import requests, template
from app.devices.common.base import VendorDefaults
from app.devices.common.selectors import uuid_allowed
from app.devices.enflame import profiles
from app.devices.enflame.config import EnflameConfig
from app.devices.enflame.profiles import BY_SPEC, CAPACITY, DIRECT

VENDOR = "Enflame"
ALLOCATED = "hami.io/enflame-vgpu-devices-allocated"
ASSIGNED = "enflame.com/gcu-assigned"
ASSIGNED_TIME = "enflame.com/gcu-assigned-time"
ASSIGNED_INDEX = "enflame.com/gcu-assigned-index"
ASSIGNED_ID = "enflame.com/gcu-assigned-id"
ASSIGNED_MINOR = "enflame.com/gcu-assigned-minor"
REQUEST_SIZE = "enflame.com/gcu-request-size"
CONTAINERS = "assigned-containers"
USE_UUID, NOUSE_UUID = "enflame.com/use-gpuuuid", "enflame.com/nouse-gpuuuid"
INT32_MAX = 2**31 - 1
MARK = "allocated"  # the per-container mark in `assigned-containers` the DRS plugin turns true


def marks_only(old: str | None, new: str | None) -> bool:
    """The DRS plugin's write to `assigned-containers` (`PodKey.amend`): per container only the `allocated`
    mark may change; the containers, their slice requests and profiles stay what the filter wrote."""
    if old == new:
        return True
    try:
        before, after = json.loads(old or "null"), json.loads(new or "null")
    except ValueError:
        return False
    if not isinstance(before, dict) or not isinstance(after, dict) or before.keys() != after.keys():
        return False
    for name, entry in before.items():
        if not isinstance(entry, dict) or not isinstance(after[name], dict):
            return False
        if {k: v for k, v in entry.items() if k != MARK} != {
            k: v for k, v in after[name].items() if k != MARK
        }:
            return False
    return True


def _names(pod: Mapping[str, Any]) -> list[str]:
    """Container names in annotation order: init containers first (the pod was validated by the filter)."""
    return [pods.container_name(c) for c in (*pods.init_containers(pod), *pods.containers(pod))]


@dataclass(frozen=True, slots=True)
class EnflameDrs(VendorDefaults):
    config: EnflameConfig = field(default_factory=EnflameConfig)

    @property
    def key(self) -> str:
        return VENDOR

    @property
    def resources(self) -> ResourceNames:
        c = self.config
        return ResourceNames(c.resource_name_drs, c.resource_name_memory, "", c.resource_name_core)

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
        return CAPACITY

    @property
    def reads(self) -> Reads:
        return Reads(node_annotations=(CAPACITY,))

    @property
    def lock(self) -> None:
        return None

    @property
    def pod_keys(self) -> tuple[PodKey, ...]:
        plugin = "Enflame's DRS device plugin"
        return (
            PodKey(ALLOCATED, ALLOCATION),
            PodKey(ASSIGNED_INDEX, ALLOCATION),  # the GCU the partition is carved from
            PodKey(ASSIGNED_ID, ALLOCATION),
            PodKey(ASSIGNED_MINOR, ALLOCATION),
            PodKey(REQUEST_SIZE, ALLOCATION),
            PodKey(CONTAINERS, ALLOCATION, plugin=plugin, amend=marks_only),
            PodKey(ASSIGNED, FLAG, plugin=plugin),
            PodKey(ASSIGNED_TIME, INFO),
        )

    def registered(self, node: NodeView) -> bool:
        return CAPACITY in node.annotations

    def discover(self, node: NodeView) -> Discovery:
        parsed = profiles.parse_capacity(node.annotations[CAPACITY], node.name)
        devices = tuple(
            DeviceInfo(
                f"{node.name}-enflame-drs-{d.index}",
                d.index,
                d.capacity,
                parsed.max_memory_gb * 1024,
                100,
                VENDOR,
                0,
                "",
                True,
                VENDOR,
                custom={
                    "minor": d.minor,
                    "index": d.index_text,
                    "profiles": dict(parsed.profiles),
                    "maxSlice": parsed.max_slice,
                },
            )
            for d in parsed.devices
        )
        return Discovery(devices)

    def health(self, node: NodeView, reported: Reported, now: datetime) -> Health:
        return health.ALWAYS_HEALTHY

    def container_request(self, container: Mapping[str, Any]) -> DeviceRequest | None:
        """§2.9: one device per container, for a slice count (direct) or memory and cores (by spec)."""
        c = self.config
        if requests.lookup(container, c.resource_name_drs) is not None:
            slices = requests.count(container, c.resource_name_drs)
            return None if slices is None else DeviceRequest(1, VENDOR, slices, DIRECT, 0)
        memory = requests.integer(container, c.resource_name_memory, INT32_MAX, "GB or MiB", rounded=True)
        cores = requests.integer(container, c.resource_name_core, INT32_MAX, "percent", rounded=True)
        if memory is None and cores is None:
            return None
        return DeviceRequest(1, VENDOR, memory or 0, BY_SPEC, cores or 0)

    def fit(self, devices: Sequence[DeviceUsage], request: DeviceRequest, ctx: FitContext) -> FitOutcome:
        """§2.9 DRS Fit: the profile, then the device, from the end of the sorted list."""
        profile = profiles.select(
            profiles.candidates(devices), request.memreq, request.mem_percentage, request.coresreq
        )
        if profile is None:
            return FitOutcome(False, (), r.gen_reason({r.MODE_NOT_FIT: 1}, len(devices)))
        notes = ctx.pod_annotations
        mutex = policy_contains(ctx.policy, MUTEX)
        memory = profile.memory_gb * 1024
        counts: Counter[str] = Counter()
        for i in range(len(devices) - 1, -1, -1):
            d = devices[i]
            if not d.health:
                counts[r.CARD_NOT_HEALTH] += 1
                continue
            if request.type != VENDOR:
                counts[r.CARD_TYPE_MISMATCH] += 1
                continue
            if not uuid_allowed(notes, USE_UUID, NOUSE_UUID, d.id):
                counts[r.CARD_UUID_MISMATCH] += 1
                continue
            if d.count <= d.used:
                counts[r.CARD_TIME_SLICING_EXHAUSTED] += 1
                continue
            if mutex and d.used > 0:
                counts[r.EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT] += 1
                continue
            if d.totalmem - d.usedmem < memory:
                counts[r.CARD_INSUFFICIENT_MEMORY] += 1
                continue
            if d.totalcore > 0 and d.totalcore - d.usedcores < profile.core_percent:
                counts[r.CARD_INSUFFICIENT_CORE] += 1
                continue
            custom = (
                ("profileName", profile.name),
                ("profileID", profile.id),
                ("minor", str(d.custom.get("minor", ""))),
                ("index", str(d.custom.get("index", d.index))),
                ("slices", str(profile.slices)),
            )
            candidate = ContainerDevice(
                d.id, VENDOR, memory, profile.core_percent, idx=d.index, custom=custom
            )
            if not ctx.quota_fits([candidate]):
                counts[r.RESOURCE_QUOTA_NOT_FIT] += 1
                continue
            return FitOutcome(True, (candidate,))
        return template.failure(template.Run([], counts, False), len(devices))

    def pod_annotations(
        self, devices: PodSingleDevice, ctx: AnnotationContext | None = None
    ) -> dict[str, str]:
        """§2.9 PatchAnnotations."""
        if not any(devices):
            return {}
        result = {ALLOCATED: codec.encode_pod_single_device(devices), ASSIGNED: "false"}
        result[ASSIGNED_TIME] = str(ctx.now_nanos if ctx is not None else 0)
        names = _names(ctx.pod) if ctx is not None else []
        assigned: dict[str, dict[str, Any]] = {}
        first: dict[str, str] | None = None
        for position, group in enumerate(devices):
            if not group:
                continue
            custom = dict(group[0].custom)
            first = first or custom
            entry: dict[str, Any] = {"allocated": False, "request": int(custom.get("slices", "0"))}
            for key in ("profileID", "profileName"):
                if custom.get(key):
                    entry[key] = custom[key]
            name = names[position] if position < len(names) else f"container-{position}"
            assigned[name] = entry
        assert first is not None
        result[CONTAINERS] = codec.go_json({name: assigned[name] for name in sorted(assigned)})
        result[ASSIGNED_INDEX] = result[ASSIGNED_ID] = first.get("index", "")
        result[ASSIGNED_MINOR] = first.get("minor", "")
        result[REQUEST_SIZE] = first.get("slices", "")
        return result

    def request_notes(self, container: Mapping[str, Any], request: DeviceRequest | None) -> tuple[str, ...]:
        """`app.core.notes.RequestNotes`: next to a slice count (direct mode) memory and cores are ignored."""
        c = self.config
        if requests.lookup(container, c.resource_name_drs) is None:
            return ()
        named = [
            n
            for n in (c.resource_name_memory, c.resource_name_core)
            if requests.lookup(container, n) is not None
        ]
        if not named:
            return ()
        verb = "is" if len(named) == 1 else "are"
        slices = c.resource_name_drs
        return (f"{' and '.join(named)} {verb} ignored next to {slices} (a slice count), as HAMi does",)

    def mutate_container(self, container: dict[str, Any], pod: dict[str, Any]) -> bool:
        """§2.9 MutateAdmission: a slice count must be positive; memory positive and cores in (0,100];
        each value given on one side (limits or requests) is copied to the other."""
        c = self.config
        count = requests.lookup(container, c.resource_name_drs)
        if count is not None:
            if (quantity.ceil_value(count) or 0) <= 0:
                raise AdmissionError(
                    f"{c.resource_name_drs} must be greater than 0 (a whole number of slices)"
                )
            _mirror(container, c.resource_name_drs)
            return True
        memory, cores = _value(container, c.resource_name_memory), _value(container, c.resource_name_core)
        if memory is None and cores is None:
            return False
        if memory is not None and (quantity.ceil_value(memory) or 0) <= 0:
            raise AdmissionError(f"{c.resource_name_memory} must be greater than 0 (at most {INT32_MAX})")
        if cores is not None and not 0 < (quantity.ceil_value(cores) or 0) <= 100:
            raise AdmissionError(f"{c.resource_name_core} must be in range (0,100]")
        for name, value in ((c.resource_name_memory, memory), (c.resource_name_core, cores)):
            if value is not None:
                _mirror(container, name)
        return True


def _value(container: Mapping[str, Any], name: str) -> Any | None:
    """HAMi `getContainerResourceRequest`: the limit, or the request when the limit is absent or zero."""
    resources = container.get("resources")
    limits = resources.get("limits") if isinstance(resources, Mapping) else None
    asked = resources.get("requests") if isinstance(resources, Mapping) else None
    limit = limits.get(name) if isinstance(limits, Mapping) else None
    request = asked.get(name) if isinstance(asked, Mapping) else None
    if limit is not None and quantity.ceil_value(limit) != 0:
        return limit
    return request if request is not None else limit


def _mirror(container: dict[str, Any], name: str) -> None:
    """Copy `name` to whichever of limits/requests lacks it (a zero limit takes the request's value)."""
    resources = container.setdefault("resources", {})
    limits, asked = resources.setdefault("limits", {}), resources.setdefault("requests", {})
    if (name not in limits or quantity.ceil_value(limits[name]) == 0) and name in asked:
        limits[name] = asked[name]
    if name not in asked:
        asked[name] = limits[name]
