"""Metax, byte-compatible with HAMi's `MetaxDevices` (whole GPUs, reference vendors §2.4, quirks §3.4) and
`MetaxSDevices` (sGPU, §2.5, §3.5): discovery, requests, Fit with every reason in HAMi's order, the
topology and QoS scores, the annotations, the webhook and the quota."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from core_builders import context, pod
from vendor_builders import dev, fit_ctx, info, res, view

from app.core.codec import CodecError
from app.core.decision import allocation_annotations, decide
from app.core.health import Reported
from app.core.model import ContainerDevice, DeviceInfo, DeviceRequest, DeviceUse, NodeDevices
from app.core.quota import build_view, fits
from app.core.reservations import reservation_from_pod, vendor_tags
from app.core.usage import allocation_uses
from app.core.vendor import SHARED_LOCK, AdmissionError, AnnotationContext, InvalidRequest, ScoreContext
from app.devices import build_vendors, disabled_resources
from app.devices.metax import MetaxConfig, MetaxGpu, MetaxSgpu

GPU, SGPU = MetaxGpu(), MetaxSgpu()
COUNT, VCOUNT, VMEM, VCORE = (
    "metax-tech.com/gpu",
    "metax-tech.com/sgpu",
    "metax-tech.com/vmemory",
    "metax-tech.com/vcore",
)
LOSSES, SCORES = "metax-tech.com/gpu.topology.losses", "metax-tech.com/gpu.topology.scores"
APP, QOS, TOPO = (
    "metax-tech.com/sgpu-app-class",
    "metax-tech.com/sgpu-qos-policy",
    "metax-tech.com/sgpu-topology-aware",
)
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def card(index: int = 0, **kw: Any) -> Any:
    values: dict[str, Any] = {"type": "Metax-GPU", "vendor": "Metax-GPU", "count": 1, "totalmem": 65536, **kw}
    return dev(f"n1-metax-{index}", index, **values)


def sgpu(uuid: str = "GPU-0", index: int = 0, **kw: Any) -> Any:
    values: dict[str, Any] = {"type": "Metax-SGPU", "vendor": "Metax-SGPU", "count": 16, "totalmem": 32768}
    values.update(kw)
    values.setdefault("custom", {"QosPolicy": "", "Model": "sgpu", "LinkZone": 0})
    return dev(uuid, index, **values)


def test_keys_and_config() -> None:
    """V§1.2 key table: Metax-GPU has no handshake and no lock in HAMi — its pods take the shared one here
    (its plugin finds the pod through it; docs/compatibility.md); Metax-SGPU takes the shared lock."""
    assert (GPU.key, GPU.lock, GPU.handshake_annotation) == ("Metax-GPU", SHARED_LOCK, "")
    assert GPU.to_allocate_annotation == "hami.io/metax-gpu-devices-to-allocate"
    assert GPU.allocated_annotation == "hami.io/metax-gpu-devices-allocated"
    assert (SGPU.key, SGPU.lock, SGPU.memory_factor) == ("Metax-SGPU", SHARED_LOCK, 1024)
    assert SGPU.to_allocate_annotation == "hami.io/metax-sgpu-devices-to-allocate"
    assert SGPU.allocated_annotation == "hami.io/metax-sgpu-devices-allocated"
    assert (SGPU.resources.count, SGPU.resources.memory, SGPU.resources.cores) == (VCOUNT, VMEM, VCORE)
    assert GPU.resources.memory == GPU.resources.cores == ""  # §1.6: not tracked by quota


@pytest.mark.parametrize(
    ("section", "keys"),
    [
        ({"resourceCountName": COUNT, "resourceVCountName": VCOUNT}, ["Metax-GPU", "Metax-SGPU"]),
        ({"resourceCountName": COUNT}, ["Metax-GPU"]),
        ({"resourceVCountName": VCOUNT, "sgpuTopologyAware": "true"}, ["Metax-SGPU"]),
        ({}, []),
    ],
    ids=["§1.3 chart section: both", "no sGPU count name", "no GPU count name", "no count names (§1.2)"],
)
def test_the_section_builds_each_backend_it_names(section: dict[str, Any], keys: list[str]) -> None:
    vendors = build_vendors({"metax": section}, frozenset())
    assert [v.key for v in vendors if v.key.startswith("Metax")] == keys


def test_section_values_and_the_resources_left_out() -> None:
    (sgpu_vendor,) = [
        v for v in build_vendors({"metax": {"resourceVCountName": "x/sgpu"}}) if v.key == "Metax-SGPU"
    ]
    assert isinstance(sgpu_vendor, MetaxSgpu)
    assert sgpu_vendor.config == MetaxConfig(resource_vcount_name="x/sgpu")
    disabled = disabled_resources({"metax": {"resourceCountName": COUNT}}, frozenset())
    assert disabled[VCOUNT] == "Metax is not enabled for it (device config: the 'metax' section)"
    assert COUNT not in disabled


# --- whole GPUs: discovery (§2.4) -------------------------------------------------------------------------


def test_gpu_discovery_from_capacity_with_topology_tables() -> None:
    node = view(
        "n1", {LOSSES: '{"1":0,"2":10,"4":30}', SCORES: '{"01": 5, "2": null}'}, capacity={COUNT: "2"}
    )
    assert GPU.registered(node)
    found = GPU.discover(node)
    assert found.devices == tuple(
        DeviceInfo(f"n1-metax-{i}", i, 1, 65536, 100, "Metax-GPU", 0, "", True, "Metax-GPU") for i in range(2)
    )
    assert found.info == {LOSSES: {"1": 0, "2": 10, "4": 30}, SCORES: {"1": 5, "2": 0}}
    assert GPU.health(node, Reported(), NOW).healthy


@pytest.mark.parametrize(
    ("annotations", "capacity", "message"),
    [
        ({}, {COUNT: "-1"}, r"device not found metax-tech\.com/gpu"),
        ({}, {COUNT: "1.5"}, "not an integer"),
        ({LOSSES: "{"}, {COUNT: "1"}, r"gpu\.topology\.losses: invalid JSON"),
        ({SCORES: '{"x": 1}'}, {COUNT: "1"}, "key 'x' is not an integer"),
        ({LOSSES: '{"1": 1.5}'}, {COUNT: "1"}, "value of '1' is not an integer"),
        ({LOSSES: "[1]"}, {COUNT: "1"}, "expected a JSON object"),
    ],
    ids=["§2.4 negative count", "count not an integer", "table not JSON", "key", "value", "not an object"],
)
def test_gpu_discovery_errors(annotations: dict[str, str], capacity: dict[str, str], message: str) -> None:
    with pytest.raises(CodecError, match=message):
        GPU.discover(view("n1", annotations, capacity=capacity))


def test_gpu_absent_capacity_is_no_gpu() -> None:
    assert not GPU.registered(view("n1", capacity={COUNT: "0"}))
    assert not GPU.registered(view("n1", capacity={"cpu": "8"}))


# --- whole GPUs: requests, Fit, score, annotations, webhook (§2.4) ---------------------------------------


@pytest.mark.parametrize(
    ("container", "expected"),
    [
        (res(limits={COUNT: 2}), DeviceRequest(2, "Metax-GPU", 0, 100, 100)),
        (res(requests={COUNT: "1"}), DeviceRequest(1, "Metax-GPU", 0, 100, 100)),
        (res(limits={"cpu": 1}), None),
    ],
    ids=["§2.4 limits", "§2.4 requests", "none"],
)
def test_gpu_request(container: dict[str, Any], expected: DeviceRequest | None) -> None:
    assert GPU.container_request(container) == expected


def test_gpu_negative_count_is_refused() -> None:
    with pytest.raises(InvalidRequest):
        GPU.container_request(res(limits={COUNT: -1}))


def test_gpu_fit_takes_whole_cards_from_the_end() -> None:
    outcome = GPU.fit([card(0), card(1)], DeviceRequest(1, "Metax-GPU", 0, 100, 100), fit_ctx())
    assert outcome.devices == (ContainerDevice("n1-metax-1", "Metax-GPU", 65536, 100, idx=1),)


@pytest.mark.parametrize(
    ("devices", "nums", "allocated", "reason"),
    [
        ([card(health=False)], 1, (), "1/1 CardNotHealth"),
        ([card(used=1)], 1, (), "1/1 CardTimeSlicingExhausted"),
        (
            [card(0), card(1, used=1)],
            2,
            (),
            "1/2 AllocatedCardsInsufficientRequest, 1/2 CardTimeSlicingExhausted",
        ),
        (
            [card(1)],
            1,
            ((ContainerDevice("n1-metax-0", "Metax-GPU", 65536, 100),),),
            "1/1 CardNotFoundCustomFilterRule",
        ),
    ],
    ids=["health", "§3.4 #1 one task per card", "insufficient", "§3.4 #1 all on one device"],
)
def test_gpu_fit_reasons(devices: list[Any], nums: int, allocated: Any, reason: str) -> None:
    outcome = GPU.fit(devices, DeviceRequest(nums, "Metax-GPU", 0, 100, 100), fit_ctx(allocated=allocated))
    assert not outcome.ok and outcome.reason == reason


def _score_ctx(info_: dict[str, Any], policy: str, cards: int) -> ScoreContext:
    node = NodeDevices("n1", (), info={"Metax-GPU": info_} if info_ else {})
    allocation = (tuple(ContainerDevice(f"n1-metax-{i}", "Metax-GPU", 65536, 100) for i in range(cards)), ())
    return ScoreContext(node, [], allocation, policy, {})


@pytest.mark.parametrize(
    ("tables", "policy", "cards", "score"),
    [
        ({LOSSES: {"1": 0, "2": 10}}, "binpack", 2, 1990.0),
        ({SCORES: {"2": 300}}, "spread", 2, 1700.0),
        ({SCORES: {"2": 300}}, "binpack", 2, 0.0),
        ({}, "binpack", 1, 0.0),
        ({LOSSES: {"1": 0}}, "binpack", 2, 0.0),
        ({LOSSES: {"1": 0}}, "mutex", 1, 0.0),
    ],
    ids=[
        "§2.4 binpack: 2000 - losses[n]",
        "§2.4 spread: 2000 - scores[n]",
        "binpack reads the losses only",
        "no table: 0",
        "no entry: 0 (HAMi 2000, §3.4 #3 fixed)",
        "another policy: 0",
    ],
)
def test_gpu_topology_score(tables: dict[str, Any], policy: str, cards: int, score: float) -> None:
    assert GPU.scores_nodes and GPU.score_node(_score_ctx(tables, policy, cards)) == score


def test_gpu_score_decides_between_nodes() -> None:
    """Through decide: under binpack the node whose table has the lower loss for 2 cards wins."""
    nodes = {
        name: GPU.discover(view(name, {LOSSES: json.dumps({"2": loss})}, capacity={COUNT: "4"}))
        for name, loss in (("a", 40), ("b", 10), ("c", 90))
    }
    built = {name: NodeDevices(name, d.devices, info={"Metax-GPU": d.info}) for name, d in nodes.items()}
    ctx = context(pod(res(limits={COUNT: 2})), vendors=(GPU,))
    winner = decide(ctx, ["a", "b", "c"], built, {}, (GPU,)).winner
    assert winner is not None and winner.node == "b"


def test_gpu_annotations_and_webhook() -> None:
    """§2.4 example: `node1-metax-3,Metax-GPU,65536,100:;` under both keys."""
    groups = ((ContainerDevice("node1-metax-3", "Metax-GPU", 65536, 100, idx=3),),)
    value = "node1-metax-3,Metax-GPU,65536,100:;"
    assert GPU.pod_annotations(groups) == {
        "hami.io/metax-gpu-devices-to-allocate": value,
        "hami.io/metax-gpu-devices-allocated": value,
    }
    assert GPU.pod_annotations(((),)) == {}
    assert GPU.mutate_container(res(limits={COUNT: 1}), {}) is True
    assert GPU.mutate_container(res(requests={COUNT: 1}), {}) is False  # limits only


# --- sGPU: discovery (§2.5) -------------------------------------------------------------------------------

EXAMPLE = (
    '[{"uuid":"GPU-123","model":"sgpu","totalDevCount":16,"totalCompute":100,"bdf":"0000:44:00.0",'
    '"totalVRam":32768,"numa":1,"healthy":true,"qosPolicy":"fixed-share"}]'
)


def test_sgpu_discovery_example() -> None:
    """§2.5 example (sdevice_test.go:520): one device, Count 16, 32768 MiB, 100 compute, NUMA 1."""
    node = view("n1", {"metax-tech.com/node-gpu-devices": EXAMPLE})
    assert SGPU.registered(node)
    assert SGPU.discover(node).devices == (
        DeviceInfo(
            "GPU-123",
            0,
            16,
            32768,
            100,
            "Metax-SGPU",
            1,
            "",
            True,
            "Metax-SGPU",
            custom={"QosPolicy": "fixed-share", "Model": "sgpu", "LinkZone": 0},
        ),
    )
    assert SGPU.health(node, Reported(), NOW).healthy


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("[]", "no sdevice found on node"),
        ("null", "no sdevice found on node"),
        ("{", "invalid JSON"),
        ("{}", "expected a JSON array"),
        ("[null]", "device 0 is not an object"),
        ('[{"totalDevCount": 4}]', "device 0 has no uuid"),
        ('[{"uuid": "a", "totalVRam": -1}]', "totalVRam"),
        ('[{"uuid": "a", "healthy": "yes"}]', "healthy"),
    ],
    ids=[
        "§2.5 empty",
        "null",
        "§2.5 bad JSON",
        "not an array",
        "null entry",
        "no uuid",
        "negative",
        "health",
    ],
)
def test_sgpu_discovery_errors(value: str, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        SGPU.discover(view("n1", {"metax-tech.com/node-gpu-devices": value}))


def test_sgpu_link_zone_and_case_insensitive_keys() -> None:
    """Go's decoder matches keys case-insensitively; LinkZone and the QoS go to the custom info."""
    value = '[{"UUID":"a","TotalDevCount":2,"linkzone":3,"QOSPOLICY":"burst-share"}]'
    (device,) = SGPU.discover(view("n1", {"metax-tech.com/node-gpu-devices": value})).devices
    assert device.custom == {"QosPolicy": "burst-share", "Model": "", "LinkZone": 3} and device.count == 2
    assert not device.health  # `healthy` absent: false


# --- sGPU: requests (§2.5, §3.5 #4) ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({VCOUNT: 1, VMEM: 4}, DeviceRequest(1, "Metax-SGPU", 4096, 0, 100)),
        ({VCOUNT: 1, VMEM: "4Gi"}, DeviceRequest(1, "Metax-SGPU", 4096, 0, 100)),
        ({VCOUNT: 1, VMEM: "4G"}, DeviceRequest(1, "Metax-SGPU", 3814, 0, 100)),
        ({VCOUNT: 1, VCORE: 30}, DeviceRequest(1, "Metax-SGPU", 0, 100, 30)),
        ({VCOUNT: 2, VCORE: 0, VMEM: "1536Mi"}, DeviceRequest(2, "Metax-SGPU", 1536, 0, 0)),
        ({VCOUNT: 1, VMEM: 1000}, DeviceRequest(1, "Metax-SGPU", 0, 100, 100)),
        ({VCOUNT: 1, VMEM: 1500}, DeviceRequest(1, "Metax-SGPU", 1536000, 0, 100)),
    ],
    ids=[
        "§2.5 bare number is GiB",
        "§2.5 Gi",
        "§3.5 #4 4G is bytes: 3814 MiB",
        "§2.5 cores, no memory: the whole card",
        "Mi",
        "1000 prints as 1k (a unit): 0 MiB, the whole card, as HAMi",
        "1500 prints bare: GiB",
    ],
)
def test_sgpu_request(limits: dict[str, Any], expected: DeviceRequest) -> None:
    assert SGPU.container_request(res(limits=limits)) == expected


def test_sgpu_request_reads_limits_only() -> None:
    assert SGPU.container_request(res(requests={VCOUNT: 1})) is None


@pytest.mark.parametrize(
    "limits",
    [{VCOUNT: 1, VMEM: "1.5"}, {VCOUNT: 1, VMEM: 2097152}, {VCOUNT: 1, VCORE: -1}, {VCOUNT: -1}],
    ids=["non-integer memory (HAMi: 0)", "beyond int32 MiB", "negative cores", "negative count"],
)
def test_sgpu_refused_requests(limits: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest):
        SGPU.container_request(res(limits=limits))


# --- sGPU: webhook (§2.5) ----------------------------------------------------------------------------------


def admit(limits: dict[str, Any], annotations: dict[str, str] | None = None) -> tuple[bool, dict[str, Any]]:
    container = res(limits=limits)
    the_pod: dict[str, Any] = {"metadata": {"annotations": dict(annotations)} if annotations else {}}
    return SGPU.mutate_container(container, the_pod), the_pod["metadata"].get("annotations", {})


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (None, {QOS: "best-effort"}),
        ({QOS: "fixed-share"}, {QOS: "fixed-share"}),
        ({APP: "online"}, {APP: "online"}),
        ({APP: "offline"}, {APP: "offline", QOS: "best-effort"}),
    ],
    ids=["§2.5 default QoS added", "QoS kept", "online: no QoS", "offline: default QoS"],
)
def test_sgpu_webhook(annotations: dict[str, str] | None, expected: dict[str, str]) -> None:
    assert admit({VCOUNT: 1}, annotations) == (True, expected)


@pytest.mark.parametrize(
    ("limits", "annotations", "message"),
    [
        ({VCOUNT: 1}, {APP: "batch"}, "metax-tech.com/sgpu-app-class must be set one of [online, offline]"),
        ({VCOUNT: 2}, {APP: "online"}, "app-class pod must request single device"),
        (
            {VCOUNT: 1},
            {QOS: "gold"},
            "metax-tech.com/sgpu-qos-policy must be set one of [best-effort, fixed-share, burst-share]",
        ),
    ],
    ids=["§2.5 app class", "§2.5 one device", "§2.5 QoS"],
)
def test_sgpu_webhook_errors(limits: dict[str, Any], annotations: dict[str, str], message: str) -> None:
    with pytest.raises(AdmissionError) as failure:
        admit(limits, annotations)
    assert str(failure.value) == message


def test_sgpu_webhook_ignores_other_containers() -> None:
    assert admit({COUNT: 1}) == (False, {})


# --- sGPU: Fit (§2.5, every reason in HAMi's order) -------------------------------------------------------

SHARE = DeviceRequest(1, "Metax-SGPU", 4096, 0, 30)


@pytest.mark.parametrize(
    ("device", "request_", "annotations", "policy", "reason"),
    [
        (sgpu(), DeviceRequest(1, "MLU", 4096, 0, 30), {}, "spread", "1/1 CardTypeMismatch"),
        (sgpu(health=False), SHARE, {}, "spread", "1/1 CardUnhealthy"),
        (
            sgpu(used=1, tags=("qos=best-effort",)),
            SHARE,
            {APP: "online"},
            "spread",
            "1/1 CardAppClassMismatch",
        ),
        (sgpu(used=1, tags=("app=online",)), SHARE, {APP: "offline"}, "spread", "1/1 CardAppClassMismatch"),
        (
            sgpu(used=1, tags=("app=offline",)),
            SHARE,
            {QOS: "best-effort"},
            "spread",
            "1/1 CardAppClassMismatch",
        ),
        (
            sgpu(used=1, tags=("qos=fixed-share",)),
            SHARE,
            {QOS: "best-effort"},
            "spread",
            "1/1 CardQosPolicyMismatch",
        ),
        (
            sgpu(used=1, tags=("app=online",), custom={"QosPolicy": "burst-share"}),
            SHARE,
            {APP: "online"},
            "spread",
            "",
        ),
        (sgpu(), SHARE, {"metax-tech.com/use-gpuuuid": "GPU-9"}, "spread", "1/1 CardUuidMismatch"),
        (sgpu(used=16, tags=("qos=",) * 16), SHARE, {}, "spread", "1/1 CardTimeSlicingExhausted"),
        (sgpu(used=1, tags=("qos=",)), SHARE, {}, "mutex", "1/1 ExclusiveDeviceAllocateConflict"),
        (sgpu(used=1, usedmem=30000, tags=("qos=",)), SHARE, {}, "spread", "1/1 CardInsufficientMemory"),
        (sgpu(used=1, usedcores=80, tags=("qos=",)), SHARE, {}, "spread", "1/1 CardInsufficientCore"),
        (
            sgpu(used=1, usedcores=0, tags=("qos=",)),
            DeviceRequest(1, "Metax-SGPU", 4096, 0, 100),
            {},
            "spread",
            "1/1 ExclusiveDeviceAllocateConflict",
        ),
        (
            sgpu(used=1, usedcores=100, tags=("qos=",)),
            DeviceRequest(1, "Metax-SGPU", 4096, 0, 0),
            {},
            "spread",
            "1/1 CardComputeUnitsExhausted",
        ),
        (sgpu(used=1, usedcores=90, tags=("app=online",)), SHARE, {APP: "online"}, "spread", ""),
    ],
    ids=[
        "1 type first",
        "2 CardUnhealthy (§3.5 #1)",
        "3 online pod on a device of plain pods",
        "3 offline pod never joins an online one",
        "3 plain pod on a device of offline pods",
        "4 QoS of the holders",
        "4 online pods skip the QoS check",
        "5 UUID",
        "6 slots",
        "7 mutex",
        "8 memory",
        "9 cores",
        "9 exclusive",
        "9 compute exhausted",
        "9 online pods skip the core checks",
    ],
)
def test_sgpu_fit_reasons(
    device: Any, request_: DeviceRequest, annotations: dict[str, str], policy: str, reason: str
) -> None:
    outcome = SGPU.fit([device], request_, fit_ctx(annotations, policy))
    assert outcome.ok == (reason == "") and outcome.reason == reason


@pytest.mark.parametrize(
    ("device", "annotations", "ok"),
    [
        (sgpu(used=1, custom={"QosPolicy": "fixed-share"}), {QOS: "best-effort"}, False),
        (sgpu(used=1, custom={"QosPolicy": "fixed-share"}), {QOS: "fixed-share"}, True),
        (sgpu(used=1, custom={"QosPolicy": ""}), {QOS: "burst-share"}, True),
        (sgpu(used=0, custom={"QosPolicy": "fixed-share"}), {QOS: "best-effort"}, True),
        (sgpu(used=1, tags=("qos=",)), {QOS: "best-effort"}, True),
    ],
    ids=[
        "§2.5 4 no holder tags: the node's report",
        "report equal",
        "report unset",
        "idle device: any QoS",
        "holder without QoS",
    ],
)
def test_sgpu_qos(device: Any, annotations: dict[str, str], ok: bool) -> None:
    assert SGPU.fit([device], SHARE, fit_ctx(annotations)).ok == ok


def test_sgpu_qos_of_an_exclusive_request_is_not_checked() -> None:
    device = sgpu(used=1, tags=("qos=fixed-share",))
    outcome = SGPU.fit([device], DeviceRequest(1, "Metax-SGPU", 0, 100, 100), fit_ctx({QOS: "best-effort"}))
    assert outcome.reason == "1/1 ExclusiveDeviceAllocateConflict"  # past the QoS check (§2.5 4)


def test_sgpu_own_earlier_container_counts_as_a_holder() -> None:
    """A device this pod's earlier container took answers to the pod's QoS, not to the node's report."""
    device = sgpu(used=1, usedcores=30, usedmem=4096, custom={"QosPolicy": "fixed-share"})
    earlier = ((ContainerDevice("GPU-0", "Metax-SGPU", 4096, 30),),)
    assert SGPU.fit([device], SHARE, fit_ctx({QOS: "best-effort"}, allocated=earlier)).ok


def test_sgpu_insufficient_candidates() -> None:
    devices = [sgpu("GPU-0", 0), sgpu("GPU-1", 1, health=False)]
    outcome = SGPU.fit(devices, DeviceRequest(2, "Metax-SGPU", 4096, 0, 30), fit_ctx())
    assert outcome.reason == "1/2 AllocatedCardsInsufficientRequest, 1/2 CardUnhealthy"


def test_sgpu_online_pods_take_no_cores_and_prefer_quiet_devices() -> None:
    """§2.5 selection for online pods: devices of only offline tasks last, then fewer online tasks."""
    devices = [
        sgpu("busy", 0, used=2, tags=("app=online", "app=online")),
        sgpu("offline-only", 1, used=1, tags=("app=offline",)),
        sgpu("one", 2, used=1, tags=("app=online",)),
    ]
    outcome = SGPU.fit(devices, SHARE, fit_ctx({APP: "online"}))
    assert [(d.uuid, d.usedcores) for d in outcome.devices] == [("one", 0)]


def test_sgpu_exclusive_requests_prefer_one_link_zone() -> None:
    """§2.5 prioritizeExclusiveDevices: the smallest MetaLink zone that holds the request."""
    zones = {"a": 1, "b": 2, "c": 2, "d": 1, "e": 1, "f": 0}
    devices = [sgpu(u, i, custom={"LinkZone": z}) for i, (u, z) in enumerate(zones.items())]
    two = SGPU.fit(devices, DeviceRequest(2, "Metax-SGPU", 0, 100, 100), fit_ctx())
    assert [d.uuid for d in two.devices] == ["c", "b"]  # zone 2 (two devices) before zone 1 (three)
    three = SGPU.fit(devices, DeviceRequest(3, "Metax-SGPU", 0, 100, 100), fit_ctx())
    assert [d.uuid for d in three.devices] == ["e", "d", "a"]
    five = SGPU.fit(devices, DeviceRequest(5, "Metax-SGPU", 0, 100, 100), fit_ctx())
    assert [d.uuid for d in five.devices] == ["c", "b", "e", "d", "a"]  # across zones, smallest first
    shared = SGPU.fit(devices, DeviceRequest(2, "Metax-SGPU", 0, 100, 30), fit_ctx())
    assert [d.uuid for d in shared.devices] == ["f", "e"]  # not exclusive: try order


# --- sGPU: node score (§2.5 ScoreNode, policy-neutral) ---------------------------------------------------


def _sgpu_score(
    previous: list[Any], chosen: list[ContainerDevice], policy: str, annotations: dict[str, str], aware: bool
) -> float:
    vendor = MetaxSgpu(MetaxConfig(sgpu_topology_aware=aware))
    return vendor.score_node(
        ScoreContext(NodeDevices("n1", ()), previous, (tuple(chosen),), policy, annotations)
    )


def test_sgpu_online_score() -> None:
    """-100 per offline task on devices of only offline tasks, else -20 per online and -2 per offline."""
    previous = [
        sgpu("a", 0, used=2, tags=("app=offline", "app=offline")),
        sgpu("b", 1, used=3, tags=("app=offline", "app=online", "app=online")),
    ]
    chosen = [ContainerDevice("a", "Metax-SGPU", 0, 0), ContainerDevice("b", "Metax-SGPU", 0, 0)]
    assert _sgpu_score(previous, chosen, "binpack", {APP: "online"}, False) == 10000 * (-200 - 42)
    assert _sgpu_score(previous, chosen, "spread", {APP: "online"}, False) == -10000 * (-200 - 42)


def test_sgpu_exclusive_topology_score() -> None:
    """10 x links among the pod's exclusive devices minus the links among idle devices it breaks."""
    previous = [
        sgpu(u, i, custom={"LinkZone": z})
        for i, (u, z) in enumerate({"a": 1, "b": 1, "c": 1, "d": 2}.items())
    ]
    chosen = [ContainerDevice("a", "Metax-SGPU", 0, 100), ContainerDevice("b", "Metax-SGPU", 0, 100)]
    # available a,b,c (zone 1: 3 links = 30) + d; allocated a,b: 10; rest c,d: 0 -> 10 x 10 - (30 - 10 - 0)
    assert _sgpu_score(previous, chosen, "binpack", {}, True) == 10000 * 80
    assert _sgpu_score(previous, chosen, "binpack", {TOPO: "false"}, True) == 0.0
    assert _sgpu_score(previous, chosen, "binpack", {TOPO: "true"}, False) == 10000 * 80
    assert _sgpu_score(previous, chosen, "binpack", {}, False) == 0.0  # config sgpuTopologyAware false
    shared = [ContainerDevice("a", "Metax-SGPU", 0, 30)]
    assert _sgpu_score(previous, shared, "binpack", {}, True) == 0.0


# --- sGPU: annotations, tags, quota (§2.5, §1.6) -----------------------------------------------------------


def test_sgpu_annotations_example() -> None:
    """§2.5 example: c0 one sGPU (4 GiB, 30 cores) on GPU-123, c1 none."""
    groups = ((ContainerDevice("GPU-123", "Metax-SGPU", 4096, 30),), ())
    result = SGPU.pod_annotations(groups, AnnotationContext("n1", {}, {}, 1, 1_700_000_000_123_456_789))
    assert result == {
        "hami.io/metax-sgpu-devices-to-allocate": "GPU-123,Metax-SGPU,4096,30:;;",
        "hami.io/metax-sgpu-devices-allocated": "GPU-123,Metax-SGPU,4096,30:;;",
        "metax-tech.com/gpu-devices-allocated": '[[{"uuid":"GPU-123","compute":30,"vRam":4096}],[]]',
        "metax-tech.com/predicate-time": "1700000000123456789",
    }
    online = SGPU.pod_annotations(((ContainerDevice("g", "Metax-SGPU", 0, 0),),), AnnotationContext("n1"))
    assert online["metax-tech.com/gpu-devices-allocated"] == '[[{"uuid":"g"}]]'  # omitempty


@pytest.mark.parametrize(
    ("annotations", "tags"),
    [
        ({}, ("qos=",)),
        ({QOS: "fixed-share"}, ("qos=fixed-share",)),
        ({APP: "online", QOS: "fixed-share"}, ("app=online",)),
        ({APP: "offline", QOS: "burst-share"}, ("app=offline", "qos=burst-share")),
    ],
)
def test_sgpu_usage_tags(annotations: dict[str, str], tags: tuple[str, ...]) -> None:
    assert SGPU.usage_tags(annotations) == tags


def test_sgpu_tags_survive_a_rebuild() -> None:
    """HAMi's QoS cache lives in one process (§3.5 #3); here the holders' QoS is rebuilt from the pods."""
    the_pod = pod(res(limits={VCOUNT: 1, VMEM: 4, VCORE: 30}), annotations={QOS: "fixed-share"})
    devices = {"Metax-SGPU": ((ContainerDevice("GPU-0", "Metax-SGPU", 4096, 30),),)}
    live = allocation_uses(devices, 0, vendor_tags({QOS: "fixed-share"}, (SGPU,)))
    the_pod["metadata"]["annotations"].update(allocation_annotations("n1", devices, (SGPU,), 1, the_pod))
    rebuilt = reservation_from_pod(the_pod, (SGPU,))
    assert rebuilt is not None and rebuilt.uses == live == {
        "GPU-0": DeviceUse(1, 4096, 30, tags=("qos=fixed-share",))
    }


def test_sgpu_quota_in_gib() -> None:
    """§1.6: memory factor 1024 (the limit is in GiB), cores in percent."""
    limits = build_view({"ns": {VMEM: 4, VCORE: 50}}, {})
    assert fits(limits, "ns", SGPU, 4096, 50) and not fits(limits, "ns", SGPU, 4097, 0)


def test_metax_nodes_through_decide() -> None:
    """Whole GPUs and sGPUs on one node: each request sees only its own devices."""
    node = NodeDevices(
        "n1",
        (
            info("n1-metax-0", 0, type="Metax-GPU", vendor="Metax-GPU", count=1, mem=65536),
            info(
                "GPU-0",
                1,
                type="Metax-SGPU",
                vendor="Metax-SGPU",
                count=16,
                mem=32768,
                custom={"LinkZone": 0},
            ),
        ),
    )
    the_pod = pod(res("a", limits={COUNT: 1}), res("b", limits={VCOUNT: 1, VMEM: 8}))
    ctx = context(the_pod, vendors=(GPU, SGPU))
    winner = decide(ctx, ["n1"], {"n1": node}, {}, (GPU, SGPU)).winner
    assert winner is not None and winner.devices is not None
    assert winner.devices["Metax-GPU"] == (
        (ContainerDevice("n1-metax-0", "Metax-GPU", 65536, 100, idx=0),),
        (),
    )
    assert winner.devices["Metax-SGPU"] == ((), (ContainerDevice("GPU-0", "Metax-SGPU", 8192, 100, idx=1),))
