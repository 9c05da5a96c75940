"""Moore Threads, byte-compatible with HAMi's `MthreadsDevices` (reference vendors §2.7, quirks §3.7): the
capacity-derived vendor that proves the seam's second discovery shape end to end."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from vendor_builders import dev, fit_ctx, res, view

from app.core.codec import CodecError
from app.core.health import Reported
from app.core.model import ContainerDevice, DeviceInfo, DeviceRequest
from app.core.quota import build_view, fits
from app.core.vendor import AdmissionError, AnnotationContext, InvalidRequest
from app.devices.mthreads import Mthreads

MT = Mthreads()
VGPU, MEM, CORE = "mthreads.com/vgpu", "mthreads.com/sgpu-memory", "mthreads.com/sgpu-core"


def gpu(index: int = 0, **kw: Any) -> Any:
    values: dict[str, Any] = {"type": "Mthreads", "count": 100, "totalmem": 49152, "totalcore": 16, **kw}
    return dev(f"n1-mthreads-{index}", index, vendor="Mthreads", **values)


def test_keys() -> None:
    assert MT.key == "Mthreads" and MT.lock is None and MT.handshake_annotation == ""
    assert MT.allocated_annotation == "hami.io/mthreads-vgpu-devices-allocated"
    assert MT.memory_factor == 512


def test_discovery_from_capacity() -> None:
    """§2.7 example: cores 32, memory 192 -> 2 GPUs of 192 x 512 x 16 / 32 = 49152 MiB, 16 cores."""
    node = view("n1", capacity={CORE: "32", MEM: "192"})
    assert MT.registered(node)
    assert MT.discover(node).devices == tuple(
        DeviceInfo(f"n1-mthreads-{i}", i, 100, 49152, 16, "Mthreads", 0, "", True, "Mthreads")
        for i in range(2)
    )
    assert not MT.registered(view("n1", capacity={CORE: "0"}))
    with pytest.raises(CodecError, match=r"device not found mthreads\.com/sgpu-core"):
        MT.discover(view("n1", capacity={CORE: "-16"}))
    assert MT.health(node, Reported(), datetime(2026, 1, 1, tzinfo=UTC)).healthy


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({VGPU: 2, CORE: 32, MEM: 192}, DeviceRequest(2, "Mthreads", 49152, 0, 16)),  # §2.7 example
        ({VGPU: 1, MEM: 8}, DeviceRequest(1, "Mthreads", 4096, 0, 0)),  # §2.7 example
        ({VGPU: 3, CORE: 10, MEM: 3}, DeviceRequest(3, "Mthreads", 512, 0, 3)),  # §3.7 #3 integer split
        ({VGPU: 1}, DeviceRequest(1, "Mthreads", 0, 100, 0)),
    ],
    ids=["two whole GPUs", "one sGPU", "integer split", "no memory"],
)
def test_container_request(limits: dict[str, Any], expected: DeviceRequest) -> None:
    assert MT.container_request(res(limits=limits)) == expected


def test_refused_request() -> None:
    with pytest.raises(InvalidRequest):
        MT.container_request(res(limits={VGPU: 1, MEM: "1.5"}))


def test_fit_and_the_one_device_rule() -> None:
    """§2.7: template + case-sensitive type + all of a pod's devices on one device (§3.7 #5, kept)."""
    request = DeviceRequest(1, "Mthreads", 4096, 0, 0)
    chosen = MT.fit([gpu(0), gpu(1)], request, fit_ctx())
    assert chosen.devices == (ContainerDevice("n1-mthreads-1", "Mthreads", 4096, 0, idx=1),)
    earlier = ((ContainerDevice("n1-mthreads-0", "Mthreads", 4096, 0),),)
    again = MT.fit([gpu(0), gpu(1)], request, fit_ctx(allocated=earlier))
    assert again.devices[0].uuid == "n1-mthreads-0"
    refused = MT.fit([gpu(1)], request, fit_ctx(allocated=earlier))
    assert refused.reason == "1/1 CardNotFoundCustomFilterRule"


@pytest.mark.parametrize(
    ("device", "request_", "reason"),
    [
        (gpu(health=False), DeviceRequest(1, "Mthreads", 512, 0, 0), "1/1 CardNotHealth"),
        (gpu(type="mthreads"), DeviceRequest(1, "Mthreads", 512, 0, 0), "1/1 CardTypeMismatch"),
        (gpu(used=100), DeviceRequest(1, "Mthreads", 512, 0, 0), "1/1 CardTimeSlicingExhausted"),
        (gpu(usedmem=49000), DeviceRequest(1, "Mthreads", 512, 0, 0), "1/1 CardInsufficientMemory"),
        (gpu(usedcores=10), DeviceRequest(1, "Mthreads", 512, 0, 8), "1/1 CardInsufficientCore"),
        (gpu(used=1, usedcores=16), DeviceRequest(1, "Mthreads", 512, 0, 0), "1/1 CardComputeUnitsExhausted"),
    ],
    ids=["health", "§2.7 case-sensitive type", "slots", "memory", "cores", "§3.7 #4 16 cores used"],
)
def test_fit_reasons(device: Any, request_: DeviceRequest, reason: str) -> None:
    assert MT.fit([device], request_, fit_ctx()).reason == reason


def test_uuid_selectors_use_the_ai_domain() -> None:
    assert MT.fit(
        [gpu()], DeviceRequest(1, "Mthreads", 512, 0, 0), fit_ctx({"mthreads.ai/use-gpuuuid": "x"})
    ).reason == ("1/1 CardUuidMismatch")


def test_annotations() -> None:
    """§2.7 example (device_test.go:397): Idx 0 -> gpu-index "0"; the last non-empty container wins."""
    groups = ((ContainerDevice("a", "Mthreads", 4096, 0, idx=0),),)
    ctx = AnnotationContext("n1", {}, {"hami.io/vgpu-node": "n1"}, 1, 1_000_000_007)
    assert MT.pod_annotations(groups, ctx) == {
        "hami.io/mthreads-vgpu-devices-allocated": "a,Mthreads,4096,0:;",
        "mthreads.com/gpu-index": "0",
        "mthreads.com/predicate-time": "1000000007",
        "mthreads.com/predicate-node": "n1",
    }
    two = (
        (ContainerDevice("a", "Mthreads", 1, 0, idx=0),),
        (),
        (ContainerDevice("b", "Mthreads", 1, 0, idx=1),),
    )
    assert MT.pod_annotations(two, ctx)["mthreads.com/gpu-index"] == "1"


def admit(container: dict[str, Any]) -> tuple[bool, dict[str, Any], dict[str, Any]]:
    the_pod: dict[str, Any] = {"metadata": {}, "spec": {"containers": [container]}}
    return MT.mutate_container(container, the_pod), container, the_pod


@pytest.mark.parametrize(
    ("limits", "expected", "annotation"),
    [
        ({VGPU: 2}, {VGPU: 2, CORE: "32", MEM: "192"}, "2"),
        ({VGPU: 1}, {VGPU: 1, CORE: "16", MEM: "96"}, None),
        ({VGPU: 1, MEM: 8}, {VGPU: 1, MEM: 8}, None),
    ],
    ids=["§2.7 count > 1: whole GPUs", "§2.7 one GPU without memory", "§2.7 legal memory"],
)
def test_webhook(limits: dict[str, Any], expected: dict[str, Any], annotation: str | None) -> None:
    ok, container, the_pod = admit(res(limits=limits))
    assert ok and container["resources"]["limits"] == expected
    assert the_pod["metadata"].get("annotations", {}).get("mthreads.com/request-gpu-num") == annotation


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({VGPU: 0}, "mthreads.com/vgpu must be greater than 0 (a whole number of GPUs)"),
        (
            {VGPU: 1, MEM: 3},
            "sGPU memory request value is invalid, valid values are [2, 4, 8, 16, 32, 64, 96]",
        ),
    ],
)
def test_webhook_errors(limits: dict[str, Any], message: str) -> None:
    with pytest.raises(AdmissionError) as failure:
        admit(res(limits=limits))
    assert str(failure.value) == message


def test_quota_in_512_mib_units() -> None:
    view_ = build_view({"ns": {MEM: 2, CORE: 16}}, {})
    assert fits(view_, "ns", MT, 1024, 16) and not fits(view_, "ns", MT, 1025, 0)
