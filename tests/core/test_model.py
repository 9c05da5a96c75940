"""The plain data types of the core (reference §0)."""

from __future__ import annotations

import dataclasses

import pytest

from app.core.model import (
    PERCENT_UNSET,
    ContainerRequests,
    DeviceRequest,
    DeviceUsage,
    DeviceUse,
    MigPlacement,
    PodRequests,
)


def test_percent_sentinel_and_request_defaults() -> None:
    assert PERCENT_UNSET == 101
    assert DeviceRequest(1, "NVIDIA") == DeviceRequest(1, "NVIDIA", 0, 101, 0)


def test_device_use_plus() -> None:
    assert DeviceUse(1, 2, 3).plus(DeviceUse(10, 20, 30)) == DeviceUse(11, 22, 33)
    assert DeviceUse() == DeviceUse(0, 0, 0)


MASKED = [
    # AWS Neuron core bitmasks (`DeviceUse.masks`): ORed, never added (issue 19 finding 2)
    (
        "disjoint",
        DeviceUse(1, 0, 1, masks=(1,)),
        DeviceUse(1, 0, 2, masks=(2,)),
        DeviceUse(2, 0, 3, masks=(1, 2)),
    ),
    (
        "same-core-twice",
        DeviceUse(1, 0, 1, masks=(1,)),
        DeviceUse(1, 0, 1, masks=(1,)),
        DeviceUse(2, 0, 1, masks=(1, 1)),
    ),
    (
        "row-without-masks",
        DeviceUse(1, 0, 2),
        DeviceUse(1, 0, 1, masks=(1,)),
        DeviceUse(2, 0, 3, masks=(1, 2)),
    ),
    ("nothing", DeviceUse(), DeviceUse(1, 0, 1, masks=(1,)), DeviceUse(1, 0, 1, masks=(1,))),
]


@pytest.mark.parametrize(("a", "b", "total"), [c[1:] for c in MASKED], ids=[c[0] for c in MASKED])
def test_core_masks_are_ored_and_taken_back(a: DeviceUse, b: DeviceUse, total: DeviceUse) -> None:
    assert a.plus(b) == b.plus(a) == total
    assert total.minus(b).cores == a.cores and total.minus(b).slots == a.slots
    assert total.minus(a).minus(b) == DeviceUse()


def test_device_usage_copy_is_independent() -> None:
    original = DeviceUsage(
        "g", 0, 1, 10, 2, 100, 100, 3, "mig", 0, "T", True, mig_in_use=[MigPlacement(0, 1)]
    )
    clone = original.copy()
    assert clone == original
    clone.used += 1
    clone.mig_in_use.append(MigPlacement(1, 1))
    assert original.used == 1 and original.mig_in_use == [MigPlacement(0, 1)]


@pytest.mark.parametrize(
    ("containers", "expected"),
    [((), False), (({}, {}), False), (({}, {"NVIDIA": DeviceRequest(1, "NVIDIA")}), True)],
    ids=["no-containers", "nothing-requested", "one-request"],
)
def test_pod_requests_any(containers: tuple[ContainerRequests, ...], expected: bool) -> None:
    assert PodRequests(containers, 0).any is expected


def test_frozen_types_cannot_change() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        DeviceUse().slots = 1  # type: ignore[misc]
