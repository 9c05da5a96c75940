"""Device and node scores, computed in Go's float32 arithmetic (reference §4.5, §4.6, §13).

Scores decide which GPU and which node win, ties included, and the node score is printed in the
FilteringSucceed event with two decimals. HAMi computes them in float32 with int32 sums; Python floats are
doubles, so every operation is rounded back to float32 (`f32`). A double holds a float32 sum, product or
quotient exactly before that rounding, so the result equals Go's bit for bit (no FMA on amd64).

An integer of magnitude at most 2**24 is a float32 exactly, so its conversion needs no rounding, and the
quotient of two such integers is Python's correctly rounded int division (`_ratio`): the same double as
the quotient of their conversions. Only larger values pay for the rounding (device scores run for every
device of every node evaluated).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from app.core.codec import ScoringWeights
from app.core.model import PERCENT_UNSET, ContainerRequests, DeviceUsage

WEIGHT = 10  # HAMi util.Weight

_F32 = struct.Struct("<f")
_PACK, _UNPACK = _F32.pack, _F32.unpack  # bound once: f32 runs ~100 times per node evaluated
_F32X3 = struct.Struct("<3f")
_PACK3, _UNPACK3 = _F32X3.pack, _F32X3.unpack  # three independent roundings in one call


def f32(value: float) -> float:
    """Round to the nearest float32, as Go does after every float32 operation."""
    rounded: float = _UNPACK(_PACK(value))[0]
    return rounded


def i32(value: int) -> int:
    """Wrap to int32, as Go's int32 additions do on overflow."""
    return (value + 2**31) % 2**32 - 2**31


_EXACT = 2**24  # every integer of at most this magnitude is a float32 exactly


def _as_f32(value: int) -> float:
    """Go's float32(value) of an integer."""
    return float(value) if -_EXACT <= value <= _EXACT else f32(float(value))


def _ratio(numerator: int, denominator: int) -> float:
    """Go's float32(numerator) / float32(denominator)."""
    if -_EXACT <= numerator <= _EXACT and -_EXACT <= denominator <= _EXACT:
        return f32(numerator / denominator)
    return f32(f32(float(numerator)) / f32(float(denominator)))


def _ratios(a: int, b: int, c: int, d: int, e: int, f: int) -> tuple[float, float, float]:
    """`_ratio` of (a, b), (c, d) and (e, f)."""
    if min(a, b, c, d, e, f) >= -_EXACT and max(a, b, c, d, e, f) <= _EXACT:
        ratios: tuple[float, float, float] = _UNPACK3(_PACK3(a / b, c / d, e / f))
        return ratios
    return _ratio(a, b), _ratio(c, d), _ratio(e, f)


def device_score(device: DeviceUsage, requests: ContainerRequests, weights: ScoringWeights) -> float:
    """HAMi `DeviceListsScore.ComputeScore`: 10 × weighted predicted slot, core and memory utilisation.

    The request term counts only requests whose type *equals* the device type (quirk #2, kept): for real
    NVIDIA model strings it is zero, so devices rank by current usage, exactly as HAMi 2.10 ranks them.
    """
    if device.count == 0 or device.totalcore == 0 or device.totalmem == 0:
        return 0.0
    request = core = mem = 0
    for r in requests.values():
        if r.type != device.type:
            continue
        request = i32(request + 1)
        core = i32(core + r.coresreq)
        if r.mem_percentage not in (0, PERCENT_UNSET):  # Enflame DRS sends -1: Go truncates toward 0
            share = abs(device.totalmem * r.mem_percentage) // 100
            mem = i32(mem + i32(share if device.totalmem * r.mem_percentage >= 0 else -share))
        else:
            mem = i32(mem + r.memreq)
    used, cores, memory = _ratios(
        i32(request + device.used),
        device.count,
        i32(core + device.usedcores),
        device.totalcore,
        i32(mem + device.usedmem),
        device.totalmem,
    )
    # Go: total = w.slot*used; total += w.core*cores; total += w.memory*memory (each product rounded)
    slot, cores, memory = _UNPACK3(
        _PACK3(_as_f32(weights.slot) * used, _as_f32(weights.core) * cores, _as_f32(weights.memory) * memory)
    )
    return f32(float(WEIGHT) * f32(f32(slot + cores) + memory))


def node_score(devices: Iterable[DeviceUsage]) -> float:
    """HAMi `NodeScore.ComputeDefaultScore` over all devices of a node, before this pod (§4.5)."""
    used = count = ucore = tcore = umem = tmem = 0
    for d in devices:
        used, count = i32(used + d.used), i32(count + d.count)
        ucore, tcore = i32(ucore + d.usedcores), i32(tcore + d.totalcore)
        umem, tmem = i32(umem + d.usedmem), i32(tmem + d.totalmem)
    if count == 0 or tcore == 0 or tmem == 0:
        return 0.0
    slots, cores, memory = _ratios(used, count, ucore, tcore, umem, tmem)
    total = f32(f32(slots + cores) + memory)
    return f32(float(WEIGHT) * total)


def format_score(score: float) -> str:
    """Go's `%.2f` of a float32 (printed via its exact value, like Go)."""
    return f"{score:.2f}"
