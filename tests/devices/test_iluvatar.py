"""Iluvatar, byte-compatible with HAMi's `IluvatarDevices` (reference vendors §2.6, quirks §3.6): one
vendor per `iluvatars[]` chip, behind HAMI_ENABLE_ILUVATAR (HAMi --enable-iluvatar)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from vendor_builders import dev, fit_ctx, res, view

from app.core.codec import CodecError
from app.core.health import Reported
from app.core.model import ContainerDevice, DeviceInfo, DeviceRequest
from app.core.quota import build_view, fits
from app.core.vendor import SHARED_LOCK, InvalidRequest
from app.devices import DeviceConfigError, build_vendors, disabled_resources
from app.devices.iluvatar import CHART_CHIPS, Iluvatar, IluvatarChip, parse_iluvatar_config

BI = Iluvatar(CHART_CHIPS[2])
VGPU, VMEM, VCORE = "iluvatar.ai/BI-V150-vgpu", "iluvatar.ai/BI-V150.vMem", "iluvatar.ai/BI-V150.vCore"
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def card(index: int = 0, **kw: Any) -> Any:
    return dev(f"BI-{index}", index, type="BI-V150", vendor="BI-V150", **kw)


def test_keys() -> None:
    """V§1.2 key table for a chip: every key carries the common word."""
    assert BI.key == "BI-V150" and BI.lock == SHARED_LOCK and BI.memory_factor == 256
    assert BI.register == "hami.io/node-BI-V150-register"
    assert BI.handshake_annotation == "hami.io/node-handshake-BI-V150"
    assert BI.to_allocate_annotation == "hami.io/BI-V150-devices-to-allocate"
    assert BI.allocated_annotation == "hami.io/BI-V150-devices-allocated"
    assert (BI.resources.count, BI.resources.memory, BI.resources.cores) == (VGPU, VMEM, VCORE)


def test_chart_chips_and_entries() -> None:
    """§1.3: MR-V100, MR-V50, BI-V150, BI-V100 with `iluvatar.ai/<cw>-vgpu`, `.vMem`, `.vCore`."""
    assert [c.common_word for c in CHART_CHIPS] == ["MR-V100", "MR-V50", "BI-V150", "BI-V100"]
    assert parse_iluvatar_config(None) == CHART_CHIPS
    assert parse_iluvatar_config([{"commonWord": "X1", "resourceCountName": "x/gpu"}]) == (
        IluvatarChip(
            "x/gpu", "iluvatar.ai/X1.vMem", "iluvatar.ai/X1.vCore", common_word="X1", chip_name="X1"
        ),
    )


@pytest.mark.parametrize(
    ("config", "flags", "keys"),
    [
        ({"iluvatars": []}, frozenset(), []),
        (None, frozenset({"iluvatar"}), ["MR-V100", "MR-V50", "BI-V150", "BI-V100"]),
        ({"iluvatars": [{"commonWord": "BI-V150"}]}, None, ["BI-V150"]),
        ({"iluvatars": [{"commonWord": "BI-V150"}]}, frozenset({"iluvatar"}), ["BI-V150"]),
    ],
    ids=[
        "service: HAMI_ENABLE_ILUVATAR off (§2.6)",
        "switch alone: the chart chips",
        "CLI: the section enables it",
        "service: switch and section",
    ],
)
def test_enabling(config: Any, flags: frozenset[str] | None, keys: list[str]) -> None:
    found = [v.key for v in build_vendors(config, flags) if isinstance(v, Iluvatar)]
    assert found == keys


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"iluvatars": {"commonWord": "x"}}, "iluvatars: expected a list"),
        ({"iluvatars": [{"chipName": "x"}]}, r"iluvatars\[0\]\.commonWord: must be set"),
        ({"iluvatars": [{"commonWord": "a,b"}]}, "must not contain"),
        ({"iluvatars": [{"commonWord": "X"}, {"commonWord": "X"}]}, "vendor key 'X' is configured twice"),
    ],
    ids=["not a list", "no common word", "separator", "§3.6 #4 duplicates are refused"],
)
def test_invalid_config(config: Any, message: str) -> None:
    with pytest.raises(DeviceConfigError, match=message):
        build_vendors(config, frozenset({"iluvatar"}))


def test_disabled_resources_name_the_switch() -> None:
    assert disabled_resources({}, frozenset())[VGPU] == (
        "Iluvatar is not enabled (device config: HAMI_ENABLE_ILUVATAR)"
    )
    assert VGPU not in disabled_resources({}, frozenset({"iluvatar"}))


# --- discovery and health (§2.6, §1.10) -------------------------------------------------------------------


def test_discovery_colon_format() -> None:
    node = view("n1", {BI.register: "BI-0,4,16384,100,BI-V150,0,true:BI-1,4,16384,100,BI-V150,1,false:"})
    assert BI.registered(node)
    assert BI.discover(node).devices == (
        DeviceInfo("BI-0", 0, 4, 16384, 100, "BI-V150", 0, "hami-core", True, "BI-V150"),
        DeviceInfo("BI-1", 0, 4, 16384, 100, "BI-V150", 1, "hami-core", False, "BI-V150"),
    )
    assert not BI.registered(view("n1", {"hami.io/node-MR-V100-register": "x"}))


@pytest.mark.parametrize(
    ("value", "message"),
    [(":", "no gpu found on node"), ("BI-0,4,16384,100,BI-V150:", "unexpected field count 5")],
    ids=["§2.6 nothing", "§2.2 five fields"],
)
def test_discovery_errors(value: str, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        BI.discover(view("n1", {BI.register: value}))


def test_health_is_the_generic_handshake_on_the_chip_key() -> None:
    """§1.10: `Requesting_<time>` is stamped; older than 60 s with no allocatable count is unhealthy."""
    first = BI.health(view("n1", {BI.register: "x"}), Reported(), NOW)
    assert first.healthy and first.stamp == "Requesting_2026-01-01 12:00:00"
    stale = {BI.handshake_annotation: "Requesting_2026-01-01 11:58:00"}
    assert not BI.health(view("n1", stale), Reported(), NOW).healthy
    assert BI.health(view("n1", stale, allocatable={VGPU: "4"}), Reported(), NOW).healthy
    fresh = {BI.handshake_annotation: f"Requesting_{(NOW - timedelta(seconds=30)):%Y-%m-%d %H:%M:%S}"}
    assert BI.health(view("n1", fresh), Reported(), NOW).healthy


# --- requests (§2.6) ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("container", "expected"),
    [
        (res(limits={VGPU: 1}), DeviceRequest(1, "BI-V150", 0, 100, 0)),
        (res(limits={VGPU: 1, VMEM: 16, VCORE: 50}), DeviceRequest(1, "BI-V150", 4096, 0, 50)),
        (res(limits={VGPU: 2, VCORE: 200}), DeviceRequest(2, "BI-V150", 0, 100, 200)),
        (res(requests={VGPU: 1, VMEM: 4}), DeviceRequest(1, "BI-V150", 1024, 0, 0)),
        (res(limits={"iluvatar.ai/MR-V100-vgpu": 1}), None),
    ],
    ids=[
        "§3.6 #3 one card without cores: cores 0, whole memory",
        "§2.6 memory in 256 MiB units",
        "§3.6 #3 two cards after the webhook: 200 cores",
        "requests",
        "another chip",
    ],
)
def test_container_request(container: dict[str, Any], expected: DeviceRequest | None) -> None:
    assert BI.container_request(container) == expected


@pytest.mark.parametrize(
    "limits",
    [{VGPU: -1}, {VGPU: 1, VMEM: "1.5"}, {VGPU: 1, VMEM: 8388608}, {VGPU: 1, VCORE: "0.5"}],
    ids=[
        "negative count",
        "non-integer memory (HAMi: whole card)",
        "memory beyond int32",
        "non-integer cores",
    ],
)
def test_refused_requests(limits: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest):
        BI.container_request(res(limits=limits))


# --- Fit: the template with the chip's selectors (§2.6, §1.8) -------------------------------------------


def test_fit_success_from_the_end() -> None:
    outcome = BI.fit([card(0), card(1)], DeviceRequest(1, "BI-V150", 4096, 0, 50), fit_ctx())
    assert outcome.devices == (ContainerDevice("BI-1", "BI-V150", 4096, 50, idx=1),)


@pytest.mark.parametrize(
    ("device", "request_", "annotations", "policy", "reason"),
    [
        (card(health=False), DeviceRequest(1, "BI-V150", 1024, 0, 0), {}, "spread", "1/1 CardNotHealth"),
        (card(), DeviceRequest(1, "MR-V100", 1024, 0, 0), {}, "spread", "1/1 CardTypeMismatch"),
        (
            card(),
            DeviceRequest(1, "BI-V150", 1024, 0, 0),
            {"hami.io/use-BI-V150-uuid": "BI-9"},
            "spread",
            "1/1 CardUuidMismatch",
        ),
        (
            card(),
            DeviceRequest(1, "BI-V150", 1024, 0, 0),
            {"hami.io/no-use-BI-V150-uuid": "BI-0"},
            "spread",
            "1/1 CardUuidMismatch",
        ),
        (
            card(used=10),
            DeviceRequest(1, "BI-V150", 1024, 0, 0),
            {},
            "spread",
            "1/1 CardTimeSlicingExhausted",
        ),
        (
            card(used=1),
            DeviceRequest(1, "BI-V150", 1024, 0, 0),
            {},
            "mutex",
            "1/1 ExclusiveDeviceAllocateConflict",
        ),
        (
            card(usedmem=16000),
            DeviceRequest(1, "BI-V150", 1024, 0, 0),
            {},
            "spread",
            "1/1 CardInsufficientMemory",
        ),
        (
            card(usedcores=60),
            DeviceRequest(1, "BI-V150", 1024, 0, 50),
            {},
            "spread",
            "1/1 CardInsufficientCore",
        ),
        (
            card(used=1),
            DeviceRequest(1, "BI-V150", 1024, 0, 200),
            {},
            "spread",
            "1/1 ExclusiveDeviceAllocateConflict",
        ),
        (
            card(used=1, usedcores=100),
            DeviceRequest(1, "BI-V150", 1024, 0, 0),
            {},
            "spread",
            "1/1 CardComputeUnitsExhausted",
        ),
    ],
    ids=[
        "1 health",
        "2 type",
        "4 use-uuid",
        "4 no-use-uuid",
        "5 slots",
        "6 mutex",
        "10 memory",
        "11 cores",
        "12 exclusive (cores clamped to 100, §3.6 #3)",
        "13 compute exhausted",
    ],
)
def test_fit_reasons(
    device: Any, request_: DeviceRequest, annotations: dict[str, str], policy: str, reason: str
) -> None:
    assert BI.fit([device], request_, fit_ctx(annotations, policy)).reason == reason


# --- annotations, webhook, quota (§2.6) ------------------------------------------------------------------


def test_annotations() -> None:
    groups = ((ContainerDevice("BI-0", "BI-V150", 4096, 50),), ())
    assert BI.pod_annotations(groups) == {
        "hami.io/BI-V150-devices-to-allocate": "BI-0,BI-V150,4096,50:;;",
        "hami.io/BI-V150-devices-allocated": "BI-0,BI-V150,4096,50:;;",
    }
    assert BI.pod_annotations(((), ())) == {}


@pytest.mark.parametrize(
    ("container", "limits", "env"),
    [
        (res("c", limits={VGPU: 2}), {VGPU: 2, VCORE: "200"}, [{"name": "SOL_CONTINER_NAME", "value": "c"}]),
        (res("c", limits={VGPU: 1}), {VGPU: 1}, [{"name": "SOL_CONTINER_NAME", "value": "c"}]),
        (
            {**res("c", limits={VGPU: 1}), "env": [{"name": "SOL_CONTINER_NAME", "value": "x"}]},
            {VGPU: 1},
            [{"name": "SOL_CONTINER_NAME", "value": "x"}],
        ),
        (res("", limits={VGPU: 1}), {VGPU: 1}, None),
    ],
    ids=["§2.6 two cards: exclusive cores", "one card", "env kept", "no name: no env"],
)
def test_webhook(container: dict[str, Any], limits: dict[str, Any], env: list[Any] | None) -> None:
    assert BI.mutate_container(container, {}) is True
    assert container["resources"]["limits"] == limits and container.get("env") == env


def test_webhook_ignores_requests_and_other_chips() -> None:
    assert BI.mutate_container(res("c", requests={VGPU: 1}), {}) is False
    assert BI.mutate_container(res("c", limits={"iluvatar.ai/MR-V100-vgpu": 1}), {}) is False


def test_quota_in_256_mib_units() -> None:
    limits = build_view({"ns": {VMEM: 4, VCORE: 100}}, {})
    assert fits(limits, "ns", BI, 1024, 100) and not fits(limits, "ns", BI, 1025, 0)
