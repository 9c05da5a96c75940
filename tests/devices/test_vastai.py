"""Vastai, byte-compatible with HAMi's `VastaiDevices` (reference vendors §2.12, quirks §3.12)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from vendor_builders import dev, fit_ctx, info, res, view

from app.core.codec import CodecError
from app.core.health import Reported
from app.core.model import ContainerDevice, DeviceInfo, DeviceRequest, NodeDevices
from app.core.quota import tracked_resources
from app.core.vendor import SHARED_LOCK, AnnotationContext, ScoreContext
from app.devices.vastai import Vastai, VastaiConfig, parse_vastai_config

VA = Vastai()
REGISTER, HANDSHAKE = "hami.io/node-va-register", "hami.io/node-handshake-va"
TO_ALLOCATE, ALLOCATED = "hami.io/Vastai-devices-to-allocate", "hami.io/Vastai-devices-allocated"
NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def die(uuid: str, index: int, aic: str | None = None, strategy: str | None = "die", **kw: Any) -> Any:
    custom: dict[str, Any] = {}
    if strategy is not None:
        custom["DeviceStrategy"] = strategy
    if aic is not None:
        custom["AIC"] = aic
    kw.setdefault("count", 1)
    return dev(uuid, index, type="Vastai", vendor="Vastai", custom=custom, **kw)


def card(uuid: str = "V-0", index: int = 0, **kw: Any) -> Any:
    kw.setdefault("count", 1)
    return dev(uuid, index, type="Vastai", vendor="Vastai", **kw)


def req(nums: int = 1) -> DeviceRequest:
    return DeviceRequest(nums, "Vastai", 0, 100, 0)  # V§2.12 Requests: {n, Vastai, 0, 100, 0}


def taken(*uuids_and_indexes: tuple[str, int]) -> tuple[ContainerDevice, ...]:
    return tuple(ContainerDevice(u, "Vastai", 0, 0, idx=i) for u, i in uuids_and_indexes)


def test_keys_and_names() -> None:
    """V§1.2 key table (capital V, V§3.12 #4 kept)."""
    assert VA.key == "Vastai"
    assert (VA.source, VA.handshake_annotation) == (REGISTER, HANDSHAKE)
    assert (VA.to_allocate_annotation, VA.allocated_annotation) == (TO_ALLOCATE, ALLOCATED)
    assert VA.resources.count == "vastaitech.com/va"
    assert VA.lock == SHARED_LOCK
    assert VA.scores_nodes  # V§2.12 ScoreNode
    assert tracked_resources([VA]) == set()  # V§1.6
    assert parse_vastai_config({"resourceCountName": "x/va"}) == VastaiConfig("x/va")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(
            '[{"id":"7-0","count":1,"devmem":32768,"type":"Vastai","health":true}]',
            [DeviceInfo("7-0", 0, 1, 32768, 100, "Vastai", 0, "", True, "Vastai")],
            id="V§2.12 test example, Devcore forced to 100",
        ),
        pytest.param(
            '[{"id":"d-1","index":1,"count":1,"devmem":16384,"type":"Vastai","health":true,'
            '"custominfo":{"DeviceStrategy":"die","AIC":"0"},"devicepairscore":{}}]',
            [
                DeviceInfo(
                    "d-1",
                    1,
                    1,
                    16384,
                    100,
                    "Vastai",
                    0,
                    "",
                    True,
                    "Vastai",
                    custom={"DeviceStrategy": "die", "AIC": "0"},
                )
            ],
            id="V§2.12 custominfo kept (DeviceStrategy, AIC)",
        ),
    ],
)
def test_discovery(value: str, expected: list[DeviceInfo]) -> None:
    node = view(annotations={REGISTER: value})
    assert VA.registered(node)
    assert list(VA.discover(node).devices) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param("[]", "no gpu found on node", id="V§2.12 empty"),
        pytest.param("not json", "invalid register annotation", id="V§2.12 decoder error"),
    ],
)
def test_discovery_errors(value: str, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        VA.discover(view(annotations={REGISTER: value}))


def test_health_is_the_generic_handshake_on_node_handshake_va() -> None:
    verdict = VA.health(view(annotations={REGISTER: "[]"}), Reported(), NOW)
    assert verdict.healthy and verdict.stamp == "Requesting_2026-03-01 12:00:00"
    expired = view(annotations={REGISTER: "[]", HANDSHAKE: "Requesting_2026-03-01 11:58:00"})
    assert not VA.health(expired, Reported(), NOW).healthy


@pytest.mark.parametrize(
    ("container", "expected"),
    [
        pytest.param(res(limits={"vastaitech.com/va": 2}), req(2), id="V§2.12 limits"),
        pytest.param(res(requests={"vastaitech.com/va": 1}), req(1), id="V§2.12 else requests"),
        pytest.param(res(limits={"vastaitech.com/va": 0}), None, id="zero"),
    ],
)
def test_container_request(container: dict[str, Any], expected: DeviceRequest | None) -> None:
    assert VA.container_request(container) == expected


# --- Fit, whole cards (V§2.12) ---------------------------------------------------------------------------


def test_card_mode_takes_from_the_end() -> None:
    outcome = VA.fit([card("V-0", 0), card("V-1", 1), card("V-2", 2)], req(2), fit_ctx())
    assert outcome.ok and outcome.devices == taken(("V-2", 2), ("V-1", 1))


@pytest.mark.parametrize(
    ("device", "annotations", "policy", "reason"),
    [
        pytest.param(card(health=False), {}, "spread", "1/1 CardNotHealth", id="V§2.12 health"),
        pytest.param(
            card(), {"vastaitech.com/use-gpuuuid": "x"}, "spread", "1/1 CardUuidMismatch", id="use-gpuuuid"
        ),
        pytest.param(
            card(), {"vastaitech.com/nouse-gpuuuid": "V-0"}, "spread", "1/1 CardUuidMismatch", id="nouse"
        ),
        pytest.param(card(used=1), {}, "spread", "1/1 CardTimeSlicingExhausted", id="V§2.12 Count<=Used"),
        pytest.param(
            card(used=1, count=2), {}, "mutex", "1/1 ExclusiveDeviceAllocateConflict", id="V§2.12 mutex"
        ),
    ],
)
def test_fit_reasons(device: Any, annotations: dict[str, str], policy: str, reason: str) -> None:
    outcome = VA.fit([device], req(), fit_ctx(annotations, policy))
    assert not outcome.ok and outcome.reason == reason


def test_fit_type_mismatch() -> None:
    assert VA.fit([card()], DeviceRequest(1, "Biren", 0, 100, 0), fit_ctx()).reason == "1/1 CardTypeMismatch"


# --- Fit, dies (V§2.12 die mode) ------------------------------------------------------------------------


def test_die_mode_one_die_is_the_first_collected() -> None:
    devices = [die("d-0", 0, "0"), die("d-1", 1, "0"), die("d-2", 2, "1")]
    assert VA.fit(devices, req(1), fit_ctx()).devices == taken(("d-2", 2))


def test_die_mode_prefers_the_card_with_most_passing_dies() -> None:
    """V§2.12 computeBestCombination: AIC 0 has 3 passing dies, AIC 1 has 1 -> the three of AIC 0 first."""
    devices = [die("d-0", 0, "0"), die("d-1", 1, "0"), die("d-2", 2, "0"), die("d-3", 3, "1")]
    outcome = VA.fit(devices, req(2), fit_ctx())
    assert outcome.ok and outcome.devices == taken(("d-2", 2), ("d-1", 1))


def test_die_mode_exactly_the_request() -> None:
    devices = [die("d-0", 0, "0", used=1), die("d-1", 1, "1"), die("d-2", 2, "2")]
    assert VA.fit(devices, req(2), fit_ctx()).devices == taken(("d-2", 2), ("d-1", 1))


def test_die_mode_mutex_refuses_idle_dies_of_an_occupied_card() -> None:
    """V§2.12: with mutex in die mode, AICs with any used die are occupied."""
    devices = [die("d-0", 0, "0", used=1, count=2), die("d-1", 1, "0"), die("d-2", 2, "1")]
    outcome = VA.fit(devices, req(2), fit_ctx(policy="mutex"))
    assert outcome.reason == "1/3 AllocatedCardsInsufficientRequest, 2/3 ExclusiveDeviceAllocateConflict"
    one = VA.fit(devices, req(1), fit_ctx(policy="mutex"))
    assert one.devices == taken(("d-2", 2))


def test_die_mode_is_decided_by_the_first_candidate() -> None:
    """V§3.12 #1 (kept): the first candidate is a whole card, so the dies behind it are taken as cards."""
    devices = [card("c-0", 0), die("d-1", 1, "0"), die("d-2", 2, "0"), die("d-3", 3, "1")]
    assert VA.fit(devices, req(2), fit_ctx()).devices == taken(("d-3", 3), ("d-2", 2))


def test_die_without_a_card_is_its_own_card() -> None:
    """Difference: HAMi drops AIC-less dies from the combination and may bind fewer than requested."""
    devices = [die("d-0", 0, None), die("d-1", 1, "0"), die("d-2", 2, "0"), die("d-3", 3, None)]
    outcome = VA.fit(devices, req(3), fit_ctx())
    assert outcome.ok and len(outcome.devices) == 3
    assert outcome.devices == taken(("d-2", 2), ("d-1", 1), ("d-3", 3))


# --- ScoreNode (V§2.12), annotations, webhook -----------------------------------------------------------


def score_of(devices: tuple[DeviceInfo, ...], *groups: tuple[str, ...]) -> float:
    allocation = tuple(tuple(ContainerDevice(u, "Vastai", 0, 0) for u in group) for group in groups)
    return VA.score_node(ScoreContext(NodeDevices("n1", devices), (), allocation, "binpack", {}))


DIES = tuple(
    info(f"d-{i}", i, type="Vastai", vendor="Vastai", custom={"DeviceStrategy": "die", "AIC": str(i // 2)})
    for i in range(4)
)


@pytest.mark.parametrize(
    ("devices", "groups", "expected"),
    [
        pytest.param(DIES, (("d-0", "d-1"),), 1.0, id="V§2.12 both dies on one card: 2/2"),
        pytest.param(DIES, (("d-0", "d-2"),), 0.5, id="V§2.12 one die per card: 1/2"),
        pytest.param(DIES, (("d-0", "d-1"), (), ("d-2",)), 2.0, id="V§3.12 #3 summed over containers"),
        pytest.param(DIES, (("d-0", "d-1", "d-2"),), 0.6666666865348816, id="float32 2/3"),
        pytest.param(
            (info("c", 0, type="Vastai", vendor="Vastai"),), (("c",),), 0.0, id="V§2.12 nil CustomInfo: 0"
        ),
        pytest.param(
            (info("c", 0, type="Vastai", vendor="Vastai", custom={"DeviceStrategy": "card", "AIC": "0"}),),
            (("c",),),
            0.0,
            id="V§2.12 a strategy other than die: 0",
        ),
        pytest.param(
            (info("c", 0, type="Vastai", vendor="Vastai", custom={"DeviceStrategy": "die"}),),
            (("c",),),
            0.0,
            id="V§2.12 missing AIC: 0",
        ),
    ],
)
def test_score_node(
    devices: tuple[DeviceInfo, ...], groups: tuple[tuple[str, ...], ...], expected: float
) -> None:
    assert score_of(devices, *groups) == expected


def test_pod_annotations_byte_exact() -> None:
    """V§2.12 example `7-0,Vastai,0,0:;`."""
    groups = ((ContainerDevice("7-0", "Vastai", 0, 0),),)
    assert VA.pod_annotations(groups, AnnotationContext("n1")) == {
        TO_ALLOCATE: "7-0,Vastai,0,0:;",
        ALLOCATED: "7-0,Vastai,0,0:;",
    }


def test_webhook_recognises_the_limit_only() -> None:
    container = res(limits={"vastaitech.com/va": 1})
    assert VA.mutate_container(container, {}) is True
    assert container == res(limits={"vastaitech.com/va": 1})
    assert VA.mutate_container(res(requests={"vastaitech.com/va": 1}), {}) is False
