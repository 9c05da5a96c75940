"""Device vendors behind the `app.core.vendor.Vendor` protocol, registered in one explicit table.

HAMi registers its backends by side effects of init functions into global maps (vendors §1.2); here
`REGISTRY` lists every vendor family of HAMi in HAMi's registration order, and `build_vendors` turns the
parsed device-config.yaml into the tuple of vendors the core receives as an argument.

Which families are enabled, with HAMi's semantics:
- NVIDIA always (chart defaults when its section is absent);
- a family behind an `--enable-*` flag in HAMi (Ascend, Iluvatar) when the flag is on: the service's
  HAMI_ENABLE_<FAMILY> setting; in the CLI (`flags=None`) when its section is present in --device-config;
- every other family when its section names its count resource: HAMi registers it unconditionally, but
  without that name it never matches anything. Other names a section leaves out take the chart's defaults
  (as for NVIDIA; HAMi leaves them empty).
A family that is not enabled is listed with its chart resource names, so a pod asking for them gets a clear
answer instead of being silently passed through (`disabled_resources`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from app.core.vendor import Vendor
from app.devices.amd import Amd, parse_amd_config
from app.devices.ascend import ascend_vendors
from app.devices.awsneuron import AwsNeuron, parse_awsneuron_config
from app.devices.biren import Biren, parse_biren_config
from app.devices.cambricon import Cambricon, parse_cambricon_config
from app.devices.common.config import DeviceConfigError
from app.devices.enflame import enflame_vendors
from app.devices.hygon import Hygon, parse_hygon_config
from app.devices.iluvatar import iluvatar_vendors
from app.devices.kunlun import kunlun_vendors
from app.devices.metax import metax_vendors
from app.devices.mthreads import Mthreads, parse_mthreads_config
from app.devices.nvidia import Nvidia, parse_nvidia_config
from app.devices.vastai import Vastai, parse_vastai_config


@dataclass(frozen=True, slots=True)
class Family:
    """One of HAMi's vendor families: a device-config.yaml section and the vendors it builds.

    `build` gets the section's value (None: the chart defaults) and returns one vendor per HAMi backend
    (Ascend: one per `vnpus.configs[]` chip).
    `resources` are the chart's resource names, used to recognise pods asking for a disabled family.
    `every_pod` are the section's keys (or its chips' keys) that, set to anything but false, "" or
    "default", make the webhook change pods asking for none of the family's resources (HAMi's
    `overwriteEnv`, NVIDIA's `gpuCorePolicy`): the chart then sends every pod CREATE to the webhook
    (app/cli/chartscope.py; tests/devices/test_every_pod.py holds the list to the vendors' mutations).
    """

    name: str
    section: str
    build: Callable[[Any], tuple[Vendor, ...]]
    flag: str = ""  # HAMi's --enable-<flag> (HAMI_ENABLE_<FLAG>); "" when HAMi has none
    always: bool = False
    resources: tuple[str, ...] = ()
    count_keys: tuple[str, ...] = ("resourceCountName",)  # a section naming none of these matches nothing
    every_pod: tuple[str, ...] = ()


def _one(factory: Callable[[Any], Vendor]) -> Callable[[Any], tuple[Vendor, ...]]:
    return lambda section: (factory(section),)


REGISTRY: tuple[Family, ...] = (
    Family(
        "NVIDIA",
        "nvidia",
        _one(lambda s: Nvidia(parse_nvidia_config(s))),
        always=True,
        every_pod=("overwriteEnv", "gpuCorePolicy"),
    ),
    Family("Cambricon MLU", "cambricon", _one(lambda s: Cambricon(parse_cambricon_config(s)))),
    Family("Hygon DCU", "hygon", _one(lambda s: Hygon(parse_hygon_config(s)))),
    Family(
        "Enflame",
        "enflame",
        enflame_vendors,
        always=True,  # DRS names have built-in defaults in HAMi: DRS pods are served without a section
        resources=(
            "enflame.com/gcu",
            "enflame.com/drs-gcu",
            "enflame.com/gcu-memory",
            "enflame.com/gcu-core",
        ),
        count_keys=("resourceNameGCU",),
    ),
    Family("Moore Threads", "mthreads", _one(lambda s: Mthreads(parse_mthreads_config(s)))),
    Family(
        "Metax",
        "metax",
        metax_vendors,
        resources=(
            "metax-tech.com/gpu",
            "metax-tech.com/sgpu",
            "metax-tech.com/vmemory",
            "metax-tech.com/vcore",
        ),
        count_keys=("resourceCountName", "resourceVCountName"),
    ),
    Family(
        "Kunlunxin",
        "kunlun",
        kunlun_vendors,
        resources=("kunlunxin.com/xpu", "kunlunxin.com/vxpu", "kunlunxin.com/vxpu-memory"),
        count_keys=("resourceCountName", "resourceVCountName"),
    ),
    # --- AWS Neuron, AMD, Vastai, Biren (vendors §2.10-2.13) ---
    Family("AWS Neuron", "awsneuron", _one(lambda s: AwsNeuron(parse_awsneuron_config(s)))),
    Family("AMD", "amd", _one(lambda s: Amd(parse_amd_config(s)))),
    Family("Vastai", "vastai", _one(lambda s: Vastai(parse_vastai_config(s)))),
    Family("Biren", "biren", _one(lambda s: Biren(parse_biren_config(s)))),
    # --- end AWS Neuron, AMD, Vastai, Biren ---
    Family("Huawei Ascend", "vnpus", ascend_vendors, flag="ascend", every_pod=("overwriteEnv",)),
    Family(
        "Iluvatar",
        "iluvatars",
        iluvatar_vendors,
        flag="iluvatar",
        resources=tuple(
            f"iluvatar.ai/{chip}{suffix}"
            for chip in ("MR-V100", "MR-V50", "BI-V150", "BI-V100")
            for suffix in ("-vgpu", ".vMem", ".vCore")
        ),
    ),
)
FLAGS = frozenset(f.flag for f in REGISTRY if f.flag)


def _sections(device_config: Mapping[str, Any] | None) -> Mapping[str, Any]:
    sections = device_config or {}
    if not isinstance(sections, Mapping):
        raise DeviceConfigError("device config: expected a mapping of vendor sections")
    return sections


def enabled(family: Family, sections: Mapping[str, Any], flags: frozenset[str] | None) -> bool:
    """HAMi's rule for one family (module docstring); `flags=None`: the CLI's (a section enables it)."""
    section = sections.get(family.section)
    if family.always:
        return True
    if family.flag:
        return section is not None if flags is None else family.flag in flags
    if not isinstance(section, Mapping):
        return section is not None  # present but not a mapping: the family's parser reports it
    return any(section.get(key) for key in family.count_keys)


def build_vendors(
    device_config: Mapping[str, Any] | None, flags: frozenset[str] | None = None
) -> tuple[Vendor, ...]:
    """The enabled vendors for a parsed device-config.yaml (a mapping of sections), in registry order.

    `flags` are the `--enable-*` switches that are on (e.g. {"ascend"}); None applies the CLI's rule.
    Raises DeviceConfigError for an invalid section, an unknown switch, or two vendors with one key."""
    sections = _sections(device_config)
    unknown = (flags or frozenset()) - FLAGS
    if unknown:
        raise DeviceConfigError(
            f"unknown vendor switch {sorted(unknown)[0]!r} (known: {', '.join(sorted(FLAGS))})"
        )
    vendors: list[Vendor] = []
    for family in REGISTRY:
        if not enabled(family, sections, flags):
            continue
        vendors.extend(family.build(sections.get(family.section)))
    keys = [v.key for v in vendors]
    duplicated = sorted({k for k in keys if keys.count(k) > 1})
    if duplicated:
        raise DeviceConfigError(f"vendor key {duplicated[0]!r} is configured twice")
    return tuple(vendors)


def _names(vendors: tuple[Vendor, ...]) -> list[str]:
    return [
        name
        for vendor in vendors
        for name in (vendor.resources.count, vendor.resources.memory, vendor.resources.cores)
        if name
    ]


def disabled_resources(
    device_config: Mapping[str, Any] | None, flags: frozenset[str] | None = None
) -> dict[str, str]:
    """Resource name -> why no vendor here serves it, for every family that is not enabled under this
    configuration: its chart default names. An enabled family whose section
    leaves one of its backends out (Metax without `resourceVCountName`, Enflame without
    `resourceNameGCU`) lists that backend's chart names too."""
    sections = _sections(device_config)
    result: dict[str, str] = {}
    for family in REGISTRY:
        if enabled(family, sections, flags):
            served = set(_names(family.build(sections.get(family.section))))
            why = f"{family.name} is not enabled for it (device config: the {family.section!r} section)"
            result.update(dict.fromkeys((n for n in family.resources if n not in served), why))
            continue
        if family.flag and flags is not None:
            switch = f"HAMI_ENABLE_{family.flag.upper()}"
        else:
            switch = f"the {family.section!r} section"
        why = f"{family.name} is not enabled (device config: {switch})"
        result.update(dict.fromkeys(family.resources or _names(family.build(None)), why))
    return result


__all__ = [
    "FLAGS",
    "REGISTRY",
    "DeviceConfigError",
    "Family",
    "build_vendors",
    "disabled_resources",
    "enabled",
]
