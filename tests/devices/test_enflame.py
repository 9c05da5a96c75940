"""Enflame, byte-compatible with HAMi's GCU backend (whole cards, `GCU`) and DRS backend (partitions,
`Enflame`) (reference vendors §2.9, quirks §3.9): discovery, profiles, requests, Fit with every reason,
annotations, webhook, quota."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from core_builders import context, pod
from vendor_builders import dev, fit_ctx, res, view

from app.core.codec import CodecError
from app.core.decision import allocation_annotations, decide
from app.core.health import Reported
from app.core.model import ContainerDevice, DeviceInfo, DeviceRequest, DeviceUse, NodeDevices
from app.core.quota import build_view
from app.core.reservations import reservation_from_pod
from app.core.vendor import SHARED_LOCK, AdmissionError, AnnotationContext, InvalidRequest
from app.devices import build_vendors, disabled_resources
from app.devices.enflame import EnflameConfig, EnflameDrs, EnflameGcu, parse_enflame_config
from app.devices.enflame.profiles import BY_SPEC, DIRECT, parse_profile_name

GCU, DRS = EnflameGcu(), EnflameDrs()
NAME_GCU, NAME_DRS = "enflame.com/gcu", "enflame.com/drs-gcu"
MEM, CORE = "enflame.com/gcu-memory", "enflame.com/gcu-core"
CAPACITY = "enflame.com/gcu-drs-capacity"
EXAMPLE = (
    '{"devices":[{"index":"0","minor":"0","capacity":6}],'
    '"profiles":{"1g.6gb":"0","3g.20gb":"1","6g.40gb":"2"}}'
)
NOW = datetime(2026, 1, 1, tzinfo=UTC)
PROFILES = {"1g.6gb": "0", "3g.20gb": "1", "6g.40gb": "2"}


def drs(index: int = 0, **kw: Any) -> Any:
    values: dict[str, Any] = {"type": "Enflame", "vendor": "Enflame", "count": 6, "totalmem": 40960, **kw}
    values.setdefault(
        "custom", {"minor": str(index), "index": str(index), "profiles": PROFILES, "maxSlice": 6}
    )
    return dev(f"node-a-enflame-drs-{index}", index, **values)


def gcu(index: int = 0, **kw: Any) -> Any:
    values: dict[str, Any] = {"type": "GCU", "vendor": "GCU", "count": 1, "totalmem": 100, **kw}
    return dev(f"n1-GCU-{index}", index, **values)


def test_keys() -> None:
    """V§1.2: `GCU` has to-allocate and allocated keys; `Enflame` only its allocated key; no locks in HAMi —
    GCU pods take the shared one here (its plugin finds the pod through it; docs/compatibility.md)."""
    assert (GCU.key, GCU.lock, GCU.to_allocate_annotation) == (
        "GCU",
        SHARED_LOCK,
        "hami.io/enflame-gcu-devices-to-allocate",
    )
    assert GCU.allocated_annotation == "hami.io/enflame-gcu-devices-allocated"
    assert (DRS.key, DRS.lock, DRS.to_allocate_annotation) == ("Enflame", None, "")
    assert DRS.allocated_annotation == "hami.io/enflame-vgpu-devices-allocated"
    assert (DRS.resources.count, DRS.resources.memory, DRS.resources.cores) == (NAME_DRS, MEM, CORE)


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        (None, EnflameConfig()),
        ({"resourceNameVGCU": "enflame.com/vgcu"}, EnflameConfig(resource_name_drs="enflame.com/vgcu")),
        ({"resourceNameDRSGCU": "x/drs", "resourceNameVGCU": "y"}, EnflameConfig(resource_name_drs="x/drs")),
        (
            {"resourceNameGCUMemory": "", "resourceNameGCUCore": "x/core"},
            EnflameConfig(resource_name_core="x/core"),
        ),
    ],
    ids=["§2.9 built-in names", "legacy resourceNameVGCU", "DRS name first", "empty: the default"],
)
def test_config_fallbacks(section: Any, expected: EnflameConfig) -> None:
    assert parse_enflame_config(section) == expected


@pytest.mark.parametrize(
    ("config", "keys"),
    [
        (None, ["Enflame"]),
        ({"enflame": {"resourceNameGCU": NAME_GCU}}, ["GCU", "Enflame"]),
        ({"enflame": {}}, ["Enflame"]),
    ],
    ids=["§1.2 DRS without a section (built-in names)", "GCU when named", "GCU without a name: none"],
)
def test_enabling(config: Any, keys: list[str]) -> None:
    assert [v.key for v in build_vendors(config, frozenset()) if v.key in ("GCU", "Enflame")] == keys


def test_gcu_without_a_name_is_answered() -> None:
    disabled = disabled_resources(None, frozenset())
    assert disabled[NAME_GCU] == "Enflame is not enabled for it (device config: the 'enflame' section)"
    assert NAME_DRS not in disabled and MEM not in disabled


# --- whole GCUs (§2.9 GCU) ---------------------------------------------------------------------------------


def test_gcu_discovery_requests_fit_annotations() -> None:
    node = view("n1", capacity={NAME_GCU: "2"})
    assert GCU.registered(node) and GCU.health(node, Reported(), NOW).healthy
    assert GCU.discover(node).devices == tuple(
        DeviceInfo(f"n1-GCU-{i}", i, 1, 100, 100, "GCU", 0, "", True, "GCU") for i in range(2)
    )
    with pytest.raises(CodecError, match=r"device not found enflame\.com/gcu"):
        GCU.discover(view("n1", capacity={NAME_GCU: "-1"}))
    assert GCU.container_request(res(limits={NAME_GCU: 2})) == DeviceRequest(2, "GCU", 100, 100, 100)
    outcome = GCU.fit([gcu(0), gcu(1)], DeviceRequest(1, "GCU", 100, 100, 100), fit_ctx())
    assert outcome.devices == (ContainerDevice("n1-GCU-1", "GCU", 100, 100, idx=1),)
    assert GCU.pod_annotations(outcome.devices and (outcome.devices,)) == {
        "hami.io/enflame-gcu-devices-to-allocate": "n1-GCU-1,GCU,100,100:;",
        "hami.io/enflame-gcu-devices-allocated": "n1-GCU-1,GCU,100,100:;",
    }
    assert GCU.mutate_container(res(limits={NAME_GCU: 1}), {}) and not GCU.mutate_container(res(), {})


@pytest.mark.parametrize(
    ("devices", "nums", "reason"),
    [
        ([gcu(health=False)], 1, "1/1 CardNotHealth"),
        ([gcu(type="Enflame")], 1, "1/1 CardTypeMismatch"),
        ([gcu(used=1)], 1, "1/1 ExclusiveDeviceAllocateConflict"),
        (
            [gcu(0), gcu(1, used=1)],
            2,
            "1/2 AllocatedCardsInsufficientRequest, 1/2 ExclusiveDeviceAllocateConflict",
        ),
    ],
    ids=["§2.9 health", "§2.9 type", "§2.9 used card", "§2.9 insufficient"],
)
def test_gcu_fit_reasons(devices: list[Any], nums: int, reason: str) -> None:
    assert GCU.fit(devices, DeviceRequest(nums, "GCU", 100, 100, 100), fit_ctx()).reason == reason


# --- DRS: capacity and profiles (§2.9) ---------------------------------------------------------------------


def test_drs_discovery_example() -> None:
    """§2.9 example: one device, Count 6, Devmem 40 x 1024."""
    node = view("node-a", {CAPACITY: EXAMPLE})
    assert DRS.registered(node) and DRS.health(node, Reported(), NOW).healthy
    assert DRS.discover(node).devices == (
        DeviceInfo(
            "node-a-enflame-drs-0",
            0,
            6,
            40960,
            100,
            "Enflame",
            0,
            "",
            True,
            "Enflame",
            custom={"minor": "0", "index": "0", "profiles": PROFILES, "maxSlice": 6},
        ),
    )


def test_drs_discovery_defaults() -> None:
    """Index not a number: the array position; no minor: the index; capacity as a numeric string."""
    value = json.dumps({"devices": [{"index": "x", "capacity": "4"}], "profiles": {"4G.24GB": "7"}})
    (device,) = DRS.discover(view("n", {CAPACITY: value})).devices
    assert (device.id, device.count, device.devmem) == ("n-enflame-drs-0", 4, 24576)
    assert device.custom == {"minor": "0", "index": "0", "profiles": {"4G.24GB": "7"}, "maxSlice": 4}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{", "failed to parse enflame.com/gcu-drs-capacity: "),
        ('{"devices":[{"capacity":1}],"profiles":{"big":"0"}}', "no valid drs profiles found on node n1"),
        ('{"devices":[{"capacity":0}],"profiles":{"1g.6gb":"0"}}', "invalid drs capacity on node n1"),
        ('{"devices":[{"capacity":"x"}],"profiles":{"1g.6gb":"0"}}', "invalid drs capacity on node n1"),
        ('{"devices":[],"profiles":{"1g.6gb":"0"}}', "no drs devices found on node n1"),
    ],
    ids=[
        "§2.9 bad JSON",
        "§2.9 no valid profile",
        "§2.9 capacity 0",
        "§2.9 capacity text",
        "§2.9 no devices",
    ],
)
def test_drs_discovery_errors(value: str, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        DRS.discover(view("n1", {CAPACITY: value}))


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("3g.20gb", (3, 20)),
        (" 6G.40GB ", (6, 40)),
        ("1.6", (1, 6)),
        ("1g.6g", (1, 6)),
        ("big", None),
        ("1g.x", None),
    ],
)
def test_profile_names(name: str, parsed: tuple[int, int] | None) -> None:
    assert parse_profile_name(name) == parsed


# --- DRS: requests (§2.9) -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("container", "expected"),
    [
        (res(limits={NAME_DRS: 3}), DeviceRequest(1, "Enflame", 3, DIRECT, 0)),
        (res(requests={NAME_DRS: 2}), DeviceRequest(1, "Enflame", 2, DIRECT, 0)),
        (res(limits={MEM: 16}), DeviceRequest(1, "Enflame", 16, BY_SPEC, 0)),
        (res(limits={MEM: 16384, CORE: 30}), DeviceRequest(1, "Enflame", 16384, BY_SPEC, 30)),
        (res(limits={CORE: "25"}), DeviceRequest(1, "Enflame", 0, BY_SPEC, 25)),
        (res(limits={NAME_DRS: 0, MEM: 16}), None),
        (res(limits={"cpu": 1}), None),
    ],
    ids=[
        "§2.9 direct: one device, slices in Memreq",
        "direct from requests",
        "§2.9 by spec: memory",
        "§2.9 by spec: memory and cores",
        "cores only",
        "a zero slice count asks nothing",
        "none",
    ],
)
def test_drs_request(container: dict[str, Any], expected: DeviceRequest | None) -> None:
    assert DRS.container_request(container) == expected


@pytest.mark.parametrize("limits", [{NAME_DRS: -1}, {MEM: -4}, {CORE: 2**31}])
def test_drs_refused_requests(limits: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest):
        DRS.container_request(res(limits=limits))


# --- DRS: Fit (§2.9) ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "profile", "memory", "cores"),
    [
        (DeviceRequest(1, "Enflame", 3, DIRECT, 0), "3g.20gb", 20480, 50),
        (DeviceRequest(1, "Enflame", 16, BY_SPEC, 0), "3g.20gb", 20480, 50),
        (DeviceRequest(1, "Enflame", 16384, BY_SPEC, 0), "3g.20gb", 20480, 50),
        (DeviceRequest(1, "Enflame", 0, BY_SPEC, 17), "1g.6gb", 6144, 17),
        (DeviceRequest(1, "Enflame", 0, BY_SPEC, 18), "3g.20gb", 20480, 50),
        (DeviceRequest(1, "Enflame", 6, BY_SPEC, 60), "6g.40gb", 40960, 100),
    ],
    ids=[
        "§2.9 example: drs-gcu 3",
        "§2.9 example: 16 GB",
        "§2.9 example: 16384 is MiB (> 2 x 40)",
        "cores only: ceil(1 x 100 / 6) = 17",
        "18 cores: the 3-slice profile",
        "memory and cores",
    ],
)
def test_drs_profile_selection(request_: DeviceRequest, profile: str, memory: int, cores: int) -> None:
    outcome = DRS.fit([drs()], request_, fit_ctx())
    (chosen,) = outcome.devices
    assert (dict(chosen.custom)["profileName"], chosen.usedmem, chosen.usedcores) == (profile, memory, cores)


@pytest.mark.parametrize(
    ("devices", "request_", "annotations", "policy", "reason"),
    [
        ([drs()], DeviceRequest(1, "Enflame", 4, DIRECT, 0), {}, "spread", "1/1 ModeNotFit"),
        ([drs()], DeviceRequest(1, "Enflame", 64, BY_SPEC, 0), {}, "spread", "1/1 ModeNotFit"),
        ([drs(), drs(1)], DeviceRequest(1, "Enflame", 0, BY_SPEC, 101), {}, "spread", "1/2 ModeNotFit"),
        ([drs(health=False)], DeviceRequest(1, "Enflame", 1, DIRECT, 0), {}, "spread", "1/1 CardNotHealth"),
        ([drs()], DeviceRequest(1, "GCU", 1, DIRECT, 0), {}, "spread", "1/1 CardTypeMismatch"),
        (
            [drs()],
            DeviceRequest(1, "Enflame", 1, DIRECT, 0),
            {"enflame.com/nouse-gpuuuid": "node-a-enflame-drs-0"},
            "spread",
            "1/1 CardUuidMismatch",
        ),
        (
            [drs(used=6)],
            DeviceRequest(1, "Enflame", 1, DIRECT, 0),
            {},
            "spread",
            "1/1 CardTimeSlicingExhausted",
        ),
        (
            [drs(used=1)],
            DeviceRequest(1, "Enflame", 1, DIRECT, 0),
            {},
            "mutex",
            "1/1 ExclusiveDeviceAllocateConflict",
        ),
        (
            [drs(used=1, usedmem=36000)],
            DeviceRequest(1, "Enflame", 1, DIRECT, 0),
            {},
            "spread",
            "1/1 CardInsufficientMemory",
        ),
        (
            [drs(used=2, usedcores=90)],
            DeviceRequest(1, "Enflame", 1, DIRECT, 0),
            {},
            "spread",
            "1/1 CardInsufficientCore",
        ),
    ],
    ids=[
        "§2.9 no 4-slice profile",
        "§3.9 #2 64 GB on a 40 GB node",
        "§3.9 #5 denominator: the devices",
        "health",
        "type",
        "UUID",
        "slots",
        "mutex",
        "memory",
        "cores: 17 > 10 left",
    ],
)
def test_drs_fit_reasons(
    devices: list[Any], request_: DeviceRequest, annotations: dict[str, str], policy: str, reason: str
) -> None:
    outcome = DRS.fit(devices, request_, fit_ctx(annotations, policy))
    assert not outcome.ok and outcome.reason == reason


def test_drs_quota_is_checked_in_fit_with_the_profile() -> None:
    """Difference (§3.9 #1): the quota holds the recorded units (profile MiB, core percent), in Fit."""
    the_pod = pod(res(limits={NAME_DRS: 3}), namespace="ns")
    node = NodeDevices("node-a", DRS.discover(view("node-a", {CAPACITY: EXAMPLE})).devices)
    tight = build_view({"ns": {MEM: 30000}}, {"ns": {MEM: 10000}})
    ctx = context(the_pod, vendors=(DRS,), quota=tight)
    assert decide(ctx, ["node-a"], {"node-a": node}, {}, (DRS,)).failed == {
        "node-a": "1/1 ResourceQuotaNotFit"
    }
    roomy = build_view({"ns": {MEM: 30720, CORE: 50}}, {"ns": {MEM: 10240}})
    assert decide(
        context(the_pod, vendors=(DRS,), quota=roomy), ["node-a"], {"node-a": node}, {}, (DRS,)
    ).winner


# --- DRS: annotations, rebuild, webhook (§2.9) ------------------------------------------------------------


def test_drs_annotations_example() -> None:
    """§2.9 example: `node-a-enflame-drs-0,Enflame,20480,50:;`, the first container's index/minor/size."""
    the_pod = pod(res("pod-gcu-example1", limits={NAME_DRS: 3}))
    outcome = DRS.fit([drs()], DeviceRequest(1, "Enflame", 3, DIRECT, 0), fit_ctx())
    result = DRS.pod_annotations((outcome.devices,), AnnotationContext("node-a", the_pod, {}, 1, 42))
    assert result == {
        "hami.io/enflame-vgpu-devices-allocated": "node-a-enflame-drs-0,Enflame,20480,50:;",
        "enflame.com/gcu-assigned": "false",
        "enflame.com/gcu-assigned-time": "42",
        "assigned-containers": (
            '{"pod-gcu-example1":{"allocated":false,"request":3,"profileID":"1","profileName":"3g.20gb"}}'
        ),
        "enflame.com/gcu-assigned-index": "0",
        "enflame.com/gcu-assigned-id": "0",
        "enflame.com/gcu-assigned-minor": "0",
        "enflame.com/gcu-request-size": "3",
    }


def test_drs_annotations_name_every_container_in_sorted_order() -> None:
    the_pod = pod(
        res("z-main", limits={NAME_DRS: 1}), res("a-side", limits={NAME_DRS: 3}), init=[res("init")]
    )
    one = DRS.fit([drs()], DeviceRequest(1, "Enflame", 1, DIRECT, 0), fit_ctx()).devices
    three = DRS.fit([drs(1)], DeviceRequest(1, "Enflame", 3, DIRECT, 0), fit_ctx()).devices
    groups = ((), one, three, ())
    result = DRS.pod_annotations(groups, AnnotationContext("node-a", the_pod, {}, 1, 1))
    assert list(json.loads(result["assigned-containers"])) == ["a-side", "z-main"]
    assert result["enflame.com/gcu-request-size"] == "1" and result["enflame.com/gcu-assigned-index"] == "0"
    assert DRS.pod_annotations(((), ())) == {}


def test_drs_rebuild_counts_one_slot_per_allocation() -> None:
    """§3.9 #3: one slot per allocation live and rebuilt alike; the cores keep slices within the card."""
    the_pod = pod(res("c", limits={NAME_DRS: 3}))
    node = NodeDevices("node-a", DRS.discover(view("node-a", {CAPACITY: EXAMPLE})).devices)
    ctx = context(the_pod, vendors=(DRS,))
    winner = decide(ctx, ["node-a"], {"node-a": node}, {}, (DRS,)).winner
    assert winner is not None and winner.devices is not None
    the_pod["metadata"]["annotations"].update(
        allocation_annotations("node-a", winner.devices, (DRS,), 1, the_pod)
    )
    rebuilt = reservation_from_pod(the_pod, (DRS,))
    assert rebuilt is not None and rebuilt.uses == {"node-a-enflame-drs-0": DeviceUse(1, 20480, 50)}
    full = {"node-a-enflame-drs-0": DeviceUse(2, 40960, 100)}
    assert decide(ctx, ["node-a"], {"node-a": node}, {"node-a": full}, (DRS,)).failed == {
        "node-a": "1/1 CardInsufficientMemory"
    }


@pytest.mark.parametrize(
    ("container", "resources"),
    [
        (res(limits={NAME_DRS: 2}), {"limits": {NAME_DRS: 2}, "requests": {NAME_DRS: 2}}),
        (res(requests={NAME_DRS: 2}), {"limits": {NAME_DRS: 2}, "requests": {NAME_DRS: 2}}),
        (res(limits={MEM: 16, CORE: 50}), {"limits": {MEM: 16, CORE: 50}, "requests": {MEM: 16, CORE: 50}}),
        (res(limits={MEM: 0}, requests={MEM: 8}), {"limits": {MEM: 8}, "requests": {MEM: 8}}),
    ],
    ids=["§2.9 direct: copied to requests", "to limits", "§2.9 unified", "a zero limit takes the request"],
)
def test_drs_webhook(container: dict[str, Any], resources: dict[str, Any]) -> None:
    assert DRS.mutate_container(container, {}) is True and container["resources"] == resources


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({NAME_DRS: 0}, "enflame.com/drs-gcu must be greater than 0 (a whole number of slices)"),
        ({MEM: "-1"}, "enflame.com/gcu-memory must be greater than 0 (at most 2147483647)"),
        ({MEM: 8, CORE: 0}, "enflame.com/gcu-core must be in range (0,100]"),
        ({CORE: 101}, "enflame.com/gcu-core must be in range (0,100]"),
    ],
    ids=["§2.9 slices", "§2.9 memory", "§2.9 cores 0", "§2.9 cores above 100"],
)
def test_drs_webhook_errors(limits: dict[str, Any], message: str) -> None:
    with pytest.raises(AdmissionError) as failure:
        DRS.mutate_container(res(limits=limits), {})
    assert str(failure.value) == message


def test_drs_webhook_ignores_other_containers() -> None:
    container = res(limits={"nvidia.com/gpu": 1})
    assert DRS.mutate_container(container, {}) is False and container == res(limits={"nvidia.com/gpu": 1})
