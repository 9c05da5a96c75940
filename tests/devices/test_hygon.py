"""Hygon DCU, byte-compatible with HAMi's `DCUDevices` (reference vendors §2.2, quirks §3.2)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from vendor_builders import dev, fit_ctx, res, view

from app.core.codec import CodecError
from app.core.health import Reported
from app.core.model import ContainerDevice, DeviceInfo, DeviceRequest, PodRequests
from app.core.quota import admission_excess, build_view, fits
from app.core.vendor import SHARED_LOCK, AnnotationContext, InvalidRequest
from app.devices.hygon import Hygon, HygonConfig
from app.devices.hygon.device import ALLOCATED, HANDSHAKE, REGISTER, TO_ALLOCATE

DCU = Hygon()
DCU_REPORTED = Reported()
NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def req(nums: int = 1, mem: int = 0, pct: int = 100, cores: int = 100) -> DeviceRequest:
    return DeviceRequest(nums, "DCU", mem, pct, cores)


# --- keys (V§2.2) ---------------------------------------------------------------------------------------


def test_keys_and_names() -> None:
    assert DCU.key == "DCU"
    assert (REGISTER, HANDSHAKE) == ("hami.io/node-dcu-register", "hami.io/node-handshake-dcu")
    assert DCU.to_allocate_annotation == "hami.io/dcu-devices-to-allocate"
    assert DCU.allocated_annotation == "hami.io/dcu-devices-allocated"
    assert DCU.resources.count == "hygon.com/dcunum"
    assert (DCU.resources.memory, DCU.resources.cores) == ("hygon.com/dcumem", "hygon.com/dcucores")
    assert DCU.memory_factor == 1
    assert DCU.lock == SHARED_LOCK  # V§1.5: the shared hami.io/mutex.lock
    assert not DCU.scores_nodes  # V§2.2: ScoreNode 0


# --- discovery (V§2.2) ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(
            "test-0,1,1024,100,DCU,0,true,0,test:",
            [DeviceInfo("test-0", 0, 1, 1024, 100, "DCU", 0, "test", True, "DCU")],
            id="V§2.2 device_test.go:265, nine fields",
        ),
        pytest.param(
            "d-1,4,2048,100,DCU,1,false:",
            [DeviceInfo("d-1", 0, 4, 2048, 100, "DCU", 1, "hami-core", False, "DCU")],
            id="V§2.2 seven fields: index 0, mode hami-core",
        ),
    ],
)
def test_discovery(value: str, expected: list[DeviceInfo]) -> None:
    node = view(annotations={REGISTER: value})
    assert DCU.registered(node)
    assert list(DCU.discover(node).devices) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param(":", "no gpu found on node", id="V§2.2 a value that decodes to nothing"),
        pytest.param("test-0,1,1024,100,DCU:", "unexpected field count 5", id="V§2.2 five fields"),
        pytest.param("test-0,1,1024,100,DCU,0,true", "missing device separator", id="S§2.2 no separator"),
    ],
)
def test_discovery_errors(value: str, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        DCU.discover(view(annotations={REGISTER: value}))


def test_a_node_without_the_register_annotation_is_not_a_dcu_node() -> None:
    assert not DCU.registered(view(annotations={"hami.io/node-nvidia-register": "[]"}))


# --- health (V§1.10 generic handshake) ------------------------------------------------------------------


def test_health_is_the_generic_handshake() -> None:
    fresh = DCU.health(view(annotations={REGISTER: ":"}), DCU_REPORTED, NOW)
    assert fresh.healthy and fresh.stamp == "Requesting_2026-03-01 12:00:00"
    expired = view(annotations={REGISTER: ":", HANDSHAKE: "Requesting_2026-03-01 11:58:00"})
    verdict = DCU.health(expired, DCU_REPORTED, NOW)
    assert not verdict.healthy and "allocatable hygon.com/dcunum is 0" in verdict.reason
    alive = view(
        annotations={REGISTER: ":", HANDSHAKE: "Requesting_2026-03-01 11:58:00"},
        allocatable={"hygon.com/dcunum": "4"},
    )
    assert DCU.health(alive, DCU_REPORTED, NOW).healthy


# --- requests (V§2.2 GenerateResourceRequests) ----------------------------------------------------------


@pytest.mark.parametrize(
    ("limits", "requests", "config", "expected"),
    [
        pytest.param(
            {"hygon.com/dcunum": 1}, None, HygonConfig(), req(1, 0, 100, 100), id="V§2.2 whole card"
        ),
        pytest.param(
            {"hygon.com/dcunum": 1, "hygon.com/dcumem": 2000, "hygon.com/dcucores": 60},
            None,
            HygonConfig(),
            req(1, 2000, 0, 60),
            id="V§2.2 memory and cores",
        ),
        pytest.param(
            {"hygon.com/dcunum": 1, "hygon.com/dcumem": 2000},
            None,
            HygonConfig(),
            req(1, 2000, 0, 100),
            id="V§3.2#3 cores default 100 with memory given (kept)",
        ),
        pytest.param(
            None,
            {"hygon.com/dcunum": "2", "hygon.com/dcucores": "150"},
            HygonConfig(),
            req(2, 0, 100, 150),
            id="V§2.2 requests only; cores above 100 clamped later in Fit",
        ),
        pytest.param(
            {"hygon.com/dcunum": 1, "hygon.com/dcumem": 1024},
            None,
            HygonConfig(memory_factor=4),
            req(1, 4096, 0, 100),
            id="V§2.2 memoryFactor multiplies",
        ),
        pytest.param({"hygon.com/dcunum": 0}, None, HygonConfig(), None, id="zero count: no request"),
        pytest.param({"hygon.com/dcunum": "1.5"}, None, HygonConfig(), None, id="non-integer count: none"),
        pytest.param({"nvidia.com/gpu": 1}, None, HygonConfig(), None, id="another vendor's resource"),
    ],
)
def test_container_request(
    limits: dict[str, Any] | None, requests: dict[str, Any] | None, config: HygonConfig, expected: Any
) -> None:
    assert Hygon(config).container_request(res(limits=limits, requests=requests)) == expected


@pytest.mark.parametrize(
    "limits",
    [
        pytest.param(
            {"hygon.com/dcunum": 1, "hygon.com/dcumem": "1.5"}, id="V§3.2#1 non-integer memory refused"
        ),
        pytest.param({"hygon.com/dcunum": 1, "hygon.com/dcumem": -1}, id="negative memory refused"),
        pytest.param({"hygon.com/dcunum": 1, "hygon.com/dcucores": -5}, id="negative cores refused"),
        pytest.param({"hygon.com/dcunum": -1}, id="negative count refused"),
    ],
)
def test_refused_requests(limits: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest):
        DCU.container_request(res(limits=limits))


# --- Fit (V§1.8 template, V§2.2) ------------------------------------------------------------------------


def test_fit_takes_devices_from_the_end() -> None:
    devices = [dev("D-0", 0), dev("D-1", 1), dev("D-2", 2)]
    outcome = DCU.fit(devices, req(2, 2000, 0, 60), fit_ctx())
    assert outcome.ok
    assert outcome.devices == (
        ContainerDevice("D-2", "DCU", 2000, 60, idx=2),
        ContainerDevice("D-1", "DCU", 2000, 60, idx=1),
    )


def test_fit_whole_card_takes_the_total_memory_and_clamps_cores() -> None:
    outcome = DCU.fit([dev(totalmem=8192)], req(1, 0, 100, 150), fit_ctx())
    assert outcome.devices == (ContainerDevice("D-0", "DCU", 8192, 100, idx=0),)


@pytest.mark.parametrize(
    ("device", "request_", "annotations", "policy", "reason"),
    [
        pytest.param(dev(health=False), req(), {}, "spread", "1/1 CardNotHealth", id="V§1.8 step 1"),
        pytest.param(
            dev(type="Z100"),
            req(),
            {"hygon.com/use-dcutype": "K100"},
            "spread",
            "1/1 CardTypeMismatch",
            id="V§2.2 use-dcutype",
        ),
        pytest.param(
            dev(type="K100-AI"),
            req(),
            {"hygon.com/nouse-dcutype": "k100"},
            "spread",
            "1/1 CardTypeMismatch",
            id="V§2.2 nouse-dcutype, case-insensitive substring",
        ),
        pytest.param(
            dev(), req(), {"hygon.com/use-gpuuuid": "D-9"}, "spread", "1/1 CardUuidMismatch", id="use-gpuuuid"
        ),
        pytest.param(
            dev(),
            req(),
            {"hygon.com/nouse-gpuuuid": "D-0"},
            "spread",
            "1/1 CardUuidMismatch",
            id="nouse-gpuuuid",
        ),
        pytest.param(
            dev(used=10, count=10), req(), {}, "spread", "1/1 CardTimeSlicingExhausted", id="V§1.8 step 5"
        ),
        pytest.param(
            dev(used=1),
            req(1, 10, 0, 10),
            {},
            "mutex",
            "1/1 ExclusiveDeviceAllocateConflict",
            id="V§1.8 step 6 mutex policy",
        ),
        pytest.param(
            dev(usedmem=16000), req(1, 1000, 0, 10), {}, "spread", "1/1 CardInsufficientMemory", id="step 10"
        ),
        pytest.param(
            dev(usedcores=50), req(1, 1000, 0, 60), {}, "spread", "1/1 CardInsufficientCore", id="step 11"
        ),
        pytest.param(
            dev(used=1, usedmem=10),
            req(1, 1000, 0, 100),
            {},
            "spread",
            "1/1 ExclusiveDeviceAllocateConflict",
            id="V§1.8 step 12 exclusive wants an empty card",
        ),
        pytest.param(
            dev(used=1, usedcores=100),
            req(1, 1000, 0, 0),
            {},
            "spread",
            "1/1 CardComputeUnitsExhausted",
            id="V§1.8 step 13",
        ),
    ],
)
def test_fit_reasons(
    device: Any, request_: DeviceRequest, annotations: dict[str, str], policy: str, reason: str
) -> None:
    outcome = DCU.fit([device], request_, fit_ctx(annotations, policy))
    assert not outcome.ok
    assert outcome.reason == reason


def test_fit_reports_the_partial_allocation_and_sorted_reasons() -> None:
    devices = [dev("D-0", 0, health=False), dev("D-1", 1, usedmem=16000), dev("D-2", 2)]
    outcome = DCU.fit(devices, req(3, 1000, 0, 10), fit_ctx())
    assert outcome.reason == (
        "1/3 AllocatedCardsInsufficientRequest, 1/3 CardInsufficientMemory, 1/3 CardNotHealth"
    )


# --- annotations, webhook, quota ------------------------------------------------------------------------


def test_pod_annotations() -> None:
    """V§1.7 example: containers [c0: 1 DCU, c1: none] -> `DCU-0,DCU,2048,30:;;`."""
    groups = ((ContainerDevice("DCU-0", "DCU", 2048, 30),), ())
    expected = "DCU-0,DCU,2048,30:;;"
    assert DCU.pod_annotations(groups, AnnotationContext("n1")) == {
        TO_ALLOCATE: expected,
        ALLOCATED: expected,
    }
    assert DCU.pod_annotations(((), ()), AnnotationContext("n1")) == {}


@pytest.mark.parametrize(
    ("container", "expected"),
    [
        pytest.param(res(limits={"hygon.com/dcunum": 1}), True, id="V§2.2 limits count"),
        pytest.param(res(requests={"hygon.com/dcunum": 1}), False, id="requests only are not looked at"),
        pytest.param(res(limits={"hygon.com/dcumem": 1000}), False, id="memory alone"),
    ],
)
def test_webhook_does_not_mutate(container: dict[str, Any], expected: bool) -> None:
    before = repr(container)
    assert DCU.mutate_container(container, {"spec": {}}) is expected
    assert repr(container) == before


def test_quota_uses_dcumem_and_dcucores_with_the_factor() -> None:
    vendor = Hygon(HygonConfig(memory_factor=2))
    view_ = build_view({"ns": {"hygon.com/dcumem": 1000, "hygon.com/dcucores": 100}}, {})
    assert fits(view_, "ns", vendor, 2000, 100)  # limit 1000 x factor 2
    assert not fits(view_, "ns", vendor, 2001, 0)
    requests = PodRequests(({"DCU": DeviceRequest(2, "DCU", 600, 0, 60)},), 0)
    assert admission_excess(requests, (vendor,), view_, "ns") is not None  # 120 cores > 100
