"""AMD, byte-compatible with HAMi's `AMDDevices` (reference vendors §2.11, quirks §3.11)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from vendor_builders import dev, fit_ctx, res, view

from app.core.codec import CodecError
from app.core.health import Reported
from app.core.model import ContainerDevice, DeviceInfo, DeviceRequest, PodRequests
from app.core.quota import admission_excess, build_view, tracked_resources
from app.core.vendor import SHARED_LOCK, AdmissionError, AnnotationContext, InvalidRequest
from app.devices.amd import Amd, AmdConfig, parse_amd_config

AMD = Amd()
REGISTER = "hami.io/node-amd-register"
TO_ALLOCATE, ALLOCATED = "hami.io/amd-devices-to-allocate", "hami.io/amd-devices-allocated"
MI300X = "AMD Instinct MI300X VF"
NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def gpu(uuid: str = "A-0", index: int = 0, **kw: Any) -> Any:
    """An MI300X VF as the design doc registers it: 196608 MiB, 304 CUs."""
    kw.setdefault("type", MI300X)
    kw.setdefault("count", 4)
    kw.setdefault("totalmem", 196608)
    kw.setdefault("totalcore", 304)
    return dev(uuid, index, vendor="AMD", **kw)


def req(nums: int = 1, mem: int = 0, cores: int = 100) -> DeviceRequest:
    return DeviceRequest(nums, "AMD", mem, 0, cores)


def test_keys_and_names() -> None:
    """V§1.2 key table, V§1.3 chart names, V§1.5 shared lock, no handshake."""
    assert AMD.key == "AMD"
    assert AMD.source == REGISTER and AMD.handshake_annotation == ""
    assert (AMD.to_allocate_annotation, AMD.allocated_annotation) == (TO_ALLOCATE, ALLOCATED)
    names = AMD.resources
    assert (names.count, names.memory, names.cores) == ("amd.com/gpu", "amd.com/gpumem", "amd.com/gpucores")
    assert AMD.memory_factor == 0
    assert AMD.lock == SHARED_LOCK
    assert not AMD.scores_nodes
    assert tracked_resources([AMD]) == {"amd.com/gpumem", "amd.com/gpucores"}  # V§1.6
    assert "amd.com/gpu" in AMD.reads.capacity  # health reads the capacity
    assert parse_amd_config({"resourceCountName": "x/gpu"}) == AmdConfig("x/gpu")


def test_discovery_of_the_design_doc_example() -> None:
    """V§2.11 Discovery example."""
    value = (
        '[{"id":"uuid-1","count":1,"devmem":196608,"devcore":304,"type":"AMD Instinct MI300X VF",'
        '"mode":"hami-core","health":true}]'
    )
    node = view(annotations={REGISTER: value})
    assert AMD.registered(node)
    assert list(AMD.discover(node).devices) == [
        DeviceInfo("uuid-1", 0, 1, 196608, 304, MI300X, 0, "hami-core", True, "AMD")
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param("[]", "no gpu found on node", id="V§2.11 empty"),
        pytest.param("[", "invalid register annotation", id="V§2.11 decoder error"),
        pytest.param(
            '[{"id":"a","count":1,"type":"AMD,MI300"}]',
            "contains an annotation separator",
            id="comma in type",
        ),
        pytest.param('[{"id":"a","count":1,"type":"AMD:1"}]', "separator", id="colon in type"),
    ],
)
def test_discovery_errors(value: str, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        AMD.discover(view(annotations={REGISTER: value}))


@pytest.mark.parametrize(
    ("capacity", "healthy"),
    [
        pytest.param({"amd.com/gpu": "8"}, True, id="V§1.10 capacity > 0"),
        pytest.param({"amd.com/gpu": "0"}, False, id="V§1.10 capacity 0"),
        pytest.param({}, False, id="V§1.10 capacity absent"),
    ],
)
def test_health_follows_the_capacity(capacity: dict[str, str], healthy: bool) -> None:
    verdict = AMD.health(view(annotations={REGISTER: "[]"}, capacity=capacity), Reported(), NOW)
    assert verdict.healthy is healthy and verdict.stamp is None


def test_health_without_a_count_name_is_always_good() -> None:
    vendor = Amd(AmdConfig(resource_count_name=""))
    assert vendor.health(view(), Reported(), None).healthy  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("container", "expected"),
    [
        pytest.param(res(limits={"amd.com/gpu": 1}), req(1, 0, 100), id="V§2.11 count only: whole card"),
        pytest.param(
            res(limits={"amd.com/gpu": 1, "amd.com/gpumem": 16384, "amd.com/gpucores": 25}),
            req(1, 16384, 25),
            id="V§2.11 memory MiB and cores percent",
        ),
        pytest.param(res(requests={"amd.com/gpu": 1}), None, id="V§2.11 limits only"),
        pytest.param(res(limits={"amd.com/gpu": 0}), None, id="zero count"),
        pytest.param(
            res(limits={"amd.com/gpu": 2}, requests={"amd.com/gpucores": 10}),
            req(2, 0, 100),
            id="cores in requests are not read",
        ),
    ],
)
def test_container_request(container: dict[str, Any], expected: DeviceRequest | None) -> None:
    assert AMD.container_request(container) == expected


@pytest.mark.parametrize(
    "limits",
    [
        pytest.param({"amd.com/gpu": 1, "amd.com/gpucores": 0}, id="cores 0 (HAMi: zero request)"),
        pytest.param({"amd.com/gpu": 1, "amd.com/gpucores": 101}, id="cores 101"),
        pytest.param({"amd.com/gpu": 1, "amd.com/gpumem": "1.5"}, id="non-integer memory"),
        pytest.param({"amd.com/gpu": 1, "amd.com/gpumem": -1}, id="negative memory"),
        pytest.param({"amd.com/gpu": -2}, id="negative count"),
    ],
)
def test_refused_requests(limits: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest):
        AMD.container_request(res(limits=limits))


# --- Fit (V§2.11) ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("device", "request_", "expected"),
    [
        pytest.param(
            gpu("uuid"),
            req(1, 16384, 25),
            ContainerDevice("uuid", MI300X, 16384, 76),
            id="V§2.11 example 25%",
        ),
        pytest.param(
            gpu("uuid"), req(1, 0, 100), ContainerDevice("uuid", MI300X, 196608, 304), id="V§2.11 whole card"
        ),
        pytest.param(
            gpu("uuid", totalcore=50),
            req(1, 100, 1),
            ContainerDevice("uuid", MI300X, 100, 1),
            id="at least 1 CU",
        ),
        pytest.param(
            gpu("uuid", type=""),
            req(1, 100, 50),
            ContainerDevice("uuid", "AMD", 100, 152),
            id="empty type: AMD",
        ),
        pytest.param(
            gpu("uuid"), req(1, 1000, 0), ContainerDevice("uuid", MI300X, 1000, 0), id="no cores asked: 0 CUs"
        ),
        pytest.param(
            gpu("uuid", totalmem=1000),
            req(1, 0, 0),
            ContainerDevice("uuid", MI300X, 1000, 304),
            id="whole mem",
        ),
    ],
)
def test_fit_records_memory_and_compute_units(
    device: Any, request_: DeviceRequest, expected: ContainerDevice
) -> None:
    outcome = AMD.fit([device], request_, fit_ctx())
    assert outcome.ok and outcome.devices == (expected,)


@pytest.mark.parametrize(
    ("device", "request_", "annotations", "policy", "reason"),
    [
        pytest.param(gpu(health=False), req(), {}, "spread", "1/1 CardNotHealth", id="V§2.11 health"),
        pytest.param(
            gpu(), req(), {"amd.com/use-gputype": "MI250"}, "spread", "1/1 CardTypeMismatch", id="use-gputype"
        ),
        pytest.param(
            gpu(), req(), {"amd.com/nouse-gputype": "mi300x"}, "spread", "1/1 CardTypeMismatch", id="nouse"
        ),
        pytest.param(
            gpu(), req(), {"amd.com/use-gpu-uuid": "B"}, "spread", "1/1 CardUuidMismatch", id="use-gpu-uuid"
        ),
        pytest.param(
            gpu(), req(), {"amd.com/nouse-gpu-uuid": "A-0"}, "spread", "1/1 CardUuidMismatch", id="nouse-uuid"
        ),
        pytest.param(gpu(used=4), req(), {}, "spread", "1/1 CardTimeSlicingExhausted", id="V§2.11 slots"),
        pytest.param(
            gpu(used=1, usedmem=10),
            req(1, 10, 10),
            {},
            "mutex",
            "1/1 ExclusiveDeviceAllocateConflict",
            id="mutex",
        ),
        pytest.param(
            gpu(used=1, usedmem=1),
            req(1, 0, 10),
            {},
            "spread",
            "1/1 CardInsufficientMemory",
            id="whole memory",
        ),
        pytest.param(
            gpu(used=1, usedcores=300), req(1, 10, 10), {}, "spread", "1/1 CardInsufficientCore", id="CUs"
        ),
        pytest.param(
            gpu(totalcore=0), req(1, 10, 10), {}, "spread", "1/1 CardInsufficientCore", id="no CUs at all"
        ),
    ],
)
def test_fit_reasons(
    device: Any, request_: DeviceRequest, annotations: dict[str, str], policy: str, reason: str
) -> None:
    outcome = AMD.fit([device], request_, fit_ctx(annotations, policy))
    assert not outcome.ok and outcome.reason == reason


def test_fit_type_mismatch_and_failure_as_template() -> None:
    assert AMD.fit([gpu()], DeviceRequest(1, "DCU"), fit_ctx()).reason == "1/1 CardTypeMismatch"
    outcome = AMD.fit([gpu("A-0", 0, health=False), gpu("A-1", 1)], req(2, 10, 10), fit_ctx())
    assert outcome.reason == "1/2 AllocatedCardsInsufficientRequest, 1/2 CardNotHealth"


def test_pod_annotations_use_the_product_name() -> None:
    """V§2.11 example `<uuid>,AMD Instinct MI300X VF,16384,76:;` (V§3.11 #2: the product name)."""
    groups = ((ContainerDevice("uuid", MI300X, 16384, 76),),)
    expected = "uuid,AMD Instinct MI300X VF,16384,76:;"
    assert AMD.pod_annotations(groups, AnnotationContext("n1")) == {
        TO_ALLOCATE: expected,
        ALLOCATED: expected,
    }


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        pytest.param({"amd.com/gpu": 1}, True, id="V§2.11 count"),
        pytest.param({"amd.com/gpu": 1, "amd.com/gpucores": 50}, True, id="count and a valid percentage"),
        pytest.param({"nvidia.com/gpu": 1}, False, id="not AMD"),
    ],
)
def test_webhook(limits: dict[str, Any], expected: bool) -> None:
    container = res(limits=limits)
    assert AMD.mutate_container(container, {}) is expected
    assert container == res(limits=limits)  # no mutation


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        pytest.param(
            {"amd.com/gpu": 1, "amd.com/gpucores": 0},
            "amd.com/gpucores must be an integer percentage between 1 and 100",
            id="V§2.11 core 0",
        ),
        pytest.param(
            {"amd.com/gpu": 1, "amd.com/gpucores": "50.5"}, "integer percentage", id="V§2.11 non-integer"
        ),
    ],
)
def test_webhook_refusals(limits: dict[str, Any], message: str) -> None:
    with pytest.raises(AdmissionError, match=message):
        AMD.mutate_container(res(limits=limits), {})


@pytest.mark.parametrize(
    "limits",
    [
        pytest.param({"amd.com/gpumem": 1024}, id="V§3.11 #4 memory alone"),
        pytest.param({"amd.com/gpucores": 50}, id="cores alone"),
    ],
)
def test_memory_or_cores_without_the_count_route_the_pod_with_no_request(limits: dict[str, Any]) -> None:
    """HAMi's V§3.11 #4, kept: found (the pod goes to the GPU scheduler), no request, nothing mutated; the
    webhook's warning says so (tests/core/test_notes.py)."""
    container = res(limits=limits)
    assert AMD.mutate_container(container, {}) is True and container == res(limits=limits)
    assert AMD.container_request(container) is None


def test_admission_quota_sums_memory_and_percentages() -> None:
    """V§1.6: admission sums Memreq x Nums (MiB) and Coresreq x Nums (percent)."""
    view_ = build_view({"ns": {"amd.com/gpumem": 32768, "amd.com/gpucores": 100}}, {})
    assert admission_excess(PodRequests(({"AMD": req(2, 16384, 50)},), 0), (AMD,), view_, "ns") is None
    assert admission_excess(PodRequests(({"AMD": req(2, 16385, 50)},), 0), (AMD,), view_, "ns") is not None
    assert admission_excess(PodRequests(({"AMD": req(3, 100, 40)},), 0), (AMD,), view_, "ns") is not None
