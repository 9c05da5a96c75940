"""Huawei Ascend, byte-compatible with HAMi's Ascend backend (reference vendors §2.1, quirks §3.1)."""

from __future__ import annotations

import dataclasses
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
from app.core.vendor import SHARED_LOCK, AdmissionError, AnnotationContext, InvalidRequest
from app.devices.ascend import CHART_CHIPS, Ascend, ascend_vendors, parse_ascend_config
from app.devices.common.config import DeviceConfigError

CHIPS = {chip.common_word: chip for chip in CHART_CHIPS}
A910A = Ascend(CHIPS["Ascend910A"])
A910B3 = Ascend(CHIPS["Ascend910B3"])
A910C = Ascend(CHIPS["Ascend910C"])
A310P = Ascend(CHIPS["Ascend310P"])
NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def npu(index: int, cw: str = "Ascend910B3", network: Any = None, **kw: Any) -> Any:
    custom = {"NetworkID": network} if network is not None else {}
    return dev(
        f"{cw}-{index}", index, type=cw, vendor=cw, count=4, totalmem=65536, totalcore=20, custom=custom, **kw
    )


# --- config (§2.1.1) --------------------------------------------------------------------------------------


def test_chart_chips() -> None:
    assert list(CHIPS) == [
        "Ascend910A",
        "Ascend910B2",
        "Ascend910B3",
        "Ascend910B4-1",
        "Ascend910B4",
        "Ascend310P",
        "Ascend910C",
    ]
    assert [t.name for t in CHIPS["Ascend910A"].templates] == ["vir02", "vir04", "vir08", "vir16"]
    assert (CHIPS["Ascend310P"].memory_allocatable, CHIPS["Ascend310P"].memory_capacity) == (21527, 24576)
    assert CHIPS["Ascend910C"].super_pod and CHIPS["Ascend910C"].memory_factor == 0
    assert [v.key for v in ascend_vendors(None)] == list(CHIPS)


def test_config_entries_take_the_chart_chip_defaults_and_sort_templates() -> None:
    config = parse_ascend_config(
        {
            "hamiVnpuCore": True,
            "configs": [
                {"commonWord": "Ascend910B3", "memoryFactor": 2},
                {
                    "commonWord": "Ascend950",
                    "templates": [{"name": "big", "memory": 9}, {"name": "small", "memory": 3}],
                },
            ],
        }
    )
    assert config.hami_vnpu_core
    b3, custom = config.chips
    assert b3 == dataclasses.replace(CHIPS["Ascend910B3"], memory_factor=2)
    assert custom.resource_name == "huawei.com/Ascend950"
    assert custom.resource_memory_name == "huawei.com/Ascend950-memory"
    assert [t.name for t in custom.templates] == ["small", "big"]


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"configs": [{}]}, r"vnpus.configs\[0\].commonWord: must be set"),
        ({"configs": "x"}, "vnpus.configs: expected a list"),
        ({"configs": [{"commonWord": "A,B"}]}, "must not contain"),
        (
            {"configs": [{"commonWord": "X", "templates": [{"memory": 1}]}]},
            r"templates\[0\].name: must be set",
        ),
    ],
)
def test_invalid_config(section: dict[str, Any], message: str) -> None:
    with pytest.raises(DeviceConfigError, match=message):
        parse_ascend_config(section)


# --- keys (§2.1.1) and discovery (§2.1.2) ---------------------------------------------------------------


def test_keys() -> None:
    assert A910B3.key == "Ascend910B3"
    assert A910B3.source == "hami.io/node-register-Ascend910B3"
    assert A910B3.handshake_annotation == "hami.io/node-handshake-Ascend910B3"
    assert A910B3.to_allocate_annotation == "hami.io/Ascend910B3-devices-to-allocate"
    assert A910B3.allocated_annotation == "hami.io/Ascend910B3-devices-allocated"
    assert A910B3.resources.count == "huawei.com/Ascend910B3"
    assert (A910B3.resources.memory, A910B3.resources.cores) == (
        "huawei.com/Ascend910B3-memory",
        "huawei.com/Ascend910B3-core",
    )
    assert A910B3.lock == SHARED_LOCK  # §2.1.8
    assert A910B3.scores_nodes and not A310P.scores_nodes  # §2.1.6: only Ascend910*


def test_discovery_keeps_network_ids_and_the_node_switch() -> None:
    """§2.1.2 example register value (two 910B3 chips)."""
    value = (
        '[{"id":"Ascend910B3-0","count":4,"devmem":65536,"devcore":20,"type":"Ascend910B3","health":true,'
        '"custominfo":{"NetworkID":0}},{"id":"Ascend910B3-1","index":1,"count":4,"devmem":65536,"devcore":20,'
        '"type":"Ascend910B3","health":true,"custominfo":{"NetworkID":0}}]'
    )
    node = view(annotations={A910B3.source: value, "hami-vnpu-core": "false"})
    assert A910B3.registered(node) and not A910A.registered(node)
    found = A910B3.discover(node)
    assert found.devices == (
        DeviceInfo(
            "Ascend910B3-0",
            0,
            4,
            65536,
            20,
            "Ascend910B3",
            0,
            "",
            True,
            "Ascend910B3",
            custom={"NetworkID": 0},
        ),
        DeviceInfo(
            "Ascend910B3-1",
            1,
            4,
            65536,
            20,
            "Ascend910B3",
            0,
            "",
            True,
            "Ascend910B3",
            custom={"NetworkID": 0},
        ),
    )
    assert found.info == {"hami-vnpu-core": "false"}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("[]", "no device found on node"),
        ("{", "invalid register annotation"),
        ('[{"id":"x","custominfo":[1]}]', "custominfo"),
    ],
)
def test_discovery_errors(value: str, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        A910B3.discover(view(annotations={A910B3.source: value}))


def test_health_is_the_generic_handshake_on_the_chip_key() -> None:
    """§2.1.2: the plugin's `Reported_<dots>` value is not `Requesting`: stamped again (§3.1 #8, kept)."""
    reported = view(
        annotations={A910B3.source: "[]", A910B3.handshake_annotation: "Reported_2026.03.01 11:59:59"}
    )
    verdict = A910B3.health(reported, Reported(), NOW)
    assert verdict.healthy and verdict.stamp == "Requesting_2026-03-01 12:00:00"


# --- requests (§2.1.3) ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("vendor", "limits", "expected"),
    [
        (A910A, {"huawei.com/Ascend910A": 1}, DeviceRequest(1, "Ascend910A", 0, 100, 0)),
        (
            A910A,
            {"huawei.com/Ascend910A": 1, "huawei.com/Ascend910A-memory": 4369},
            DeviceRequest(1, "Ascend910A", 4369, 0, 0),
        ),
        (
            A910B3,
            {
                "huawei.com/Ascend910B3": 2,
                "huawei.com/Ascend910B3-memory": "8192",
                "huawei.com/Ascend910B3-core": "5",
            },
            DeviceRequest(2, "Ascend910B3", 8192, 0, 5),
        ),
        (
            A910C,
            {"huawei.com/Ascend910C": 2, "huawei.com/Ascend910C-memory": 100},
            DeviceRequest(2, "Ascend910C", 100, 0, 0),
        ),
        (A910A, {"huawei.com/Ascend910B3": 1}, None),
        (A910A, {"huawei.com/Ascend910A": 0}, None),
    ],
    ids=[
        "whole chip",
        "template memory",
        "hami-core cores",
        "910C memoryFactor 0: no scaling",
        "other chip",
        "zero",
    ],
)
def test_container_request(vendor: Ascend, limits: dict[str, Any], expected: DeviceRequest | None) -> None:
    assert vendor.container_request(res(limits=limits)) == expected


def test_memory_factor_scales_memory() -> None:
    doubled = Ascend(dataclasses.replace(CHIPS["Ascend910A"], memory_factor=2))
    request = doubled.container_request(
        res(limits={"huawei.com/Ascend910A": 1, "huawei.com/Ascend910A-memory": 100})
    )
    assert request == DeviceRequest(1, "Ascend910A", 200, 0, 0)


@pytest.mark.parametrize(
    "limits",
    [
        {"huawei.com/Ascend910A": 1, "huawei.com/Ascend910A-memory": "1500m"},  # §3.1 #9: silently 0 in HAMi
        {"huawei.com/Ascend910A": 1, "huawei.com/Ascend910A-memory": "16Gi"},  # out of range: dropped in HAMi
        {"huawei.com/Ascend910A": 1, "huawei.com/Ascend910A-core": -1},
    ],
    ids=["non-integer memory", "memory in bytes", "negative cores"],
)
def test_refused_requests(limits: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest):
        A910A.container_request(res(limits=limits))


# --- webhook (§2.1.4) -------------------------------------------------------------------------------------


def admitted(
    vendor: Ascend, container: dict[str, Any], annotations: dict[str, str] | None = None
) -> tuple[bool, dict[str, Any], dict[str, Any]]:
    the_pod: dict[str, Any] = {
        "metadata": {"annotations": annotations or {}},
        "spec": {"containers": [container]},
    }
    return vendor.mutate_container(container, the_pod), container, the_pod


def test_webhook_rounds_memory_up_to_a_template() -> None:
    """§2.1.4 example: 3000 MiB on a 910A -> template vir04 (4369), in limits and requests."""
    ok, container, _ = admitted(
        A910A, res(limits={"huawei.com/Ascend910A": 1, "huawei.com/Ascend910A-memory": 3000})
    )
    assert ok
    assert container["resources"]["limits"]["huawei.com/Ascend910A-memory"] == "4369"
    assert container["resources"]["requests"] == {"huawei.com/Ascend910A-memory": "4369"}


@pytest.mark.parametrize(
    ("vendor", "limits", "annotations", "memory"),
    [
        (A910A, {"huawei.com/Ascend910A": 1}, {}, "32768"),  # §3.1 #3: no memory = the whole chip
        (A910A, {"huawei.com/Ascend910A": 2}, {}, "32768"),
        (
            A910A,
            {"huawei.com/Ascend910A": 1, "huawei.com/Ascend910A-memory": 20000},
            {},
            "32768",
        ),  # > templates
        (A310P, {"huawei.com/Ascend310P": 1, "huawei.com/Ascend310P-memory": 24576}, {}, "21527"),  # capacity
        (
            A910B3,
            {
                "huawei.com/Ascend910B3": 1,
                "huawei.com/Ascend910B3-memory": 5000,
                "huawei.com/Ascend910B3-core": 10,
            },
            {"huawei.com/vnpu-mode": "hami-core"},
            "5000",
        ),
    ],
    ids=["whole chip default", "several whole chips", "above templates", "310P capacity", "hami-core raw"],
)
def test_webhook_memory(
    vendor: Ascend, limits: dict[str, Any], annotations: dict[str, str], memory: str
) -> None:
    ok, container, _ = admitted(vendor, res(limits=limits), annotations)
    assert ok
    name = vendor.resources.memory
    assert container["resources"]["limits"][name] == container["resources"]["requests"][name] == memory


@pytest.mark.parametrize(
    ("vendor", "limits", "annotations", "message"),
    [
        (
            A910A,
            {"huawei.com/Ascend910A": 2, "huawei.com/Ascend910A-memory": 8738},
            {},
            "vNPU not supported for multiple devices",
        ),
        (
            A910A,
            {"huawei.com/Ascend910A": 1, "huawei.com/Ascend910A-memory": 40000},
            {},
            "huawei.com/Ascend910A-memory 40000 is invalid: must be at most 32768 MiB",
        ),
        (A910C, {"huawei.com/Ascend910C": 3}, {}, "Ascend910C device request must be 1 or 2*n, got 3"),
        (
            A910B3,
            {"huawei.com/Ascend910B3": 1, "huawei.com/Ascend910B3-core": 5},
            {},
            "huawei.com/Ascend910B3-core is only supported in hami-core (soft split) mode",
        ),
    ],
    ids=["§2.1.4 multi-device vNPU", "§2.1.4 too large", "§2.1.4 910C odd", "§2.1.4 cores in hard split"],
)
def test_webhook_errors(
    vendor: Ascend, limits: dict[str, Any], annotations: dict[str, str], message: str
) -> None:
    with pytest.raises(AdmissionError) as failure:
        admitted(vendor, res(limits=limits), annotations)
    assert str(failure.value) == message


def test_webhook_910c_super_pod_rounds_one_to_a_card() -> None:
    """§2.1.4 step 2: a count of 1 becomes 2 in limits, and in requests when it is there."""
    ok, container, _ = admitted(
        A910C, res(limits={"huawei.com/Ascend910C": 1}, requests={"huawei.com/Ascend910C": 1})
    )
    assert ok and container["resources"]["limits"]["huawei.com/Ascend910C"] == "2"
    assert container["resources"]["requests"]["huawei.com/Ascend910C"] == "2"
    _, four, _ = admitted(A910C, res(limits={"huawei.com/Ascend910C": 4}))
    assert four["resources"]["limits"]["huawei.com/Ascend910C"] == 4


def test_webhook_reads_memory_from_requests_too() -> None:
    """§3.1 #2 fixed: HAMi ignores a memory given only in requests and writes the whole chip."""
    ok, container, _ = admitted(
        A910A, res(limits={"huawei.com/Ascend910A": 1}, requests={"huawei.com/Ascend910A-memory": 2000})
    )
    assert ok and container["resources"]["limits"]["huawei.com/Ascend910A-memory"] == "2184"


def test_webhook_env_and_runtime_class() -> None:
    chip = dataclasses.replace(CHIPS["Ascend910A"], overwrite_env=True, runtime_class_name="ascend")
    vendor = Ascend(chip)
    ok, other, _ = admitted(vendor, res(limits={"cpu": 1}))
    assert not ok and other["env"] == [{"name": "ASCEND_VISIBLE_DEVICES"}]
    vendor.mutate_container(other, {})  # a second chip config: §3.1 #10 fixed, one entry only
    assert other["env"] == [{"name": "ASCEND_VISIBLE_DEVICES"}]
    ok, _, the_pod = admitted(vendor, res(limits={"huawei.com/Ascend910A": 1}))
    assert ok and the_pod["spec"]["runtimeClassName"] == "ascend"


# --- Fit (§2.1.5) -----------------------------------------------------------------------------------------


def eight_chips(busy: tuple[int, ...] = ()) -> list[Any]:
    return [
        npu(i, network=0 if i <= 3 else 1, used=1 if i in busy else 0, usedmem=65536 if i in busy else 0)
        for i in range(8)
    ]


def test_fit_topology_prefers_the_largest_network_group() -> None:
    """§2.1.5 example: chips 0,1,4 busy; spread order puts them first; 7,6,5 (NetworkID 1) win."""
    devices = eight_chips((0, 1, 4))
    ordered = [devices[i] for i in (0, 1, 4, 2, 3, 5, 6, 7)]
    outcome = A910B3.fit(ordered, DeviceRequest(2, "Ascend910B3", 0, 100, 0), fit_ctx())
    assert outcome.ok and [d.uuid for d in outcome.devices] == ["Ascend910B3-7", "Ascend910B3-6"]
    assert outcome.devices[0] == ContainerDevice("Ascend910B3-7", "Ascend910B3", 65536, 0, idx=7)


def test_fit_topology_one_chip_takes_the_first_tried() -> None:
    outcome = A910B3.fit(eight_chips(), DeviceRequest(1, "Ascend910B3", 0, 100, 0), fit_ctx())
    assert [d.uuid for d in outcome.devices] == ["Ascend910B3-7"]


def test_fit_end_to_end_with_topology_score() -> None:
    """§2.1.5/§2.1.6 via decide: the NetworkID 1 pair wins and the node score gains 10 x (2/2)."""
    registered = tuple(
        DeviceInfo(
            f"Ascend910B3-{i}",
            i,
            4,
            65536,
            20,
            "Ascend910B3",
            0,
            "",
            True,
            "Ascend910B3",
            custom={"NetworkID": 0 if i <= 3 else 1},
        )
        for i in range(8)
    )
    node = NodeDevices("n1", registered)
    usage = {f"Ascend910B3-{i}": DeviceUse(1, 65536, 0) for i in (0, 1, 4)}
    the_pod = pod(res(limits={"huawei.com/Ascend910B3": 2}))
    ctx = context(the_pod, vendors=(A910B3,))
    decision = decide(ctx, ["n1"], {"n1": node}, {"n1": usage}, (A910B3,))
    winner = decision.winner
    assert winner is not None and winner.devices is not None
    assert [d.uuid for d in winner.devices["Ascend910B3"][0]] == ["Ascend910B3-7", "Ascend910B3-6"]
    base = 10 * (3 / 32 + 0 / 160 + 3 * 65536 / (8 * 65536))
    assert winner.score == pytest.approx(base + 10, rel=1e-6)


def test_fit_910c_takes_whole_cards() -> None:
    chips = [npu(i, "Ascend910C", network=0) for i in range(4)]
    two = A910C.fit(chips, DeviceRequest(2, "Ascend910C", 0, 100, 0), fit_ctx())
    assert [d.uuid for d in two.devices] == ["Ascend910C-3", "Ascend910C-2"]  # card 1 tried first
    half = [
        npu(i, "Ascend910C", network=0, used=1 if i == 3 else 0, usedmem=65536 if i == 3 else 0)
        for i in range(4)
    ]
    pair = A910C.fit(half, DeviceRequest(2, "Ascend910C", 0, 100, 0), fit_ctx())
    assert [d.uuid for d in pair.devices] == ["Ascend910C-1", "Ascend910C-0"]  # the full card
    four = A910C.fit(half, DeviceRequest(4, "Ascend910C", 0, 100, 0), fit_ctx())
    assert not four.ok
    assert (
        four.reason == "1/4 CardInsufficientMemory, 2/4 AllocatedCardsInsufficientRequest"
    )  # denominator: request


def test_fit_910c_odd_request_fails_with_hamis_reason() -> None:
    """§3.1 #4: 3 NPUs (no webhook) select two cards and fail `4/3 AllocatedCardsInsufficientRequest`."""
    chips = [npu(i, "Ascend910C", network=0) for i in range(4)]
    outcome = A910C.fit(chips, DeviceRequest(3, "Ascend910C", 0, 100, 0), fit_ctx())
    assert not outcome.ok and outcome.reason == "4/3 AllocatedCardsInsufficientRequest"


def test_fit_mode_not_fit() -> None:
    """§2.1.5 prelude, §3.1 #7: `1/<n> ModeNotFit` when the node does not support hami-core."""
    node = NodeDevices("n1", (), info={"Ascend910B3": {"hami-vnpu-core": "false"}})
    soft = {"huawei.com/vnpu-mode": "hami-core"}
    outcome = A910B3.fit(eight_chips(), DeviceRequest(1, "Ascend910B3", 8192, 0, 5), fit_ctx(soft, node=node))
    assert not outcome.ok and outcome.reason == "1/8 ModeNotFit" and outcome.devices == ()
    global_on = Ascend(CHIPS["Ascend910B3"], hami_vnpu_core=True)
    assert global_on.fit(eight_chips(), DeviceRequest(1, "Ascend910B3", 8192, 0, 5), fit_ctx(soft)).ok
    node_on = NodeDevices("n1", (), info={"Ascend910B3": {"hami-vnpu-core": "true"}})
    assert A910B3.fit(
        eight_chips(), DeviceRequest(1, "Ascend910B3", 8192, 0, 5), fit_ctx(soft, node=node_on)
    ).ok


@pytest.mark.parametrize(
    ("device", "request_", "annotations", "policy", "reason"),
    [
        (npu(0, health=False), DeviceRequest(1, "Ascend910B3", 0, 100, 0), {}, "spread", "1/1 CardNotHealth"),
        (
            npu(0),
            DeviceRequest(1, "Ascend910B3", 0, 100, 0),
            {"hami.io/use-Ascend910B3-uuid": "x"},
            "spread",
            "1/1 CardUuidMismatch",
        ),
        (
            npu(0),
            DeviceRequest(1, "Ascend910B3", 0, 100, 0),
            {"hami.io/no-use-Ascend910B3-uuid": "Ascend910B3-0"},
            "spread",
            "1/1 CardUuidMismatch",
        ),
        (
            npu(0, used=4),
            DeviceRequest(1, "Ascend910B3", 0, 100, 0),
            {},
            "spread",
            "1/1 CardTimeSlicingExhausted",
        ),
        (
            npu(0, used=1),
            DeviceRequest(1, "Ascend910B3", 100, 0, 0),
            {},
            "mutex",
            "1/1 ExclusiveDeviceAllocateConflict",
        ),
        (
            npu(0, usedmem=60000),
            DeviceRequest(1, "Ascend910B3", 8192, 0, 0),
            {},
            "spread",
            "1/1 CardInsufficientMemory",
        ),
        (
            npu(0, usedcores=15),
            DeviceRequest(1, "Ascend910B3", 8192, 0, 10),
            {},
            "spread",
            "1/1 CardInsufficientCore",
        ),
        (
            npu(0, used=1, usedcores=20),
            DeviceRequest(1, "Ascend910B3", 8192, 0, 0),
            {},
            "spread",
            "1/1 CardComputeUnitsExhausted",
        ),
    ],
    ids=[
        "health",
        "use-uuid",
        "no-use-uuid",
        "slots",
        "mutex",
        "memory",
        "cores vs AI cores",
        "compute exhausted",
    ],
)
def test_fit_reasons(
    device: Any, request_: DeviceRequest, annotations: dict[str, str], policy: str, reason: str
) -> None:
    """§2.1.5: the template's checks in order (no quota step)."""
    outcome = A910B3.fit([device], request_, fit_ctx(annotations, policy))
    assert not outcome.ok and outcome.reason == reason


def test_fit_hami_core_judges_cores_against_100() -> None:
    """§2.1.5: effective total core 100 in hami-core mode (steps 11-13)."""
    soft = fit_ctx({"huawei.com/vnpu-mode": "hami-core"})
    chip = npu(0, usedcores=15)
    assert (
        Ascend(CHIPS["Ascend910B3"], True).fit([chip], DeviceRequest(1, "Ascend910B3", 100, 0, 50), soft).ok
    )
    exclusive = Ascend(CHIPS["Ascend910B3"], True).fit(
        [npu(0, used=1)], DeviceRequest(1, "Ascend910B3", 100, 0, 100), soft
    )
    assert exclusive.reason == "1/1 ExclusiveDeviceAllocateConflict"


def test_fit_310p_has_no_topology() -> None:
    chips = [npu(i, "Ascend310P") for i in range(3)]
    outcome = A310P.fit(chips, DeviceRequest(2, "Ascend310P", 3072, 0, 0), fit_ctx())
    assert [d.uuid for d in outcome.devices] == ["Ascend310P-2", "Ascend310P-1"]


# --- score (§2.1.6) ---------------------------------------------------------------------------------------


def test_score_is_zero_when_a_chip_lacks_a_network_id() -> None:
    from app.core.vendor import ScoreContext

    node = NodeDevices(
        "n1",
        (
            DeviceInfo("a", 0, 4, 1, 20, "Ascend910B3", 0, "", True, "Ascend910B3", custom={"NetworkID": 0}),
            DeviceInfo("b", 1, 4, 1, 20, "Ascend910B3", 0, "", True, "Ascend910B3"),
            DeviceInfo("c", 2, 4, 1, 20, "Ascend910B3", 0, "", True, "Ascend910B3", custom={"NetworkID": 1}),
            DeviceInfo(
                "s", 3, 4, 1, 20, "Ascend910B3", 0, "", True, "Ascend910B3", custom={"NetworkID": "x"}
            ),
        ),
    )

    def score(*groups: tuple[str, ...]) -> float:
        allocation = tuple(tuple(ContainerDevice(u, "Ascend910B3", 0, 0) for u in g) for g in groups)
        return A910B3.score_node(ScoreContext(node, [], allocation, "binpack", {}))

    assert score(("a",)) == 10.0
    assert score(("a", "c")) == 5.0
    assert score(("a",), (), ("c",)) == 20.0  # per non-empty container
    assert score(("a", "b")) == 0.0
    assert score(("a", "s")) == 10.0  # only numeric NetworkIDs are counted (float64 in Go)
    assert score(("s",)) == 0.0


# --- annotations (§2.1.7) ---------------------------------------------------------------------------------


def test_annotations_hard_split() -> None:
    """§2.1.7 example (device_test.go): `[{"UUID":"device-0","temp":"vir08","memory":8738,"core":1}]`."""
    groups = ((ContainerDevice("device-0", "Ascend910A", 8738, 1),),)
    result = A910A.pod_annotations(groups, AnnotationContext("n1", {"metadata": {}}, {}, 1755756039, 0))
    assert result == {
        "hami.io/Ascend910A-devices-to-allocate": "device-0,Ascend910A,8738,1:;",
        "hami.io/Ascend910A-devices-allocated": "device-0,Ascend910A,8738,1:;",
        "predicate-time": "1755756039",
        "huawei.com/Ascend910A": '[{"UUID":"device-0","temp":"vir08","memory":8738,"core":1}]',
    }


def test_annotations_hami_core_and_whole_chips() -> None:
    soft = {"metadata": {"annotations": {"huawei.com/vnpu-mode": "hami-core"}}}
    groups = ((ContainerDevice("ascend-uuid-1", "Ascend910B3", 8192, 5),),)
    result = A910B3.pod_annotations(groups, AnnotationContext("n1", soft, {}, 1, 0))
    assert result["huawei.com/Ascend910B3"] == '[{"UUID":"ascend-uuid-1","memory":8192,"core":5}]'
    whole = (
        (),
        (ContainerDevice("a", "Ascend910B3", 65536, 0), ContainerDevice("b", "Ascend910B3", 65536, 0)),
    )
    runtime = json.loads(
        A910B3.pod_annotations(whole, AnnotationContext("n1", {}, {}, 1, 0))["huawei.com/Ascend910B3"]
    )
    assert runtime == [{"UUID": "a", "memory": 65536}, {"UUID": "b", "memory": 65536}]  # §3.1 #3: no temp


def test_allocation_annotations_write_every_chip_and_the_node() -> None:
    devices = {"Ascend910A": ((ContainerDevice("d", "Ascend910A", 4369, 0),),)}
    result = allocation_annotations("n1", devices, (A910A, A910B3), 7, {"metadata": {}})
    assert result["hami.io/vgpu-node"] == "n1" and result["predicate-time"] == "7"
    assert "hami.io/Ascend910B3-devices-allocated" not in result
