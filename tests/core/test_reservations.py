"""A scheduled pod's annotations -> the capacity it holds (reference §9.2, §9.3)."""

from __future__ import annotations

from typing import Any

import pytest
from core_builders import VENDORS, ctr, pod

from app.core.codec import CodecError
from app.core.model import ContainerDevice, DeviceUse
from app.core.reservations import (
    holds_devices,
    init_containers_done,
    quota_used,
    reservation_from_pod,
    usage_by_node,
)

WORKED = "GPU-B,NVIDIA,3000,30:;;GPU-B,NVIDIA,16384,0:GPU-A,NVIDIA,16384,0:;"
MEM, CORES = "nvidia.com/gpumem", "nvidia.com/gpucores"


def scheduled(
    allocated: str | None,
    *,
    node: str = "gpu-node-1",
    init: int = 0,
    apps: int = 3,
    status: dict[str, Any] | None = None,
    scheduler: str | None = None,
    uid: str = "uid-1",
    namespace: str = "default",
) -> dict[str, Any]:
    annotations = {"hami.io/vgpu-node": node} if node else {}
    if allocated is not None:
        annotations["hami.io/vgpu-devices-allocated"] = allocated
    the_pod = pod(
        *[ctr(f"c{i}") for i in range(apps)],
        init=[ctr(f"i{i}") for i in range(init)],
        annotations=annotations,
        uid=uid,
        namespace=namespace,
    )
    if status is not None:
        the_pod["status"] = status
    if scheduler is not None:
        the_pod["spec"]["schedulerName"] = scheduler
    return the_pod


def test_worked_example_reservation() -> None:
    reservation = reservation_from_pod(scheduled(WORKED), VENDORS)
    assert reservation is not None
    assert (reservation.uid, reservation.namespace, reservation.name, reservation.node) == (
        "uid-1",
        "default",
        "p",
        "gpu-node-1",
    )
    assert reservation.devices == {
        "NVIDIA": (
            (
                ContainerDevice("GPU-A", "NVIDIA", 16384, 0, slots=1),
                ContainerDevice("GPU-B", "NVIDIA", 19384, 30, slots=2),
            ),
        )
    }
    assert reservation.uses == {"GPU-A": DeviceUse(1, 16384, 0), "GPU-B": DeviceUse(2, 19384, 30)}
    assert reservation.quota_use == {MEM: 35768, CORES: 30}
    assert not reservation.init_released


def _terminated(code: int) -> dict[str, Any]:
    return {"state": {"terminated": {"exitCode": code}}}


INIT_ALLOC = "GPU-A,NVIDIA,20000,100:;GPU-A,NVIDIA,5000,10:;GPU-A,NVIDIA,6000,20:;"


@pytest.mark.parametrize(
    ("status", "released", "use"),
    [
        (None, False, DeviceUse(2, 20000, 100)),
        ({"initContainerStatuses": []}, False, DeviceUse(2, 20000, 100)),
        ({"initContainerStatuses": [_terminated(0)]}, True, DeviceUse(2, 11000, 30)),
        ({"initContainerStatuses": [_terminated(1)]}, False, DeviceUse(2, 20000, 100)),
        ({"initContainerStatuses": [{"state": {"running": {}}}]}, False, DeviceUse(2, 20000, 100)),
        (
            {"initContainerStatuses": [_terminated(0), {"state": {"waiting": {}}}]},
            False,
            DeviceUse(2, 20000, 100),
        ),
        ({"initContainerStatuses": "junk"}, False, DeviceUse(2, 20000, 100)),
    ],
    ids=[
        "no-status",
        "empty-status-list",
        "all-done-shrinks",
        "failed-init",
        "running-init",
        "one-still-waiting",
        "junk-status",
    ],
)
def test_init_shrink(status: dict[str, Any] | None, released: bool, use: DeviceUse) -> None:
    reservation = reservation_from_pod(scheduled(INIT_ALLOC, init=1, apps=2, status=status), VENDORS)
    assert reservation is not None
    assert reservation.init_released is released
    assert reservation.uses == {"GPU-A": use}


def test_init_shrink_can_drop_a_device() -> None:
    done = {"initContainerStatuses": [_terminated(0)]}
    the_pod = scheduled("GPU-A,NVIDIA,1,1:;GPU-B,NVIDIA,2,2:;", init=1, apps=1, status=done)
    reservation = reservation_from_pod(the_pod, VENDORS)
    assert reservation is not None
    assert reservation.uses == {"GPU-B": DeviceUse(1, 2, 2)}


def test_pod_without_init_containers_never_counts_as_released() -> None:
    done = {"initContainerStatuses": [_terminated(0)]}
    reservation = reservation_from_pod(scheduled(WORKED, status=done), VENDORS)
    assert reservation is not None and not reservation.init_released


@pytest.mark.parametrize(
    "the_pod",
    [
        scheduled(WORKED, node=""),
        scheduled(None),
        scheduled(""),
        scheduled(WORKED, status={"phase": "Succeeded"}),
        scheduled(WORKED, status={"phase": "Failed"}),
    ],
    ids=["not-scheduled-by-us", "no-allocation", "empty-allocation", "succeeded", "failed"],
)
def test_pods_holding_nothing(the_pod: dict[str, Any]) -> None:
    assert reservation_from_pod(the_pod, VENDORS) is None


@pytest.mark.parametrize(
    ("phase", "holds"),
    [
        ("Pending", True),
        ("Running", True),
        ("Unknown", True),
        ("", True),
        ("Succeeded", False),
        ("Failed", False),
    ],
    ids=["pending", "running", "unknown", "no-phase", "succeeded", "failed"],
)
def test_holds_devices(phase: str, holds: bool) -> None:
    assert holds_devices(scheduled(WORKED, status={"phase": phase})) is holds


def test_terminating_pods_keep_their_usage() -> None:
    the_pod = scheduled(WORKED, status={"phase": "Running"})
    the_pod["metadata"]["deletionTimestamp"] = "2026-08-01T06:00:00Z"
    assert reservation_from_pod(the_pod, VENDORS) is not None


@pytest.mark.parametrize(
    ("scheduler", "counted", "holds"),
    [
        ("hami-scheduler", {"hami-scheduler"}, True),
        ("other", {"hami-scheduler"}, False),
        (None, {"hami-scheduler"}, False),
        ("hami-scheduler", {"hami-scheduler-py", "hami-scheduler"}, True),
        ("hami-scheduler", {"hami-scheduler-py"}, False),
        ("default-scheduler", {"hami-scheduler-py", "hami-scheduler"}, False),
        ("other", None, True),
    ],
    ids=["ours", "foreign", "no-name", "adopted", "not-adopted", "default-never", "unfiltered"],
)
def test_scheduler_name_filter(scheduler: str | None, counted: set[str] | None, holds: bool) -> None:
    names = frozenset(counted) if counted is not None else None
    assert (reservation_from_pod(scheduled(WORKED, scheduler=scheduler), VENDORS, names) is not None) is holds


@pytest.mark.parametrize(
    "allocated", ["GPU-A,NVIDIA,1:;", "GPU-A,NVIDIA,x,1:;"], ids=["missing-field", "bad-number"]
)
def test_corrupt_allocation_raises(allocated: str) -> None:
    with pytest.raises(CodecError):
        reservation_from_pod(scheduled(allocated), VENDORS)


def test_init_containers_done() -> None:
    assert init_containers_done({"status": {"initContainerStatuses": [_terminated(0), _terminated(0)]}})
    assert not init_containers_done({"status": {"initContainerStatuses": [_terminated(0), _terminated(2)]}})
    assert not init_containers_done({"status": {"initContainerStatuses": [None]}})
    assert not init_containers_done({"status": None})
    assert not init_containers_done({})


def test_usage_by_node_and_quota_used() -> None:
    a = reservation_from_pod(scheduled(WORKED, uid="a"), VENDORS)
    b = reservation_from_pod(scheduled("GPU-A,NVIDIA,100,5:;", uid="b", apps=1, namespace="team"), VENDORS)
    c = reservation_from_pod(scheduled("GPU-Z,NVIDIA,1,1:;", uid="c", apps=1, node="other"), VENDORS)
    assert a is not None and b is not None and c is not None
    assert usage_by_node([a, b, c]) == {
        "gpu-node-1": {"GPU-A": DeviceUse(2, 16484, 5), "GPU-B": DeviceUse(2, 19384, 30)},
        "other": {"GPU-Z": DeviceUse(1, 1, 1)},
    }
    assert quota_used([a, b, c]) == {"default": {MEM: 35769, CORES: 31}, "team": {MEM: 100, CORES: 5}}


# HAMi's padding quirk (§12 #1): fewer groups than containers, so indexes do not name containers


@pytest.mark.parametrize(
    ("allocated", "init", "apps", "done", "use"),
    [
        pytest.param("GPU-A,NVIDIA,16000,50:;", 1, 2, True, DeviceUse(1, 16000, 50), id="istio-init-done"),
        pytest.param(
            "GPU-A,NVIDIA,16000,50:;", 1, 2, False, DeviceUse(1, 16000, 50), id="istio-init-running"
        ),
        pytest.param(
            "GPU-A,NVIDIA,1000,10:;GPU-A,NVIDIA,2000,20:;",
            1,
            2,
            True,
            DeviceUse(2, 3000, 30),
            id="summed-never-shrunk",
        ),
        pytest.param(";GPU-A,NVIDIA,16000,50:;;", 1, 2, True, DeviceUse(1, 16000, 50), id="aligned-ours"),
        pytest.param("GPU-A,NVIDIA,16000,50:;;;", 1, 2, True, None, id="aligned-init-only-released"),
    ],
)
def test_allocations_with_fewer_groups_than_containers_count_every_group(
    allocated: str, init: int, apps: int, done: bool, use: DeviceUse | None
) -> None:
    status = {"initContainerStatuses": [_terminated(0)]} if done else None
    reservation = reservation_from_pod(scheduled(allocated, init=init, apps=apps, status=status), VENDORS)
    assert reservation is not None
    assert reservation.uses.get("GPU-A") == use
