"""NVIDIA `Fit`'s per-device checks over every device of the cluster at once (numpy).

`fit.fit` visits devices one by one and counts, for each, the first check it fails; a device that fails
none is chosen. Apart from the NUMA-binding runs and the namespace quota (both depend on the devices chosen
so far) and the MIG placement check 13 (it depends on the slices in use, which the columns do not hold, and
on the slices chosen so far), each check reads only the device and the request, so the first failing check
of every device can be computed with array operations in the same order: that is this module. A `mig`-mode
device that passes checks 1-12 is classified as passing; the fast path evaluates nodes with such devices
fully (`DeviceColumns.mig`). Keep it in step with `fit.py`:
the order of `checks` below is the order of the checks there, and
tests/devices/test_nvidia_batch.py compares both on random devices.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import numpy as np

from app.core import reasons as r
from app.core.model import PERCENT_UNSET, DeviceRequest
from app.core.policy import MUTEX, policy_contains
from app.devices.batch import Bools, Classified, Codes, DeviceColumns, Ints
from app.devices.nvidia import keys
from app.devices.nvidia.fit import mode_allowed, type_allowed, uuid_allowed

REASONS: tuple[str, ...] = (
    "",
    r.CARD_NOT_HEALTH,
    r.CARD_CORDONED,
    r.CARD_TYPE_MISMATCH,
    r.CARD_UUID_MISMATCH,
    r.CARD_TIME_SLICING_EXHAUSTED,
    r.EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT,
    r.CARD_INSUFFICIENT_MEMORY,
    r.CARD_INSUFFICIENT_CORE,
    r.CARD_COMPUTE_UNITS_EXHAUSTED,
)
_CODE = {key: code for code, key in enumerate(REASONS) if key}
# every annotation `classify` reads (through type_allowed, mode_allowed and uuid_allowed)
ANNOTATION_KEYS = (keys.USE_TYPE, keys.NOUSE_TYPE, keys.USE_UUID, keys.NOUSE_UUID, keys.VGPU_MODE)


def _first_failures(shape: tuple[int, ...], checks: list[tuple[Bools, str]]) -> Codes:
    """Per device, the code of the first of `checks` (failed mask, reason key; in `fit`'s order) that it
    fails, 0 when none: written from the last check to the first, so the earliest failure stays."""
    codes = np.zeros(shape, np.int8)
    for failed, key in reversed(checks):
        codes[failed] = _CODE[key]
    return codes


def memory_request(columns: DeviceColumns, request: DeviceRequest) -> Ints:
    """HAMi's `memreq` per device: the absolute request, else the percentage of the card (int32, Go `/`)."""
    if request.mem_percentage == PERCENT_UNSET or request.memreq != 0:
        return np.full(columns.totalmem.shape, max(request.memreq, 0), np.int64)
    product = columns.totalmem * request.mem_percentage
    wrapped = (product + 2**31) % 2**32 - 2**31  # i32(totalmem * pct)
    return np.where(wrapped >= 0, wrapped // 100, -(-wrapped // 100))  # Go division truncates toward 0


def _uuid_ok(columns: DeviceColumns, annotations: Mapping[str, str]) -> Bools:
    ids = columns.device_ids()
    flat = ids.reshape(-1).tolist()
    return np.fromiter((uuid_allowed(annotations, i) for i in flat), bool, len(flat)).reshape(ids.shape)


@lru_cache(maxsize=256)
def _selection(
    use: str | None, nouse: str | None, mode: str | None, types: tuple[str, ...], modes: tuple[str, ...]
) -> tuple[Bools, Bools]:
    """Which card types and modes the pod's selection annotations allow (per code; pods share them)."""
    annotations = {
        k: v
        for k, v in ((keys.USE_TYPE, use), (keys.NOUSE_TYPE, nouse), (keys.VGPU_MODE, mode))
        if v is not None
    }
    type_ok = np.array([type_allowed(annotations, t) for t in types], bool)
    mode_ok = np.array([mode_allowed(annotations, m) for m in modes], bool)
    type_ok.flags.writeable = mode_ok.flags.writeable = False  # shared by every caller
    return type_ok, mode_ok


def classify(
    columns: DeviceColumns, request: DeviceRequest, annotations: Mapping[str, str], policy: str
) -> Classified:
    checks = [(~columns.health, r.CARD_NOT_HEALTH), (columns.cordoned, r.CARD_CORDONED)]
    if request.type != keys.VENDOR:
        checks.append((columns.present, r.CARD_TYPE_MISMATCH))
    else:
        type_ok, mode_ok = _selection(
            annotations.get(keys.USE_TYPE),
            annotations.get(keys.NOUSE_TYPE),
            annotations.get(keys.VGPU_MODE),
            tuple(columns.types),
            tuple(columns.modes),
        )
        checks.append((~(type_ok[columns.type_code] & mode_ok[columns.mode_code]), r.CARD_TYPE_MISMATCH))
    if annotations.get(keys.USE_UUID) or annotations.get(keys.NOUSE_UUID):
        checks.append((~_uuid_ok(columns, annotations), r.CARD_UUID_MISMATCH))
    checks.append((columns.count <= columns.used, r.CARD_TIME_SLICING_EXHAUSTED))
    if policy_contains(policy, MUTEX):
        checks.append((columns.used > 0, r.EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT))
    cores = min(request.coresreq, 100)
    memreq = memory_request(columns, request)
    checks.append((columns.totalmem - columns.usedmem < memreq, r.CARD_INSUFFICIENT_MEMORY))
    checks.append((columns.totalcore - columns.usedcores < cores, r.CARD_INSUFFICIENT_CORE))
    if cores == 100:
        whole = (columns.totalcore == 100) & (columns.used > 0)
        checks.append((whole, r.EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT))
    if cores == 0:
        exhausted = (columns.totalcore != 0) & (columns.usedcores == columns.totalcore)
        checks.append((exhausted, r.CARD_COMPUTE_UNITS_EXHAUSTED))
    codes = _first_failures(columns.present.shape, checks)
    return Classified(codes, memreq)
