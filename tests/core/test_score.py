"""Device and node scores in Go float32 arithmetic (reference §4.5, §4.6, §13)."""

from __future__ import annotations

import struct

import pytest
from core_builders import V100, ctr, gpu, node, pod, run
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.codec import ScoringWeights
from app.core.model import PERCENT_UNSET, DeviceRequest, DeviceUsage, DeviceUse
from app.core.score import device_score, f32, format_score, i32, node_score

W = ScoringWeights()


def _is_float32(value: float) -> bool:
    return bool(struct.unpack("<f", struct.pack("<f", value))[0] == value)


def dev(
    used: int = 0,
    usedmem: int = 0,
    usedcores: int = 0,
    *,
    count: int = 10,
    totalmem: int = 32768,
    totalcore: int = 100,
    type: str = V100,
    numa: int = 0,
) -> DeviceUsage:
    return DeviceUsage(
        "GPU", 0, used, count, usedmem, totalmem, totalcore, usedcores, "hami-core", numa, type, True
    )


def req(
    nums: int = 1, memreq: int = 0, pct: int = PERCENT_UNSET, cores: int = 0, type: str = "NVIDIA"
) -> DeviceRequest:
    return DeviceRequest(nums, type, memreq, pct, cores)


def test_node_score_spec_example() -> None:
    # 2 GPUs (count 10, 32768 MiB, 100 cores), one task on GPU-A with 8000 MiB / 30 cores.
    score = node_score([dev(1, 8000, 30), dev()])
    assert score == pytest.approx(3.2207, abs=1e-4)
    assert _is_float32(score)
    assert format_score(score) == "3.22"


@pytest.mark.parametrize(
    ("devices", "expected"),
    [
        ([], 0.0),
        ([dev(count=0)], 0.0),
        ([dev(totalcore=0)], 0.0),
        ([dev(totalmem=0)], 0.0),
        ([dev(count=0), dev(5, 0, 0)], 10 * 5 / 10),
        ([dev(10, 32768, 100)], 30.0),
    ],
    ids=["no-devices", "zero-count", "zero-cores", "zero-memory", "sums-over-devices", "full"],
)
def test_node_score_edges(devices: list[DeviceUsage], expected: float) -> None:
    assert node_score(devices) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("usage", "float32_text", "float64_text"),
    [
        ((15, 16, 14, 100, 319, 1000), "13.97", "13.96"),
        ((15, 16, 19, 100, 513, 1000), "16.41", "16.40"),
        ((1, 16, 83, 100, 136, 1000), "10.28", "10.29"),
    ],
    ids=["f32-above-half", "f32-above-half-2", "f32-below-half"],
)
def test_node_score_prints_the_float32_value(
    usage: tuple[int, ...], float32_text: str, float64_text: str
) -> None:
    used, count, ucore, tcore, umem, tmem = usage
    score = node_score([dev(used, umem, ucore, count=count, totalmem=tmem, totalcore=tcore)])
    assert format_score(score) == float32_text
    # the same formula in double precision would print differently: the event text depends on float32
    assert format_score(10 * (used / count + ucore / tcore + umem / tmem)) == float64_text


def test_worked_example_device_scores() -> None:
    c0 = {"NVIDIA": req(1, 3000, PERCENT_UNSET, 30)}
    # production: the device type is a model string, the request term is 0 (quirk #2)
    assert device_score(dev(1, 8000, 30), c0, W) == pytest.approx(6.44, abs=5e-3)
    assert device_score(dev(), c0, W) == 0.0
    # unit-test style device Type "NVIDIA": the request term counts
    assert format_score(device_score(dev(1, 8000, 30, type="NVIDIA"), c0, W)) == "11.36"
    assert format_score(device_score(dev(type="NVIDIA"), c0, W)) == "4.92"
    # c2 (50 %) after c0 went to GPU-B
    c2 = {"NVIDIA": req(2, 0, 50, 0)}
    assert format_score(device_score(dev(1, 8000, 30), c2, W)) == "6.44"
    assert format_score(device_score(dev(1, 3000, 30), c2, W)) == "4.92"


@pytest.mark.parametrize(
    ("device", "requests", "weights", "expected"),
    [
        (dev(type="NVIDIA"), {"NVIDIA": req(4)}, W, 10 * (1 / 10)),
        (dev(type="NVIDIA"), {"NVIDIA": req(1, pct=50)}, W, 10 * (1 / 10 + 16384 / 32768)),
        (dev(type="NVIDIA"), {"NVIDIA": req(1, memreq=999, pct=0)}, W, 10 * (1 / 10 + 999 / 32768)),
        (dev(type="NVIDIA"), {"NVIDIA": req(1, memreq=999)}, W, 10 * (1 / 10 + 999 / 32768)),
        (dev(type="NVIDIA", totalmem=3), {"NVIDIA": req(1, pct=50)}, W, 10 * (1 / 10 + 1 / 3)),
        (dev(type="NVIDIA-T4"), {"NVIDIA": req(1, 100, cores=50)}, W, 0.0),
        (dev(2, 0, 0, type="NVIDIA"), {"NVIDIA": req(1)}, ScoringWeights(1, 0, 0), 10 * 3 / 10),
        (dev(0, 1000, 30), {}, ScoringWeights(0, 2, 3), 10 * (2 * 30 / 100 + 3 * 1000 / 32768)),
        (dev(0, 0, 0, count=0), {}, W, 0.0),
    ],
    ids=[
        "one-slot-per-request-entry-not-nums",
        "percentage-of-card",
        "percentage-zero-uses-memreq",
        "unset-percentage-uses-memreq",
        "percentage-integer-division",
        "request-type-must-equal-device-type",
        "slot-weight-only",
        "core-and-memory-weights",
        "zero-count-scores-zero",
    ],
)
def test_device_score(
    device: DeviceUsage, requests: dict[str, DeviceRequest], weights: ScoringWeights, expected: float
) -> None:
    score = device_score(device, requests, weights)
    assert score == pytest.approx(expected, rel=1e-6)
    assert _is_float32(score)


def test_device_score_percentage_does_not_overflow_int32() -> None:
    # Go computes int32(int64(Totalmem) * int64(pct) / 100).
    big = dev(type="NVIDIA", totalmem=2**31 - 1)
    score = device_score(big, {"NVIDIA": req(1, pct=100)}, ScoringWeights(0, 0, 1))
    assert score == pytest.approx(10.0)


def test_float32_ties_break_by_registration_order() -> None:
    # These two cards score 20.580761 in float32 but differ in float64 (20.5807617187500 vs ...499).
    x, y = DeviceUse(4, 25496, 88), DeviceUse(7, 17304, 83)
    assert device_score(dev(4, 25496, 88), {}, W) == device_score(dev(7, 17304, 83), {}, W)
    nodes = (node("n1", gpu("GPU-Y", 0), gpu("GPU-X", 1)),)
    winner = run(pod(ctr("a", gpu=1, mem=1)), nodes, {"n1": {"GPU-X": x, "GPU-Y": y}}).winner
    assert winner is not None and winner.devices is not None
    # spread tries the lowest score; on a float32 tie the later-registered card sorts last and goes first
    assert winner.devices["NVIDIA"][0][0].uuid == "GPU-X"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (3.2207, "3.22"),
        (0.125, "0.12"),
        (0.375, "0.38"),
        (f32(2.675), "2.67"),
        (f32(1.005), "1.00"),
        (0.0, "0.00"),
        (30.0, "30.00"),
    ],
    ids=[
        "example",
        "half-to-even-down",
        "half-to-even-up",
        "f32-below-half",
        "f32-below-half-2",
        "zero",
        "full",
    ],
)
def test_format_score(value: float, text: str) -> None:
    assert format_score(value) == text


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0, 0), (2**31 - 1, 2**31 - 1), (2**31, -(2**31)), (-(2**31) - 1, 2**31 - 1), (2**32 + 5, 5)],
    ids=["zero", "max", "wrap-high", "wrap-low", "wrap-twice"],
)
def test_i32_wraps_like_go(value: int, expected: int) -> None:
    assert i32(value) == expected


def _go_ratio(numerator: int, denominator: int) -> float:
    return f32(f32(float(numerator)) / f32(float(denominator)))


def _go_device_score(
    device: DeviceUsage, requests: dict[str, DeviceRequest], weights: ScoringWeights
) -> float:
    """The score rounded to float32 after every conversion and operation, one step at a time, as Go does:
    what the shortcuts of app/core/score.py (no rounding of small integers, roundings three at once) must
    reproduce bit for bit."""
    if device.count == 0 or device.totalcore == 0 or device.totalmem == 0:
        return 0.0
    request = core = mem = 0
    for r in requests.values():
        if r.type == device.type:
            request, core = i32(request + 1), i32(core + r.coresreq)
            mem = i32(mem + r.memreq)
    used = _go_ratio(i32(request + device.used), device.count)
    cores = _go_ratio(i32(core + device.usedcores), device.totalcore)
    memory = _go_ratio(i32(mem + device.usedmem), device.totalmem)
    total = f32(f32(float(weights.slot)) * used)
    total = f32(total + f32(f32(float(weights.core)) * cores))
    total = f32(total + f32(f32(float(weights.memory)) * memory))
    return f32(10.0 * total)


def _go_node_score(devices: list[DeviceUsage]) -> float:
    """int32 sums wrap the same once at the end as after every addition (arithmetic modulo 2**32)."""
    sums = [
        i32(sum(getattr(d, name) for d in devices))
        for name in ("used", "count", "usedcores", "totalcore", "usedmem", "totalmem")
    ]
    used, count, ucore, tcore, umem, tmem = sums
    if count == 0 or tcore == 0 or tmem == 0:
        return 0.0
    total = f32(f32(_go_ratio(used, count) + _go_ratio(ucore, tcore)) + _go_ratio(umem, tmem))
    return f32(10.0 * total)


# around 2**24, where integers stop being float32 values, and the int32 extremes
_INTS = st.one_of(st.integers(-(2**31), 2**31 - 1), st.integers(2**24 - 8, 2**24 + 8), st.integers(0, 200))
_POSITIVE = st.one_of(st.integers(1, 2**31 - 1), st.integers(2**24 - 8, 2**24 + 8), st.integers(1, 200))
_DEVICES = st.builds(
    dev, _INTS, _INTS, _INTS, count=_POSITIVE, totalmem=_POSITIVE, totalcore=_POSITIVE, type=st.just("NVIDIA")
)


@settings(max_examples=600, deadline=None)
@given(
    _DEVICES,
    st.lists(st.tuples(_INTS, _INTS), max_size=2),
    st.builds(ScoringWeights, *[st.one_of(st.integers(0, 5), st.integers(0, 2**40))] * 3),
)
def test_device_score_equals_go_float32_step_by_step(
    device: DeviceUsage, requests: list[tuple[int, int]], weights: ScoringWeights
) -> None:
    wanted = {f"r{i}": req(1, mem, cores=c) for i, (mem, c) in enumerate(requests)}
    assert struct.pack("<d", device_score(device, wanted, weights)) == struct.pack(
        "<d", _go_device_score(device, wanted, weights)
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(_DEVICES, max_size=4))
def test_node_score_equals_go_float32_step_by_step(devices: list[DeviceUsage]) -> None:
    assert struct.pack("<d", node_score(devices)) == struct.pack("<d", _go_node_score(devices))
