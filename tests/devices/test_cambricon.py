"""Cambricon MLU, byte-compatible with HAMi's `CambriconDevices` (reference vendors §2.3, quirks §3.3)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from vendor_builders import dev, fit_ctx, res, view

from app.core.codec import CodecError
from app.core.health import Reported
from app.core.model import ContainerDevice, DeviceInfo, DeviceRequest, PodRequests
from app.core.quota import admission_excess, build_view, fits
from app.core.vendor import AnnotationContext, InvalidRequest, LockSpec
from app.devices.cambricon import Cambricon, CambriconConfig, parse_cambricon_config

MLU = Cambricon()
VCORE, VMEM, VMLU = "cambricon.com/mlu.smlu.vcore", "cambricon.com/mlu.smlu.vmemory", "cambricon.com/vmlu"


def mlu(index: int = 0, **kw: Any) -> Any:
    return dev(f"n1-cambricon-mlu-{index}", index, type="MLU", vendor="MLU", count=100, totalmem=23808, **kw)


def test_keys_and_lock() -> None:
    assert MLU.key == "MLU"
    assert MLU.to_allocate_annotation == "hami.io/cambricon-mlu-devices-to-allocate"
    assert MLU.allocated_annotation == "hami.io/cambricon-mlu-devices-allocated"
    assert MLU.handshake_annotation == ""  # §2.3: no handshake
    assert MLU.memory_factor == 256
    assert MLU.lock == LockSpec("cambricon.com/dsmlu.lock", owned=False, expire=timedelta(minutes=2))
    assert parse_cambricon_config({"resourceCountName": "x/mlu"}) == CambriconConfig(
        resource_count_name="x/mlu"
    )


# --- discovery from capacity (§2.3) -----------------------------------------------------------------------


def test_discovery_from_capacity() -> None:
    """§2.3 example: vcore 200, vmemory 186 -> 2 cards of 186 x 256 x 100 / 200 = 23808 MiB."""
    node = view("n1", capacity={VCORE: "200", VMEM: "186"})
    assert MLU.registered(node)
    assert MLU.discover(node).devices == tuple(
        DeviceInfo(f"n1-cambricon-mlu-{i}", i, 100, 23808, 100, "MLU", 0, "", True, "MLU") for i in range(2)
    )


@pytest.mark.parametrize(
    ("capacity", "cards"),
    [({VCORE: "150"}, 2), ({VCORE: 100}, 1), ({VCORE: "1"}, 1)],
    ids=["i*100 < 150 for i=0,1", "one card", "a partial card counts"],
)
def test_cards_are_vcore_over_100_rounded_up(capacity: dict[str, Any], cards: int) -> None:
    devices = MLU.discover(view("n1", capacity=capacity)).devices
    assert len(devices) == cards and all(d.devmem == 0 for d in devices)  # no vmemory: 0 MiB


def test_discovery_errors_and_absence() -> None:
    assert not MLU.registered(view("n1", capacity={VCORE: "0"}))  # no cards: no MLU (HAMi: an error)
    assert not MLU.registered(view("n1", capacity={"cpu": "8"}))
    with pytest.raises(CodecError, match="not an integer"):
        MLU.discover(view("n1", capacity={VCORE: "1.5"}))
    with pytest.raises(CodecError, match=r"device not found cambricon\.com/mlu\.smlu\.vcore"):
        MLU.discover(view("n1", capacity={VCORE: "-100"}))


def test_health_is_always_good() -> None:
    verdict = MLU.health(view("n1", capacity={VCORE: "100"}), Reported(), datetime(2026, 1, 1, tzinfo=UTC))
    assert verdict.healthy and verdict.stamp is None


# --- requests (§2.3) --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({VMLU: 1, VMEM: 1000, VCORE: 1}, DeviceRequest(1, "MLU", 256000, 0, 1)),  # §2.3 example
        ({VMLU: 1}, DeviceRequest(1, "MLU", 0, 100, 100)),  # exclusive default
        ({VMLU: 2, VCORE: 150}, DeviceRequest(2, "MLU", 0, 100, 150)),  # clamped in Fit
        ({VMLU: 0}, None),
    ],
    ids=["§2.3 example", "whole card", "cores above 100", "zero"],
)
def test_container_request(limits: dict[str, Any], expected: DeviceRequest | None) -> None:
    assert MLU.container_request(res(limits=limits)) == expected


@pytest.mark.parametrize(
    "limits",
    [{VMLU: 1, VMEM: 2**31 // 256 + 1}, {VMLU: 1, VMEM: "1.5"}, {VMLU: 1, VCORE: -1}],
    ids=["memory over MaxInt32/256", "non-integer memory", "§3.3#4 negative cores"],
)
def test_refused_requests(limits: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest):
        MLU.container_request(res(limits=limits))


# --- Fit (§2.3 = template + quota) ------------------------------------------------------------------------


def test_fit_whole_card_and_shares() -> None:
    whole = MLU.fit([mlu(0), mlu(1)], DeviceRequest(1, "MLU", 0, 100, 100), fit_ctx())
    assert whole.devices == (ContainerDevice("n1-cambricon-mlu-1", "MLU", 23808, 100, idx=1),)
    busy = MLU.fit([mlu(0, used=1, usedcores=10)], DeviceRequest(1, "MLU", 0, 100, 100), fit_ctx())
    assert busy.reason == "1/1 CardInsufficientCore"


@pytest.mark.parametrize(
    ("device", "request_", "annotations", "reason"),
    [
        (mlu(health=False), DeviceRequest(1, "MLU", 256, 0, 1), {}, "1/1 CardNotHealth"),
        (
            mlu(),
            DeviceRequest(1, "MLU", 256, 0, 1),
            {"cambricon.com/use-gpuuuid": "x"},
            "1/1 CardUuidMismatch",
        ),
        (
            mlu(),
            DeviceRequest(1, "MLU", 256, 0, 1),
            {"cambricon.com/nouse-gpuuuid": "n1-cambricon-mlu-0"},
            "1/1 CardUuidMismatch",
        ),
        (mlu(used=100), DeviceRequest(1, "MLU", 256, 0, 1), {}, "1/1 CardTimeSlicingExhausted"),
        (mlu(usedmem=23808), DeviceRequest(1, "MLU", 256, 0, 1), {}, "1/1 CardInsufficientMemory"),
        (mlu(used=1), DeviceRequest(1, "MLU", 256, 0, 100), {}, "1/1 ExclusiveDeviceAllocateConflict"),
        (mlu(used=3, usedcores=100), DeviceRequest(1, "MLU", 256, 0, 0), {}, "1/1 CardComputeUnitsExhausted"),
    ],
    ids=["health", "use-gpuuuid", "nouse-gpuuuid", "slots", "memory", "exclusive", "compute exhausted"],
)
def test_fit_reasons(device: Any, request_: DeviceRequest, annotations: dict[str, str], reason: str) -> None:
    outcome = MLU.fit([device], request_, fit_ctx(annotations))
    assert not outcome.ok and outcome.reason == reason


def test_fit_checks_the_quota_per_candidate_before_memory() -> None:
    """§2.3 step 9: ResourceQuotaNotFit comes before the memory check, per candidate."""
    seen: list[int] = []

    def quota(devices: Any) -> bool:
        seen.append(len(devices))
        return False

    outcome = MLU.fit(
        [mlu(0, usedmem=23808), mlu(1)], DeviceRequest(1, "MLU", 256, 0, 1), fit_ctx(quota=quota)
    )
    assert outcome.reason == "2/2 ResourceQuotaNotFit" and seen == [1, 1]


def test_quota_scales_the_memory_limit_by_256() -> None:
    """§1.6: limits.cambricon.com/mlu.smlu.vmemory is in 256 MiB units."""
    view_ = build_view({"ns": {VMEM: 10, VCORE: 50}}, {})
    assert fits(view_, "ns", MLU, 2560, 50) and not fits(view_, "ns", MLU, 2561, 0)
    requests = PodRequests(({"MLU": DeviceRequest(1, "MLU", 256 * 11, 0, 1)},), 0)
    assert admission_excess(requests, (MLU,), view_, "ns") is not None


# --- annotations and webhook (§2.3) -----------------------------------------------------------------------


def test_annotations() -> None:
    """§2.3 example (device_test.go:343-368)."""
    groups = ((ContainerDevice("device-0", "MLU", 256000, 1),),)
    assert MLU.pod_annotations(groups, AnnotationContext("n1")) == {
        "CAMBRICON_DSMLU_ASSIGNED": "false",
        "CAMBRICON_DSMLU_PROFILE": "0_1_1000",
        "hami.io/cambricon-mlu-devices-to-allocate": "device-0,MLU,256000,1:;",
        "hami.io/cambricon-mlu-devices-allocated": "device-0,MLU,256000,1:;",
    }


def test_profile_is_the_first_device_of_the_first_non_empty_container() -> None:
    """§3.3 #3 (kept): the dsmlu plugin reads one device."""
    groups = ((), (ContainerDevice("b", "MLU", 512, 20, idx=3), ContainerDevice("c", "MLU", 256, 10, idx=1)))
    assert MLU.pod_annotations(groups, AnnotationContext("n1"))["CAMBRICON_DSMLU_PROFILE"] == "3_20_2"


def test_webhook_does_not_mutate() -> None:
    container = res(limits={VMLU: 1})
    assert MLU.mutate_container(container, {}) and container == res(limits={VMLU: 1})
    assert not MLU.mutate_container(res(requests={VMLU: 1}), {})
