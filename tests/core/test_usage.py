"""Init-container accounting and node usage (reference §4.2, §9.3)."""

from __future__ import annotations

import pytest
from core_builders import gpu, node

from app.core.model import ContainerDevice, ContainerDevices, DeviceUsage, DeviceUse, PodSingleDevice
from app.core.usage import collapse, collapse_pod, device_uses, sum_uses, working_devices


def d(uuid: str, mem: int, cores: int, slots: int = 0, type: str = "NVIDIA") -> ContainerDevice:
    return ContainerDevice(uuid, type, mem, cores, slots=slots)


def c(uuid: str, mem: int, cores: int, slots: int) -> ContainerDevice:
    """A collapsed entry."""
    return ContainerDevice(uuid, "NVIDIA", mem, cores, slots=slots)


@pytest.mark.parametrize(
    ("containers", "init_count", "expected"),
    [
        ((), 0, ()),
        (((), ()), 0, ()),
        (((d("A", 100, 10),), (d("A", 50, 5),)), 0, (c("A", 150, 15, 2),)),
        (((d("A", 100, 10),), (d("A", 200, 5),)), 2, (c("A", 200, 10, 1),)),
        (((d("A", 300, 0),), (d("A", 100, 20),), (d("A", 100, 20),)), 1, (c("A", 300, 40, 2),)),
        (((d("A", 300, 50),), (d("A", 100, 20),)), 1, (c("A", 300, 50, 1),)),
        (((d("B", 1, 1),), (d("A", 2, 2),), ()), 0, (c("A", 2, 2, 1), c("B", 1, 1, 1))),
        (((d("A", 1, 1),), (d("B", 2, 2),)), 1, (c("A", 1, 1, 1), c("B", 2, 2, 1))),
        (((d("A", 10, 1), d("B", 10, 1)), (d("A", 5, 0),)), 0, (c("A", 15, 1, 2), c("B", 10, 1, 1))),
        (((d("A", 10, 1, slots=3),), (d("A", 5, 0),)), 0, (c("A", 15, 1, 4),)),
        (((d("A", 10, 1),), (d("A", 10, 1),), (d("A", 7, 7),), ()), 2, (c("A", 10, 7, 1),)),
        (((), (d("A", 1, 1),)), 5, (c("A", 1, 1, 1),)),
    ],
    ids=[
        "nothing",
        "empty-groups",
        "app-sum-and-slot-per-occurrence",
        "init-peak-one-slot",
        "app-sum-beats-init-peak-per-dimension",
        "init-peak-beats-app-sum",
        "sorted-by-uuid",
        "init-and-app-on-different-devices",
        "several-devices-in-one-container",
        "collapsed-slots-are-kept",
        "trailing-empty-group-is-app",
        "all-init",
    ],
)
def test_collapse(containers: PodSingleDevice, init_count: int, expected: ContainerDevices) -> None:
    assert collapse(containers, init_count) == expected


def test_collapse_keeps_the_first_type() -> None:
    result = collapse(((d("A", 1, 1, type="X"),), (d("A", 1, 1, type="Y"),)), 0)
    assert result == (ContainerDevice("A", "X", 2, 2, slots=2),)


@pytest.mark.parametrize(
    ("containers", "init_count", "expected"),
    [
        (((d("A", 300, 50),), (d("A", 100, 20),)), 1, (c("A", 100, 20, 1),)),
        (((d("A", 300, 50),), (d("B", 100, 20),), (d("B", 1, 1),)), 1, (c("B", 101, 21, 2),)),
        (((d("A", 300, 50),), ()), 1, ()),
    ],
    ids=["init-dropped", "app-sum-kept", "only-init-usage-disappears"],
)
def test_app_containers_only_usage(
    containers: PodSingleDevice, init_count: int, expected: ContainerDevices
) -> None:
    assert collapse(containers, init_count, include_init=False) == expected


def test_collapse_pod_gives_one_group_per_vendor() -> None:
    raw = {"NVIDIA": ((d("A", 1, 1),), (), (d("A", 2, 2),)), "OTHER": ((), ())}
    assert collapse_pod(raw, 1) == {"NVIDIA": ((c("A", 2, 2, 1),),), "OTHER": ((),)}


def test_device_uses_and_sum_uses() -> None:
    collapsed = {"NVIDIA": ((c("A", 100, 10, 2), d("B", 5, 0)),), "OTHER": ((c("A", 1, 1, 1),),)}
    uses = device_uses(collapsed)
    assert uses == {"A": DeviceUse(3, 101, 11), "B": DeviceUse(1, 5, 0)}
    assert sum_uses([uses, {"B": DeviceUse(1, 1, 1), "C": DeviceUse(1, 2, 3)}]) == {
        "A": DeviceUse(3, 101, 11),
        "B": DeviceUse(2, 6, 1),
        "C": DeviceUse(1, 2, 3),
    }
    assert sum_uses([]) == {}


def test_working_devices_apply_usage_by_uuid_in_registration_order() -> None:
    the_node = node(
        "n1",
        gpu("GPU-B", 1, count=4, mem=1000, core=200, numa=1, mode="mps", type="T"),
        gpu("GPU-A", 0, health=False),
    )
    working = working_devices(the_node, {"GPU-B": DeviceUse(2, 300, 40), "GPU-unknown": DeviceUse(9, 9, 9)})
    assert working == [
        DeviceUsage("GPU-B", 1, 2, 4, 300, 1000, 200, 40, "mps", 1, "T", True),
        DeviceUsage(
            "GPU-A", 0, 0, 10, 0, 32768, 100, 0, "hami-core", 0, "NVIDIA-Tesla V100-PCIE-32GB", False
        ),
    ]
