"""Kunlunxin, byte-compatible with HAMi's `KunlunDevices` (whole XPUs, `kunlun`) and `KunlunVDevices`
(vXPU, `XPU`) (reference vendors §2.8, quirks §3.8): discovery, requests, the interconnect groups
(`graghSelect`, by device index: §3.8 #1-2 fixed), the reasons, the node score, annotations, webhook,
quota."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest
from core_builders import context, pod
from vendor_builders import dev, fit_ctx, res, view

from app.core.codec import CodecError
from app.core.decision import decide
from app.core.health import Reported
from app.core.model import ContainerDevice, DeviceInfo, DeviceRequest, DeviceUse, NodeDevices
from app.core.quota import build_view, fits
from app.core.vendor import SHARED_LOCK, InvalidRequest, ScoreContext
from app.devices import build_vendors
from app.devices.kunlun import KunlunConfig, KunlunVxpu, KunlunXpu
from app.devices.kunlun import topology as topo

XPU, VXPU = KunlunXpu(), KunlunVxpu()
COUNT, VCOUNT, VMEM = "kunlunxin.com/xpu", "kunlunxin.com/vxpu", "kunlunxin.com/vxpu-memory"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
WHOLE = DeviceRequest(1, "kunlun", 0, 100, 0)


def card(index: int, **kw: Any) -> Any:
    values: dict[str, Any] = {"type": "kunlun", "vendor": "kunlun", "count": 100, "totalmem": 98304, **kw}
    return dev(f"n1-kunlun-{index}", index, **values)


def node_cards(used: frozenset[int] | set[int] = frozenset(), **kw: Any) -> list[Any]:
    return [card(i, used=1 if i in used else 0, **kw) for i in range(8)]


def test_keys_and_config() -> None:
    """V§1.2: `kunlun` has only `hami.io/kunlun-allocated`, no lock; `XPU` has the HAMi keys, the lock."""
    assert (XPU.key, XPU.lock, XPU.to_allocate_annotation) == ("kunlun", None, "")
    assert XPU.allocated_annotation == "hami.io/kunlun-allocated"
    assert (VXPU.key, VXPU.lock, VXPU.handshake_annotation) == (
        "XPU",
        SHARED_LOCK,
        "hami.io/node-handshake-xpu",
    )
    assert VXPU.to_allocate_annotation == "hami.io/xpu-devices-to-allocate"
    assert VXPU.allocated_annotation == "hami.io/xpu-devices-allocated"
    assert (VXPU.resources.memory, VXPU.resources.cores, VXPU.memory_factor) == (VMEM, "", 0)
    keys = [v.key for v in build_vendors({"kunlun": {"resourceCountName": COUNT}}, frozenset())]
    assert "kunlun" in keys and "XPU" not in keys
    (vxpu,) = [v for v in build_vendors({"kunlun": {"resourceVCountName": "x/v"}}) if v.key == "XPU"]
    assert isinstance(vxpu, KunlunVxpu) and vxpu.config == KunlunConfig(resource_vcount_name="x/v")


# --- whole XPUs: discovery, requests (§2.8) ---------------------------------------------------------------


def test_xpu_discovery_from_capacity() -> None:
    """§2.8: `<node>-kunlun-<i>`, 98304 MiB, 100 cores, Count 100, the upper half on NUMA 1 (§3.8 #6)."""
    node = view("n1", capacity={COUNT: "8"})
    assert XPU.registered(node)
    assert XPU.discover(node).devices == tuple(
        DeviceInfo(f"n1-kunlun-{i}", i, 100, 98304, 100, "kunlun", int(i >= 4), "", True, "kunlun")
        for i in range(8)
    )
    assert XPU.health(node, Reported(), NOW).healthy
    assert not XPU.registered(view("n1", capacity={COUNT: "0"}))
    with pytest.raises(CodecError, match=r"device not found kunlunxin\.com/xpu"):
        XPU.discover(view("n1", capacity={COUNT: "-8"}))


@pytest.mark.parametrize(
    ("container", "expected"),
    [(res(limits={COUNT: 2}), DeviceRequest(2, "kunlun", 0, 100, 0)), (res(requests={COUNT: 1}), WHOLE)],
    ids=["§2.8 limits", "requests"],
)
def test_xpu_request(container: dict[str, Any], expected: DeviceRequest) -> None:
    assert XPU.container_request(container) == expected


# --- the interconnect groups (§2.8 graghSelect) -----------------------------------------------------------


def _free(free: set[int]) -> list[Any]:
    return [card(i, used=0 if i in free else 1) for i in range(8)]


def _select(free: set[int], nums: int) -> list[int]:
    return [d.index for d in topo.select(_free(free), nums, lambda d: d.used == 0)]


@pytest.mark.parametrize(
    ("free", "nums", "chosen"),
    [
        (set(range(8)), 1, [0]),
        ({3, 4, 5, 6, 7}, 1, [3]),
        ({1, 2, 4, 5, 6, 7}, 1, [1]),
        ({1, 2, 3, 4, 5, 6, 7}, 2, [1, 2]),
        ({0, 1, 4, 5, 6, 7}, 2, [0, 1]),
        (set(range(8)), 4, [0, 1, 2, 3]),
        ({0, 4}, 2, [0, 4]),
        ({3, 7}, 2, [3, 7]),
        ({0, 1, 4, 5}, 4, [0, 1, 4, 5]),
        ({1, 2, 3, 5, 6, 7}, 4, [2, 3, 6, 7]),
        ({0, 1, 2, 4, 5, 6}, 4, [0, 1, 4, 5]),
        ({0, 3, 5, 6, 7}, 4, []),
        (set(range(8)), 8, list(range(8))),
        (set(range(7)), 8, []),
        (set(range(8)), 3, []),
        ({0, 5}, 2, []),
    ],
    ids=[
        "one: both wings full: the left one",
        "one: the wing with one free card (slot order 1)",
        "one: slot order 1, 3, 2: the wing with two",
        "two: the wing with three",
        "two: the wing with exactly two",
        "four: a whole wing",
        "two across the wings: pair 0-4",
        "two across: pair 3-7",
        "four across: group 0-1-4-5",
        "six free: the group that leaves a linked pair",
        "six free: 0-1-4-5 leaves 2-6",
        "four, no linked group",
        "eight: all",
        "eight: one used",
        "three: never",
        "two without a link",
    ],
)
def test_graph_select(free: set[int], nums: int, chosen: list[int]) -> None:
    assert _select(free, nums) == chosen


def test_graph_select_is_by_index_not_position() -> None:
    """§3.8 #1 fixed: the policy's sort order (any permutation) does not change the choice."""
    devices = _free({3, 4, 5, 6, 7})
    for seed in range(20):
        random.Random(seed).shuffle(devices)
        assert [d.index for d in topo.select(devices, 1, lambda d: d.used == 0)] == [3]


def test_graph_select_ignores_devices_beyond_eight() -> None:
    """§3.8 #2 fixed: never fewer devices than asked; indexes outside 0-7 are outside the topology."""
    devices = [card(i) for i in range(10)]
    assert [d.index for d in topo.select(devices, 4, lambda d: True)] == [0, 1, 2, 3]
    assert topo.select([card(8), card(9)], 1, lambda d: True) == []


# --- whole XPUs: Fit, score, annotations (§2.8) -----------------------------------------------------------


def test_xpu_fit_takes_whole_cards() -> None:
    outcome = XPU.fit(node_cards({0, 1, 2}), DeviceRequest(2, "kunlun", 0, 100, 0), fit_ctx())
    assert outcome.devices == (
        ContainerDevice("n1-kunlun-4", "kunlun", 98304, 100, idx=4),
        ContainerDevice("n1-kunlun-5", "kunlun", 98304, 100, idx=5),
    )


@pytest.mark.parametrize(
    ("devices", "annotations", "reason"),
    [
        (node_cards(set(range(8))), {}, "1/8 NumaNotFit"),
        (node_cards(), {"baidu.com/use-gpuuuid": "n1-kunlun-9"}, "8/8 CardUuidMismatch"),
        (node_cards(set(range(7))), {"hami.io/no-use-xpu-uuid": "n1-kunlun-7"}, "1/8 CardUuidMismatch"),
        (node_cards(health=False), {}, "1/8 NumaNotFit"),
    ],
    ids=["§2.8 nothing free", "§2.8 baidu.com selector", "§2.8 hami.io selector, only the reason", "health"],
)
def test_xpu_fit_reasons(devices: list[Any], annotations: dict[str, str], reason: str) -> None:
    outcome = XPU.fit(devices, WHOLE, fit_ctx(annotations))
    assert not outcome.ok and outcome.reason == reason


@pytest.mark.parametrize(
    ("used", "chosen", "score"),
    [
        ({0}, [0, 1], 3000.0),
        (set(), [0, 1, 2, 3], 2000.0),
        (set(), [0, 1], 1000.0),
        (set(), [0], 0.0),
        ({0, 4}, [1, 2, 3], 1000.0),
    ],
    ids=["§2.8 -1: 3000", "0: 2000", "+1: 1000", "+2: 0", "other: 1000"],
)
def test_xpu_score(used: set[int], chosen: list[int], score: float) -> None:
    previous = node_cards(used)
    allocation = (tuple(ContainerDevice(f"n1-kunlun-{i}", "kunlun", 98304, 100, idx=i) for i in chosen),)
    ctx = ScoreContext(NodeDevices("n1", ()), previous, allocation, "binpack", {})
    assert XPU.scores_nodes and XPU.score_node(ctx) == score


def test_xpu_score_is_zero_beside_other_devices() -> None:
    """§3.8 #4 kept: any device that is not a whole XPU on the node zeroes the score."""
    previous = [*node_cards(), dev("v", 8, type="XPU", vendor="XPU")]
    allocation = ((ContainerDevice("n1-kunlun-0", "kunlun", 98304, 100, idx=0),),)
    assert XPU.score_node(ScoreContext(NodeDevices("n1", ()), previous, allocation, "binpack", {})) == 0.0


def test_xpu_annotations_example() -> None:
    """§2.8 example: 2 cards Idx 0 and 4; BAIDU_COM_DEVICE_IDX is the last container's (§3.8 #7)."""
    groups = (
        (
            ContainerDevice("n1-kunlun-0", "kunlun", 98304, 100, idx=0),
            ContainerDevice("n1-kunlun-4", "kunlun", 98304, 100, idx=4),
        ),
    )
    assert XPU.pod_annotations(groups) == {
        "hami.io/kunlun-allocated": "n1-kunlun-0,kunlun,98304,100:n1-kunlun-4,kunlun,98304,100:;",
        "BAIDU_COM_DEVICE_IDX": "0,4",
    }
    two = (groups[0], (), (ContainerDevice("n1-kunlun-6", "kunlun", 98304, 100, idx=6),))
    assert XPU.pod_annotations(two)["BAIDU_COM_DEVICE_IDX"] == "6"
    assert XPU.mutate_container(res(limits={COUNT: 1}), {}) and not XPU.mutate_container(res(), {})


def test_xpu_through_decide_prefers_the_node_that_keeps_wings_whole() -> None:
    nodes = {
        name: NodeDevices(name, XPU.discover(view(name, capacity={COUNT: "8"})).devices)
        for name in ("a", "b")
    }
    ctx = context(pod(res(limits={COUNT: 1})), vendors=(XPU,))
    usage = {"a": {"a-kunlun-0": DeviceUse(1, 98304, 100)}, "b": {}}
    winner = decide(ctx, ["a", "b"], nodes, usage, (XPU,)).winner
    assert winner is not None and winner.devices is not None
    assert winner.node == "a" and [d.idx for d in winner.devices["kunlun"][0]] == [1]


# --- vXPU (§2.8) ---


def xpu(index: int, **kw: Any) -> Any:
    values: dict[str, Any] = {"type": "XPU", "vendor": "XPU", "count": 4, "totalmem": 98304, **kw}
    return dev(f"xpu-{index}", index, **values)


def test_vxpu_discovery_example() -> None:
    """§2.8 example (vdevice_test.go:255)."""
    value = '[{"id":"xpu-0","index":0,"count":1,"devmem":98304,"devcore":100,"type":"XPU","health":true}]'
    node = view("n1", {"hami.io/node-register-xpu": value})
    assert VXPU.registered(node)
    assert VXPU.discover(node).devices == (DeviceInfo("xpu-0", 0, 1, 98304, 100, "XPU", 0, "", True, "XPU"),)
    with pytest.raises(CodecError, match="no device found on node"):
        VXPU.discover(view("n1", {"hami.io/node-register-xpu": "[]"}))
    first = VXPU.health(node, Reported(), NOW)
    assert first.healthy and first.stamp == "Requesting_2026-01-01 00:00:00"


@pytest.mark.parametrize(
    ("container", "expected"),
    [
        (res(limits={VCOUNT: 1, VMEM: 20000}), DeviceRequest(1, "XPU", 24576, 0, 25)),
        (res(limits={VCOUNT: 1, VMEM: 30000}), DeviceRequest(1, "XPU", 49152, 0, 50)),
        (res(limits={VCOUNT: 2, VMEM: 60000}), DeviceRequest(2, "XPU", 98304, 0, 100)),
        (res(limits={VCOUNT: 1, VMEM: 0}), DeviceRequest(1, "XPU", 24576, 0, 25)),
        (res(limits={VCOUNT: 1}), DeviceRequest(1, "XPU", 98304, 100, 100)),
        (res(requests={VCOUNT: 1, VMEM: 49152}), DeviceRequest(1, "XPU", 49152, 0, 50)),
    ],
    ids=[
        "§2.8 example 20000 -> 24576, 25 cores",
        "49152",
        "98304",
        "an explicit 0 is the smallest template (HAMi)",
        "no memory: the whole device",
        "requests",
    ],
)
def test_vxpu_request(container: dict[str, Any], expected: DeviceRequest) -> None:
    assert VXPU.container_request(container) == expected


@pytest.mark.parametrize("limits", [{VCOUNT: 1, VMEM: "1.5"}, {VCOUNT: 1, VMEM: -1}, {VCOUNT: -2}])
def test_vxpu_refused_requests(limits: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest):
        VXPU.container_request(res(limits=limits))


def test_vxpu_webhook_rounds_memory_to_a_template() -> None:
    """§2.8 MutateAdmission: limits and requests get the template, as a decimal string."""
    container = res(limits={VCOUNT: 1, VMEM: "20000"})
    assert VXPU.mutate_container(container, {})
    assert container["resources"] == {"limits": {VCOUNT: 1, VMEM: "24576"}, "requests": {VMEM: "24576"}}
    untouched = res(limits={VCOUNT: 1})
    assert VXPU.mutate_container(untouched, {}) and untouched["resources"] == {"limits": {VCOUNT: 1}}
    assert not VXPU.mutate_container(res(requests={VCOUNT: 1}), {})


def test_vxpu_fit_shares_only_equal_templates() -> None:
    """§3.8 #8 kept: a device is shared only by vXPUs of one size (`Usedmem / Used == Memreq`)."""
    small = DeviceRequest(1, "XPU", 24576, 0, 25)
    shared = [xpu(0, used=1, usedmem=24576, usedcores=25)]
    assert VXPU.fit(shared, small, fit_ctx()).devices == (ContainerDevice("xpu-0", "XPU", 24576, 25, idx=0),)
    assert VXPU.fit(shared, DeviceRequest(1, "XPU", 49152, 0, 50), fit_ctx()).reason == "1/1 NumaNotFit"
    full = [xpu(0, used=4, usedmem=98304, usedcores=100)]
    assert VXPU.fit(full, small, fit_ctx()).reason == "1/1 NumaNotFit"
    slots = [xpu(0, count=2, used=2, usedmem=49152, usedcores=50)]  # room for memory, no slot (HAMi: fits)
    assert VXPU.fit(slots, small, fit_ctx()).reason == "1/1 NumaNotFit"


@pytest.mark.parametrize(
    ("devices", "annotations", "policy", "reason"),
    [
        (
            [xpu(0, used=1, usedmem=24576), xpu(1, used=1, usedmem=24576)],
            {},
            "mutex",
            "2/2 ExclusiveDeviceAllocateConflict",
        ),
        ([xpu(0), xpu(1)], {"hami.io/use-xpu-uuid": "xpu-7"}, "spread", "2/2 CardUuidMismatch"),
        ([xpu(0), xpu(1)], {"baidu.com/nouse-gpuuuid": "xpu-0,xpu-1"}, "spread", "2/2 CardUuidMismatch"),
        ([xpu(0, health=False)], {}, "spread", "1/1 NumaNotFit"),
    ],
    ids=["§2.8 mutex", "§2.8 hami.io selector", "§2.8 baidu.com selector", "health"],
)
def test_vxpu_fit_reasons(devices: list[Any], annotations: dict[str, str], policy: str, reason: str) -> None:
    outcome = VXPU.fit(devices, DeviceRequest(1, "XPU", 24576, 0, 25), fit_ctx(annotations, policy))
    assert outcome.reason == reason


def test_vxpu_annotations_and_quota() -> None:
    groups = ((ContainerDevice("xpu-0", "XPU", 24576, 25),),)
    assert VXPU.pod_annotations(groups) == {
        "hami.io/xpu-devices-to-allocate": "xpu-0,XPU,24576,25:;",
        "hami.io/xpu-devices-allocated": "xpu-0,XPU,24576,25:;",
    }
    limits = build_view({"ns": {VMEM: 49152}}, {})  # §1.6: memory only, in MiB
    assert fits(limits, "ns", VXPU, 49152, 100) and not fits(limits, "ns", VXPU, 49153, 0)
