"""Device and node scores, computed in Go's float32 arithmetic (reference §4.5, §4.6, §13).

Scores decide which GPU and which node win, ties included, and the node score is printed in the
FilteringSucceed event with two decimals. HAMi computes them in float32 with int32 sums; Python floats are
doubles, so every operation is rounded back to float32 (`f32`). A double holds a float32 sum, product or
quotient exactly before that rounding, so the result equals Go's bit for bit (no FMA on amd64).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from app.core.codec import ScoringWeights
from app.core.model import PERCENT_UNSET, ContainerRequests, DeviceUsage

WEIGHT = 10  # HAMi util.Weight

_F32 = struct.Struct("<f")
_PACK, _UNPACK = _F32.pack, _F32.unpack  # bound once: f32 runs ~200 times per node evaluated


def f32(value: float) -> float:
    """Round to the nearest float32, as Go does after every float32 operation."""
    rounded: float = _UNPACK(_PACK(value))[0]
    return rounded


def i32(value: int) -> int:
    """Wrap to int32, as Go's int32 additions do on overflow."""
    return (value + 2**31) % 2**32 - 2**31


def _ratio(numerator: int, denominator: int) -> float:
    return f32(f32(float(numerator)) / f32(float(denominator)))


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
    used = _ratio(i32(request + device.used), device.count)
    cores = _ratio(i32(core + device.usedcores), device.totalcore)
    memory = _ratio(i32(mem + device.usedmem), device.totalmem)
    total = f32(f32(float(weights.slot)) * used)
    total = f32(total + f32(f32(float(weights.core)) * cores))
    total = f32(total + f32(f32(float(weights.memory)) * memory))
    return f32(float(WEIGHT) * total)


def node_score(devices: Iterable[DeviceUsage]) -> float:
    """HAMi `NodeScore.ComputeDefaultScore` over all devices of a node, before this pod (§4.5)."""
    used = count = ucore = tcore = umem = tmem = 0
    for d in devices:
        used, count = i32(used + d.used), i32(count + d.count)
        ucore, tcore = i32(ucore + d.usedcores), i32(tcore + d.totalcore)
        umem, tmem = i32(umem + d.usedmem), i32(tmem + d.totalmem)
    if count == 0 or tcore == 0 or tmem == 0:
        return 0.0
    total = f32(f32(_ratio(used, count) + _ratio(ucore, tcore)) + _ratio(umem, tmem))
    return f32(float(WEIGHT) * total)


def format_score(score: float) -> str:
    """Go's `%.2f` of a float32 (printed via its exact value, like Go)."""
    return f"{score:.2f}"
