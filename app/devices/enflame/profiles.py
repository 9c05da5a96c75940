"""Enflame DRS capacity and profiles (reference vendors §2.9 DRS discovery and `selectProfileByRequest`).

The DRS device plugin publishes `enflame.com/gcu-drs-capacity`:
`{"devices":[{"index":"0","minor":"0","capacity":6}],"profiles":{"1g.6gb":"0","3g.20gb":"1","6g.40gb":"2"}}`
— each GCU with its number of slices, and the partition profiles `<slices>g.<memory>gb` with their ids. A
pod asks either for a number of slices (direct, `enflame.com/drs-gcu`) or for memory and cores (by spec,
`enflame.com/gcu-memory` / `gcu-core`); the scheduler turns that into the smallest matching profile, whose
memory (GB x 1024 MiB) and cores (`ceil(slices x 100 / max slices)` percent) it reserves.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core import codec
from app.core.model import DeviceUsage

CAPACITY = "enflame.com/gcu-drs-capacity"
BY_SPEC = -1  # DeviceRequest.mem_percentage of a request by memory/cores (memreq: the memory value)
DIRECT = 0  # ... of a request for a number of slices (memreq: the slice count)


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    id: str
    slices: int
    memory_gb: int
    core_percent: int


def parse_profile_name(name: str) -> tuple[int, int] | None:
    """`3g.20gb` -> (3, 20); the `g`/`gb` suffixes are optional; anything else -> None."""
    parts = name.strip().lower().split(".")
    if len(parts) != 2:
        return None
    size, memory = parts[0].removesuffix("g"), parts[1].removesuffix("gb").removesuffix("g")
    if not (size.isascii() and size.isdigit() and memory.isascii() and memory.isdigit()):
        return None
    return int(size), int(memory)


def _profile_id(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise codec.CodecError(f"profile id {json.dumps(value)} is not a string")


def _capacity(value: Any, node: str) -> int:
    number = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        number = int(value.strip())
    if number is None or number <= 0 or number > 2**31 - 1:
        raise codec.CodecError(f"invalid drs capacity on node {node}")
    return number


@dataclass(frozen=True, slots=True)
class DrsDevice:
    index: int
    index_text: str
    minor: str
    capacity: int


@dataclass(frozen=True, slots=True)
class DrsCapacity:
    devices: tuple[DrsDevice, ...]
    profiles: Mapping[str, str]  # name -> id, as published
    max_slice: int
    max_memory_gb: int


def parse_capacity(value: str, node: str) -> DrsCapacity:
    """HAMi `GetNodeDevices` (§2.9) with its error texts."""
    try:
        raw = json.loads(value)
        if not isinstance(raw, dict):
            raise ValueError("expected a JSON object")
    except (ValueError, RecursionError) as exc:
        raise codec.CodecError(f"failed to parse {CAPACITY}: {exc}") from None
    names = raw.get("profiles") or {}
    if not isinstance(names, dict):
        raise codec.CodecError(f"failed to parse {CAPACITY}: profiles must be an object")
    profiles = {name: _profile_id(ident) for name, ident in names.items()}
    sizes = [parsed for name in profiles if (parsed := parse_profile_name(name)) is not None]
    max_slice = max((size for size, _ in sizes), default=0)
    max_memory = max((memory for _, memory in sizes), default=0)
    if max_slice <= 0:
        raise codec.CodecError(f"no valid drs profiles found on node {node}")
    entries = raw.get("devices") or []
    if not isinstance(entries, list):
        raise codec.CodecError(f"failed to parse {CAPACITY}: devices must be a list")
    devices = []
    for position, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise codec.CodecError(f"failed to parse {CAPACITY}: device {position} is not an object")
        text = entry.get("index", "")
        if not isinstance(text, str):
            raise codec.CodecError(f"failed to parse {CAPACITY}: device {position}: index is not a string")
        stripped = text.strip()
        index = int(stripped) if stripped.isascii() and stripped.isdigit() else position
        minor = entry.get("minor", "")
        minor = minor.strip() if isinstance(minor, str) and minor.strip() else str(index)
        devices.append(DrsDevice(index, str(index), minor, _capacity(entry.get("capacity"), node)))
    if not devices:
        raise codec.CodecError(f"no drs devices found on node {node}")
    return DrsCapacity(tuple(devices), profiles, max_slice, max_memory if max_memory > 0 else max_slice)


def candidates(devices: Sequence[DeviceUsage]) -> list[Profile]:
    """The profiles of all candidate devices (§3.9 #4: a union), valid ones, smallest first."""
    max_slice = 0
    names: dict[str, str] = {}
    for device in devices:
        value = device.custom.get("maxSlice")
        if isinstance(value, int) and not isinstance(value, bool):
            max_slice = max(max_slice, value)
        published = device.custom.get("profiles")
        if isinstance(published, Mapping):
            names.update({str(k): str(v) for k, v in published.items()})
    parsed = {name: size for name in names if (size := parse_profile_name(name)) is not None}
    if max_slice <= 0:
        max_slice = max((slices for slices, _ in parsed.values()), default=0)
    result = [
        Profile(name, names[name], slices, memory, -(-slices * 100 // max_slice))
        for name, (slices, memory) in parsed.items()
        if slices > 0 and memory > 0 and max_slice > 0
    ]
    return sorted(result, key=lambda p: (p.slices, p.memory_gb, p.name))


def normalize_gb(value: int, largest_gb: int) -> int:
    """A by-spec memory value: MiB when larger than twice the largest profile (§3.9 #2), else GB."""
    if value <= 0:
        return 0
    return -(-value // 1024) if value > 2 * largest_gb else value


def select(profiles: Sequence[Profile], memreq: int, mode: int, cores: int) -> Profile | None:
    """HAMi `selectProfileByRequest`: the profile of exactly that many slices, or the smallest with enough
    memory and cores."""
    if mode == DIRECT:
        return next((p for p in profiles if p.slices == memreq), None)
    wanted = normalize_gb(memreq, max((p.memory_gb for p in profiles), default=0))
    for profile in profiles:
        if (wanted <= 0 or profile.memory_gb >= wanted) and (cores <= 0 or profile.core_percent >= cores):
            return profile
    return None
