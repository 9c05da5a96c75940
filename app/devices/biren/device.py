"""The Biren vendor (reference vendors §2.13, quirks §3.13): HAMi's `BirenDevices`, byte for byte.

Devices come from `hami.io/node-biren-register` (JSON, `Devcore` forced to 100); health is the generic
handshake on `hami.io/node-handshake-biren`; pods take the shared node lock. A request is a number of whole
devices (`birentech.com/gpu`), shared only as far as each device's `count` allows: Fit checks health, type,
`birentech.com/use-gpuuuid`/`nouse-gpuuuid`, slots and the mutex policy, and records no memory or cores.
The filter writes `hami.io/Biren-devices-to-allocate` and `hami.io/Biren-devices-allocated` (capital B,
§3.13 #1, kept). `birentech.com/use-biren`/`nouse-biren` are declared by HAMi but never read; so here.

Difference (docs/compatibility.md): a negative count is refused instead of becoming a negative request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from app.core.model import ContainerDevice, DeviceRequest, DeviceUsage
from app.core.vendor import FitContext, FitOutcome
from app.devices.common import slots, template
from app.devices.common.countonly import CountOnly, CountOnlyKeys, count_section

KEYS = CountOnlyKeys(
    "Biren",
    "hami.io/node-biren-register",
    "hami.io/node-handshake-biren",
    "birentech.com/use-gpuuuid",
    "birentech.com/nouse-gpuuuid",
)


@dataclass(frozen=True, slots=True)
class BirenConfig:
    """The `biren:` section (chart default, vendors §1.3)."""

    resource_count_name: str = "birentech.com/gpu"


def parse_biren_config(value: Any) -> BirenConfig:
    return BirenConfig(count_section(value, "biren", BirenConfig().resource_count_name))


@dataclass(frozen=True, slots=True)
class Biren(CountOnly):
    PLUGIN: ClassVar[str] = "Biren's device plugin (HAMi protocol)"
    KEYS: ClassVar[CountOnlyKeys] = KEYS
    config: BirenConfig = field(default_factory=BirenConfig)

    def fit(self, devices: Sequence[DeviceUsage], request: DeviceRequest, ctx: FitContext) -> FitOutcome:
        """§2.13 Fit: the slot loop; each device taken records 0 MiB and the request's 0 cores."""

        def take(device: DeviceUsage) -> ContainerDevice:
            return ContainerDevice(device.id, KEYS.vendor, 0, request.coresreq, idx=device.index)

        found = slots.run(devices, request, ctx, KEYS.rules, take)
        if found.done:
            return FitOutcome(True, tuple(found.chosen))
        return template.failure(found, len(devices))
