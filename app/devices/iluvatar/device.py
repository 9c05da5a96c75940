"""One Iluvatar chip type (reference vendors §2.6, quirks §3.6): HAMi's `IluvatarDevices` for one
`iluvatars[]` entry, keyed by its common word (e.g. `BI-V150`).

Devices come from `hami.io/node-<cw>-register` in the legacy colon format; health is the generic handshake
on `hami.io/node-handshake-<cw>` (never removed, §3.6 #1); memory is counted in 256 MiB units (`.vMem`),
cores default to 0 (a single card without cores shares compute, §3.6 #3); Fit is the template with the
selectors `hami.io/use-<cw>-uuid` / `hami.io/no-use-<cw>-uuid`; pods take the shared node lock. The webhook
makes multi-card requests exclusive (`.vCore = count x 100`) and gives the container
`SOL_CONTINER_NAME=<name>` (HAMi's spelling, §3.6 #2, kept: the device plugin reads it).

Differences (docs/compatibility.md): a negative count, a non-integer or out-of-range memory and a
non-integer core value are refused instead of dropped or zeroed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from app.core import quantity
from app.core.model import DeviceRequest, DeviceUsage, PodSingleDevice
from app.core.vendor import (
    AnnotationContext,
    Discovery,
    FitContext,
    FitOutcome,
    InvalidRequest,
    NodeView,
)
from app.devices.common import requests, template
from app.devices.common.base import NamedResources, device_lists
from app.devices.common.placement import TemplatePlacement
from app.devices.common.registered import Keys, Registered, register_devices
from app.devices.iluvatar.config import CHART_CHIPS, IluvatarChip, parse_iluvatar_config

MEMORY_FACTOR = 256  # one vMem unit is 256 MiB
CONTAINER_ENV = "SOL_CONTINER_NAME"  # sic: HAMi's name, which the device plugin reads
INT32_MAX, INT32_MIN = 2**31 - 1, -(2**31)


@dataclass(frozen=True, slots=True)
class Iluvatar(TemplatePlacement, NamedResources, Registered):
    PLUGIN: ClassVar[str] = "HAMi's Iluvatar device plugin"
    config: IluvatarChip = field(default_factory=lambda: CHART_CHIPS[2])

    @property
    def keys(self) -> Keys:
        word = self.config.common_word
        return Keys.per_word(word, f"hami.io/node-{word}-register")

    @property
    def register(self) -> str:
        return self.keys.register

    @property
    def memory_factor(self) -> int:
        return MEMORY_FACTOR

    @property
    def rules(self) -> template.Rules:
        return template.Rules(self.key, f"hami.io/use-{self.key}-uuid", f"hami.io/no-use-{self.key}-uuid")

    def discover(self, node: NodeView) -> Discovery:
        """HAMi `GetNodeDevices`: the colon format; `:` alone decodes to nothing (`no gpu found on node`)."""
        return Discovery(register_devices(node, self.keys, legacy=True))

    def container_request(self, container: Mapping[str, Any]) -> DeviceRequest | None:
        """HAMi `GenerateResourceRequests` (§2.6): memory in 256 MiB units, cores default 0."""
        c = self.config
        nums = requests.count(container, c.resource_count_name)
        if nums is None:
            return None
        units = requests.integer(container, c.resource_memory_name, INT32_MAX // MEMORY_FACTOR, "vMem units")
        memory = (units or 0) * MEMORY_FACTOR
        cores = 0
        raw = requests.lookup(container, c.resource_core_name)
        if raw is not None:
            number = quantity.as_int64(raw)
            if number is None or not INT32_MIN <= number <= INT32_MAX:
                raise InvalidRequest(
                    f"invalid {c.resource_core_name} value {requests.show(raw)}: must be a whole number "
                    f"between {INT32_MIN} and {INT32_MAX}"
                )
            cores = number
        return DeviceRequest(nums, self.key, memory, 100 if memory == 0 else 0, cores)

    def fit(self, devices: Sequence[DeviceUsage], request: DeviceRequest, ctx: FitContext) -> FitOutcome:
        return template.fit(devices, request, ctx, self.rules)

    def pod_annotations(
        self, devices: PodSingleDevice, ctx: AnnotationContext | None = None
    ) -> dict[str, str]:
        return device_lists(devices, self.to_allocate_annotation, self.allocated_annotation)

    def mutate_container(self, container: dict[str, Any], pod: dict[str, Any]) -> bool:
        """§2.6 MutateAdmission: more than one card takes them whole (`.vCore = count x 100`); the container
        gets `SOL_CONTINER_NAME` unless it has it or has no name."""
        raw = requests.lookup(container, self.config.resource_count_name, limits_only=True)
        if raw is None:
            return False
        count = quantity.ceil_value(raw) or 0
        if count > 1:
            container["resources"]["limits"][self.config.resource_core_name] = str(count * 100)
        env = container.get("env")
        if not isinstance(env, list):
            env = []
        name = container.get("name")
        named = any(isinstance(e, dict) and e.get("name") == CONTAINER_ENV for e in env)
        if not named and isinstance(name, str) and name:
            container["env"] = [*env, {"name": CONTAINER_ENV, "value": name}]
        return True


def iluvatar_vendors(config: Any) -> tuple[Iluvatar, ...]:
    """One vendor per configured chip (HAMi: one backend per `iluvatars[]` entry)."""
    return tuple(Iluvatar(chip) for chip in parse_iluvatar_config(config))
