"""The NVIDIA batch classification agrees with `fit` device by device (app/devices/nvidia/batch.py).

For one device, `fit` either chooses it or counts it under exactly one reason, the first check it fails;
the batch classification must name the same check (0 when the device would be chosen) and the same memory
request, for every kind of device, request, selection annotation and GPU policy. The MIG placement check
(13) is the one exception: the batch passes a `mig`-mode device that passes checks 1-12.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from core_strategies import GPU_POLICIES, TYPES
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core import reasons
from app.core.model import PERCENT_UNSET, DeviceInfo, DeviceRequest, DeviceUse, NodeDevices
from app.core.usage import working_devices
from app.core.vendor import FitContext
from app.devices.batch import BatchFit, DeviceColumns
from app.devices.nvidia import Nvidia, batch, fit, keys

NVIDIA = Nvidia()


def columns_of(node: NodeDevices, use: dict[str, DeviceUse]) -> DeviceColumns:
    """One row: the node's devices, as the fast path's table lays them out."""
    rows = working_devices(node, use)
    types = sorted({d.type for d in rows})
    modes = sorted({d.mode for d in rows})

    def ints(values: list[int]) -> Any:
        return np.array([values], np.int64)

    return DeviceColumns(
        present=np.ones((1, len(rows)), bool),
        health=np.array([[d.health for d in rows]], bool),
        cordoned=np.array([[d.id in node.cordoned for d in rows]], bool),
        type_code=ints([types.index(d.type) for d in rows]),
        mode_code=ints([modes.index(d.mode) for d in rows]),
        count=ints([d.count for d in rows]),
        totalmem=ints([d.totalmem for d in rows]),
        totalcore=ints([d.totalcore for d in rows]),
        used=ints([d.used for d in rows]),
        usedmem=ints([d.usedmem for d in rows]),
        usedcores=ints([d.usedcores for d in rows]),
        mig=np.array([[d.mode == keys.MIG_MODE or bool(d.mig_in_use) for d in rows]], bool),
        types=types,
        modes=modes,
        ids=np.array([[d.id for d in rows]], object),
    )


devices = st.builds(
    DeviceInfo,
    id=st.sampled_from(["GPU-a", "GPU-b"]),
    index=st.just(0),
    count=st.sampled_from([0, 1, 4, 10]),
    devmem=st.sampled_from([0, 1000, 16384, 81920, 2**31 - 1]),
    devcore=st.sampled_from([0, 50, 100, 200]),
    type=st.sampled_from(TYPES),  # model strings: all contain NVIDIA but "Tesla T4"
    numa=st.integers(-1, 1),
    mode=st.sampled_from(["hami-core", "hami-core", "mig", ""]),
    health=st.sampled_from([True, True, True, False]),
)
requests = st.builds(
    DeviceRequest,
    nums=st.integers(1, 3),
    type=st.sampled_from([keys.VENDOR] * 4 + ["OTHER"]),
    memreq=st.sampled_from([0, 0, 500, 16384, 100_000]),
    mem_percentage=st.sampled_from([PERCENT_UNSET, PERCENT_UNSET, 0, 25, 50, 100]),
    coresreq=st.sampled_from([0, 0, 30, 100, 150]),
)
annotations = st.dictionaries(
    st.sampled_from([keys.USE_TYPE, keys.NOUSE_TYPE, keys.USE_UUID, keys.NOUSE_UUID, keys.VGPU_MODE]),
    st.sampled_from(["V100", "A100,T4", "GPU-a", "GPU-b, GPU-c", "hami-core", "mig", "", " , "]),
    max_size=2,
)


def check(
    device: DeviceInfo,
    cordoned: bool,
    use: DeviceUse,
    request: DeviceRequest,
    notes: dict[str, str],
    policy: str,
) -> None:
    node = NodeDevices("n", (device,), frozenset({device.id}) if cordoned else frozenset())
    outcome = fit.fit(
        working_devices(node, {device.id: use}), request, FitContext(notes, "default", policy, node)
    )
    chosen = outcome.ok or outcome.reason == f"1/1 {reasons.ALLOCATED_CARDS_INSUFFICIENT_REQUEST}"
    classified = NVIDIA.classify(columns_of(node, {device.id: use}), request, notes, policy)
    code = int(classified.codes[0, 0])
    if outcome.reason == f"1/1 {reasons.CARD_MIG_TOPOLOGY_INFEASIBLE}":
        # check 13 needs the slices in use: not an array check, such nodes are evaluated fully
        assert device.mode == keys.MIG_MODE and code == 0
        return
    if chosen:
        assert code == 0
        assert int(classified.memreq[0, 0]) == outcome.devices[0].usedmem
    else:
        assert outcome.reason == f"1/1 {batch.REASONS[code]}"


@settings(max_examples=1000, deadline=None)
@given(
    devices,
    st.sampled_from([False, False, False, True]),
    requests,
    annotations,
    st.sampled_from(GPU_POLICIES),
    st.data(),
)
def test_batch_classification_names_fits_first_failing_check(
    device: DeviceInfo,
    cordoned: bool,
    request: DeviceRequest,
    notes: dict[str, str],
    policy: str,
    data: st.DataObject,
) -> None:
    # usage around the boundaries each check compares against
    slots = data.draw(st.sampled_from([0, 1, device.count - 1, device.count, device.count + 1]))
    mem = data.draw(st.sampled_from([0, 1, 500, 16384, 100_000]) | st.integers(0, device.devmem + 10))
    cores = data.draw(st.sampled_from([0, 30, 70, 100, 150]) | st.integers(0, device.devcore + 10))
    use = DeviceUse(max(slots, 0), max(device.devmem - mem, 0), max(device.devcore - cores, 0))
    check(device, cordoned, use, request, notes, policy)


def _card(count: int = 10, mem: int = 16384, core: int = 100, mode: str = "hami-core") -> DeviceInfo:
    return DeviceInfo("GPU-a", 0, count, mem, core, "NVIDIA A100", 0, mode, True)


@pytest.mark.parametrize(
    ("device", "use", "request_"),
    [
        # a whole-card request on a card someone uses: ExclusiveDeviceAllocateConflict, used == 1 suffices
        (_card(), DeviceUse(1, 0, 0), DeviceRequest(1, keys.VENDOR, 100, coresreq=100)),
        (_card(), DeviceUse(0, 0, 0), DeviceRequest(1, keys.VENDOR, 100, coresreq=100)),
        # more than 100 cores is clamped to 100 first: 100 free cores on a 200-core card suffice
        (_card(core=200), DeviceUse(1, 0, 100), DeviceRequest(1, keys.VENDOR, 100, coresreq=150)),
        (_card(core=200), DeviceUse(1, 0, 101), DeviceRequest(1, keys.VENDOR, 100, coresreq=150)),
        # no cores requested on a card whose cores are all taken: CardComputeUnitsExhausted
        (_card(), DeviceUse(1, 0, 100), DeviceRequest(1, keys.VENDOR, 100, coresreq=0)),
        (_card(), DeviceUse(1, 0, 99), DeviceRequest(1, keys.VENDOR, 100, coresreq=0)),
        # exact memory and slot boundaries
        (_card(), DeviceUse(1, 16384 - 100, 0), DeviceRequest(1, keys.VENDOR, 100)),
        (_card(), DeviceUse(1, 16384 - 99, 0), DeviceRequest(1, keys.VENDOR, 100)),
        (_card(count=2), DeviceUse(2, 0, 0), DeviceRequest(1, keys.VENDOR, 100)),
        (_card(count=2), DeviceUse(1, 0, 0), DeviceRequest(1, keys.VENDOR, 100)),
        # a percentage of a huge card wraps around int32 and Go's division truncates toward zero
        (_card(mem=2**31 - 1), DeviceUse(0, 0, 0), DeviceRequest(1, keys.VENDOR, 0, mem_percentage=33)),
        (_card(mem=2**31 - 1), DeviceUse(0, 0, 0), DeviceRequest(1, keys.VENDOR, 0, mem_percentage=50)),
        (_card(mem=1001), DeviceUse(0, 0, 0), DeviceRequest(1, keys.VENDOR, 0, mem_percentage=33)),
        (_card(mode="mig"), DeviceUse(0, 0, 0), DeviceRequest(1, keys.VENDOR, 100)),
    ],
)
@pytest.mark.parametrize("policy", ["spread", "mutex"])
def test_batch_classification_at_the_boundaries(
    device: DeviceInfo, use: DeviceUse, request_: DeviceRequest, policy: str
) -> None:
    check(device, False, use, request_, {}, policy)


def test_nvidia_is_a_batch_vendor() -> None:
    assert isinstance(NVIDIA, BatchFit)
    assert NVIDIA.reasons[0] == ""
    assert len(set(NVIDIA.reasons)) == len(NVIDIA.reasons)
