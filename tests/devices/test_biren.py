"""Biren, byte-compatible with HAMi's `BirenDevices` (reference vendors §2.13, quirks §3.13)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from vendor_builders import dev, fit_ctx, res, view

from app.core.codec import CodecError
from app.core.health import Reported
from app.core.model import ContainerDevice, DeviceInfo, DeviceRequest, PodRequests
from app.core.quota import admission_excess, build_view, tracked_resources
from app.core.vendor import SHARED_LOCK, AnnotationContext, InvalidRequest
from app.devices.biren import Biren, BirenConfig, parse_biren_config

BIREN = Biren()
REGISTER, HANDSHAKE = "hami.io/node-biren-register", "hami.io/node-handshake-biren"
TO_ALLOCATE, ALLOCATED = "hami.io/Biren-devices-to-allocate", "hami.io/Biren-devices-allocated"
NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def gpu(uuid: str = "B-0", index: int = 0, **kw: Any) -> Any:
    kw.setdefault("count", 4)
    return dev(uuid, index, type="Biren", vendor="Biren", **kw)


def req(nums: int = 1) -> DeviceRequest:
    return DeviceRequest(nums, "Biren", 0, 100, 0)  # V§2.13 Requests: {n, Biren, 0, 100, 0}


def test_keys_and_names() -> None:
    """V§1.2 key table (capital B, V§3.13 #1) and V§1.3 chart default."""
    assert BIREN.key == "Biren"
    assert (BIREN.source, BIREN.handshake_annotation) == (REGISTER, HANDSHAKE)
    assert (BIREN.to_allocate_annotation, BIREN.allocated_annotation) == (TO_ALLOCATE, ALLOCATED)
    assert BIREN.resources.count == "birentech.com/gpu"
    assert (BIREN.resources.memory, BIREN.resources.cores, BIREN.memory_factor) == ("", "", 0)
    assert BIREN.lock == SHARED_LOCK  # V§1.5
    assert not BIREN.scores_nodes  # V§2.13 ScoreNode 0
    assert tracked_resources([BIREN]) == set()  # V§1.6: no quota
    assert parse_biren_config({"resourceCountName": "x/gpu"}) == BirenConfig("x/gpu")
    assert parse_biren_config(None) == BirenConfig()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(
            '[{"id":"b-0","count":4,"devmem":65536,"type":"Biren","health":true}]',
            [DeviceInfo("b-0", 0, 4, 65536, 100, "Biren", 0, "", True, "Biren")],
            id="V§2.13 Devcore forced to 100",
        ),
        pytest.param(
            '[{"ID":"b-1","Index":1,"Count":2,"Devmem":1024,"Devcore":7,"Type":"Biren","devicepairscore":{}}]',
            [DeviceInfo("b-1", 1, 2, 1024, 100, "Biren", 0, "", False, "Biren")],
            id="V§1.7 keys case-insensitive, devicepairscore ignored, health absent = false",
        ),
    ],
)
def test_discovery(value: str, expected: list[DeviceInfo]) -> None:
    node = view(annotations={REGISTER: value})
    assert BIREN.registered(node)
    assert list(BIREN.discover(node).devices) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param("[]", "no gpu found on node", id="V§2.13 empty array"),
        pytest.param("{", "invalid register annotation", id="V§2.13 decoder error"),
        pytest.param('[{"id":"a","count":-1}]', "out of range", id="negative count refused (V§1.7)"),
    ],
)
def test_discovery_errors(value: str, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        BIREN.discover(view(annotations={REGISTER: value}))


def test_not_registered_without_the_annotation() -> None:
    assert not BIREN.registered(view(annotations={"hami.io/node-va-register": "[]"}))


def test_health_is_the_generic_handshake() -> None:
    """V§1.10: Requesting_<time> when absent; unhealthy 60 s after with allocatable 0."""
    fresh = BIREN.health(view(annotations={REGISTER: "[]"}), Reported(), NOW)
    assert fresh.healthy and fresh.stamp == "Requesting_2026-03-01 12:00:00"
    expired = view(annotations={REGISTER: "[]", HANDSHAKE: "Requesting_2026-03-01 11:58:00"})
    assert not BIREN.health(expired, Reported(), NOW).healthy
    alive = view(
        annotations={REGISTER: "[]", HANDSHAKE: "Requesting_2026-03-01 11:58:00"},
        allocatable={"birentech.com/gpu": "8"},
    )
    assert BIREN.health(alive, Reported(), NOW).healthy


@pytest.mark.parametrize(
    ("container", "expected"),
    [
        pytest.param(res(limits={"birentech.com/gpu": 2}), req(2), id="V§2.13 limits"),
        pytest.param(res(requests={"birentech.com/gpu": "1"}), req(1), id="requests when no limit"),
        pytest.param(res(limits={"birentech.com/gpu": 0}), None, id="zero: no request"),
        pytest.param(res(limits={"nvidia.com/gpu": 1}), None, id="another vendor"),
    ],
)
def test_container_request(container: dict[str, Any], expected: DeviceRequest | None) -> None:
    assert BIREN.container_request(container) == expected


def test_negative_count_is_refused() -> None:
    with pytest.raises(InvalidRequest):
        BIREN.container_request(res(limits={"birentech.com/gpu": -1}))


def test_fit_takes_devices_from_the_end_with_no_memory_or_cores() -> None:
    """V§2.13: `{Idx, UUID, Biren, 0, 0}` until Nums; busy memory does not matter."""
    devices = [gpu("B-0", 0), gpu("B-1", 1, usedmem=65536, used=3), gpu("B-2", 2)]
    outcome = BIREN.fit(devices, req(2), fit_ctx())
    assert outcome.ok
    assert outcome.devices == (
        ContainerDevice("B-2", "Biren", 0, 0, idx=2),
        ContainerDevice("B-1", "Biren", 0, 0, idx=1),
    )


@pytest.mark.parametrize(
    ("device", "annotations", "policy", "reason"),
    [
        pytest.param(gpu(health=False), {}, "spread", "1/1 CardNotHealth", id="V§2.13 health first"),
        pytest.param(
            gpu(), {"birentech.com/use-gpuuuid": "B-9"}, "spread", "1/1 CardUuidMismatch", id="use-gpuuuid"
        ),
        pytest.param(
            gpu(), {"birentech.com/nouse-gpuuuid": "B-0"}, "spread", "1/1 CardUuidMismatch", id="nouse"
        ),
        pytest.param(gpu(used=4), {}, "spread", "1/1 CardTimeSlicingExhausted", id="V§2.13 Count <= Used"),
        pytest.param(
            gpu(used=1), {}, "mutex", "1/1 ExclusiveDeviceAllocateConflict", id="V§2.13 mutex and used"
        ),
        pytest.param(
            gpu(), {"birentech.com/use-biren": "x"}, "spread", "", id="V§2.13 use-biren declared, unused"
        ),
    ],
)
def test_fit_reasons(device: Any, annotations: dict[str, str], policy: str, reason: str) -> None:
    outcome = BIREN.fit([device], req(), fit_ctx(annotations, policy))
    assert outcome.ok is (reason == "")
    assert outcome.reason == reason


def test_fit_type_mismatch_and_partial_allocation() -> None:
    """V§2.13 'Failure as template': taken devices count as AllocatedCardsInsufficientRequest."""
    wrong = BIREN.fit([gpu()], DeviceRequest(1, "NVIDIA", 0, 100, 0), fit_ctx())
    assert wrong.reason == "1/1 CardTypeMismatch"
    outcome = BIREN.fit([gpu("B-0", 0, health=False), gpu("B-1", 1)], req(2), fit_ctx())
    assert outcome.reason == "1/2 AllocatedCardsInsufficientRequest, 1/2 CardNotHealth"


def test_pod_annotations_byte_exact() -> None:
    """V§2.13 PatchAnnotations: to-allocate + allocated, `EncodePodSingleDevice` (V§1.7)."""
    groups = ((ContainerDevice("b-0", "Biren", 0, 0),), ())
    assert BIREN.pod_annotations(groups, AnnotationContext("n1")) == {
        TO_ALLOCATE: "b-0,Biren,0,0:;;",
        ALLOCATED: "b-0,Biren,0,0:;;",
    }
    assert BIREN.pod_annotations(((),), AnnotationContext("n1")) == {}
    assert {key.name for key in BIREN.pod_keys} == {TO_ALLOCATE, ALLOCATED}


@pytest.mark.parametrize(
    ("container", "expected"),
    [
        pytest.param(res(limits={"birentech.com/gpu": 1}), True, id="V§2.13 limits[count] exists"),
        pytest.param(res(requests={"birentech.com/gpu": 1}), False, id="requests are not looked at"),
    ],
)
def test_webhook_does_not_mutate(container: dict[str, Any], expected: bool) -> None:
    before = repr(container)
    assert BIREN.mutate_container(container, {"spec": {}}) is expected
    assert repr(container) == before


def test_no_quota_at_admission() -> None:
    """V§1.6: Vastai and Biren are not tracked; a namespace limit on other names does not stop them."""
    view_ = build_view({"ns": {"nvidia.com/gpumem": 0}}, {})
    assert admission_excess(PodRequests(({"Biren": req(8)},), 0), (BIREN,), view_, "ns") is None
