"""The `iluvatars:` section of HAMi's device-config.yaml: one entry per Iluvatar chip (reference vendors
§1.3, §2.6).

HAMi builds one backend per entry, keyed by its `commonWord`, only with `--enable-iluvatar`
(HAMI_ENABLE_ILUVATAR here). The chart's four chips are the defaults: without a section (Iluvatar switched on
by the setting alone) those four are used, and an entry whose `commonWord` is one of them takes that chip's
names for the keys it does not set; an entry for another chip gets `iluvatar.ai/<cw>-vgpu`, `.vMem`,
`.vCore` (HAMi leaves missing names empty, so the chip matches nothing; docs/compatibility.md).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from app.devices.common.config import DeviceConfigError, SectionNames, parse_names, section_of, string

CHART_WORDS = ("MR-V100", "MR-V50", "BI-V150", "BI-V100")


@dataclass(frozen=True, slots=True)
class IluvatarChip(SectionNames):
    """One `iluvatars[]` entry: its common word and the three names (`chipName` is not used)."""

    common_word: str = ""
    chip_name: str = ""


def chart_chip(word: str) -> IluvatarChip:
    """The chart's names for a chip (`iluvatar.ai/<cw>-vgpu`, `.vMem`, `.vCore`)."""
    return IluvatarChip(
        resource_count_name=f"iluvatar.ai/{word}-vgpu",
        resource_memory_name=f"iluvatar.ai/{word}.vMem",
        resource_core_name=f"iluvatar.ai/{word}.vCore",
        common_word=word,
        chip_name=word,
    )


CHART_CHIPS = tuple(chart_chip(word) for word in CHART_WORDS)


def parse_chip(value: Any, path: str) -> IluvatarChip:
    entry = section_of(value, path)
    word = string(entry, "commonWord", "", path)
    if not word:
        raise DeviceConfigError(f"{path}.commonWord: must be set")
    if any(c in word for c in ",;:"):
        raise DeviceConfigError(f"{path}.commonWord: {word!r} must not contain ',', ';' or ':'")
    base = chart_chip(word)
    chip = parse_names(entry, path, base)
    return dataclasses.replace(chip, chip_name=string(entry, "chipName", base.chip_name, path))


def parse_iluvatar_config(value: Any) -> tuple[IluvatarChip, ...]:
    """The `iluvatars:` list (None: the chart's four chips)."""
    if value is None:
        return CHART_CHIPS
    if not isinstance(value, list):
        raise DeviceConfigError("iluvatars: expected a list of chips")
    return tuple(parse_chip(item, f"iluvatars[{i}]") for i, item in enumerate(value))
