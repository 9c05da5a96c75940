"""NVIDIA `Fit`: the per-device checks in HAMi's order and the reason strings (reference §3.3, §4.7)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import pytest

from app.core.model import PERCENT_UNSET, ContainerDevice, DeviceInfo, DeviceRequest, DeviceUsage, NodeDevices
from app.core.vendor import FitContext, FitOutcome
from app.devices.nvidia.fit import fit, mode_allowed, type_allowed, uuid_allowed

T4 = "NVIDIA-Tesla T4"


def dev(
    uuid: str = "GPU-A",
    index: int = 0,
    *,
    used: int = 0,
    count: int = 10,
    usedmem: int = 0,
    totalmem: int = 16384,
    usedcores: int = 0,
    totalcore: int = 100,
    mode: str = "hami-core",
    numa: int = 0,
    type: str = T4,
    health: bool = True,
) -> DeviceUsage:
    return DeviceUsage(
        uuid, index, used, count, usedmem, totalmem, totalcore, usedcores, mode, numa, type, health
    )


def req(
    nums: int = 1, memreq: int = 0, pct: int = PERCENT_UNSET, cores: int = 0, type: str = "NVIDIA"
) -> DeviceRequest:
    return DeviceRequest(nums, type, memreq, pct, cores)


def ctx(
    annotations: Mapping[str, str] | None = None,
    policy: str = "spread",
    cordoned: Sequence[str] = (),
    pairs: Mapping[str, Mapping[str, int]] | None = None,
    quota: Callable[[Sequence[ContainerDevice]], bool] | None = None,
) -> FitContext:
    devices = tuple(
        DeviceInfo(uuid, 0, 10, 1, 100, T4, 0, "hami-core", True, "NVIDIA", pair_scores=dict(scores))
        for uuid, scores in (pairs or {}).items()
    )
    node = NodeDevices("n1", devices, frozenset(cordoned))
    if quota is None:
        return FitContext(dict(annotations or {}), "default", policy, node)
    return FitContext(dict(annotations or {}), "default", policy, node, quota)


def no_quota(_devices: Sequence[ContainerDevice]) -> bool:
    return False


def one_card_quota(devices: Sequence[ContainerDevice]) -> bool:
    return len(devices) <= 1


def uuids(outcome: FitOutcome) -> list[str]:
    return [d.uuid for d in outcome.devices]


# --------------------------------------------------------------------------------------------------------
# One device, one check: each row makes exactly one check fire (later checks would fail too where noted).

CHECK_ORDER = [
    ("health", [dev(health=False, used=10)], req(), ctx(cordoned=["GPU-A"]), "1/1 CardNotHealth"),
    (
        "cordon-before-type",
        [dev()],
        req(),
        ctx({"nvidia.com/use-gputype": "A100"}, cordoned=["GPU-A"]),
        "1/1 CardCordoned",
    ),
    ("use-gputype", [dev()], req(), ctx({"nvidia.com/use-gputype": "A100"}), "1/1 CardTypeMismatch"),
    ("nouse-gputype", [dev()], req(), ctx({"nvidia.com/nouse-gputype": "t4"}), "1/1 CardTypeMismatch"),
    (
        "vgpu-mode",
        [dev(mode="hami-core")],
        req(),
        ctx({"nvidia.com/vgpu-mode": "mig"}),
        "1/1 CardTypeMismatch",
    ),
    ("request-type-not-nvidia", [dev()], req(type="OTHER"), ctx(), "1/1 CardTypeMismatch"),
    (
        "type-before-uuid",
        [dev()],
        req(),
        ctx({"nvidia.com/use-gputype": "A100", "nvidia.com/use-gpuuuid": "x"}),
        "1/1 CardTypeMismatch",
    ),
    ("use-gpuuuid", [dev(used=10)], req(), ctx({"nvidia.com/use-gpuuuid": "GPU-B"}), "1/1 CardUuidMismatch"),
    (
        "nouse-gpuuuid",
        [dev()],
        req(),
        ctx({"nvidia.com/nouse-gpuuuid": "GPU-B,GPU-A"}),
        "1/1 CardUuidMismatch",
    ),
    (
        "slots-before-memory",
        [dev(used=10, usedmem=16384)],
        req(memreq=1),
        ctx(),
        "1/1 CardTimeSlicingExhausted",
    ),
    ("slots-count-zero", [dev(count=0)], req(), ctx(), "1/1 CardTimeSlicingExhausted"),
    ("slots-over-committed", [dev(count=2, used=3)], req(), ctx(), "1/1 CardTimeSlicingExhausted"),
    (
        "mutex-before-quota",
        [dev(used=1)],
        req(memreq=1),
        ctx(policy="mutex", quota=no_quota),
        "1/1 ExclusiveDeviceAllocateConflict",
    ),
    (
        "mutex-in-chain",
        [dev(used=1)],
        req(),
        ctx(policy="binpack,mutex"),
        "1/1 ExclusiveDeviceAllocateConflict",
    ),
    (
        "quota-before-memory",
        [dev(usedmem=16384)],
        req(memreq=1),
        ctx(quota=no_quota),
        "1/1 ResourceQuotaNotFit",
    ),
    (
        "memory-before-cores",
        [dev(usedmem=16000, usedcores=100)],
        req(memreq=500, cores=10),
        ctx(),
        "1/1 CardInsufficientMemory",
    ),
    ("memory-percentage", [dev(usedmem=8193)], req(pct=50), ctx(), "1/1 CardInsufficientMemory"),
    ("memory-over-committed", [dev(usedmem=20000)], req(), ctx(), "1/1 CardInsufficientMemory"),
    ("cores-before-exclusive", [dev(used=1, usedcores=1)], req(cores=100), ctx(), "1/1 CardInsufficientCore"),
    ("cores", [dev(usedcores=60)], req(cores=50), ctx(), "1/1 CardInsufficientCore"),
    (
        "cores-clamped-to-100",
        [dev(totalcore=200, usedcores=150)],
        req(cores=150),
        ctx(),
        "1/1 CardInsufficientCore",
    ),
    ("exclusive", [dev(used=1)], req(cores=100), ctx(), "1/1 ExclusiveDeviceAllocateConflict"),
    ("exclusive-after-clamp", [dev(used=1)], req(cores=250), ctx(), "1/1 ExclusiveDeviceAllocateConflict"),
    ("compute-exhausted", [dev(used=1, usedcores=100)], req(cores=0), ctx(), "1/1 CardComputeUnitsExhausted"),
    (
        "compute-exhausted-scaled-card",
        [dev(used=1, usedcores=200, totalcore=200)],
        req(),
        ctx(),
        "1/1 CardComputeUnitsExhausted",
    ),
    ("mig-without-profiles", [dev(mode="mig")], req(memreq=1), ctx(), "1/1 CardMigTopologyInfeasible"),
]


@pytest.mark.parametrize(
    ("devices", "request_", "context", "reason"),
    [row[1:] for row in CHECK_ORDER],
    ids=[row[0] for row in CHECK_ORDER],
)
def test_each_check_and_its_order(
    devices: list[DeviceUsage], request_: DeviceRequest, context: FitContext, reason: str
) -> None:
    outcome = fit(devices, request_, context)
    assert not outcome.ok
    assert outcome.reason == reason
    assert outcome.devices == ()


@pytest.mark.parametrize(
    ("devices", "request_", "context", "reason", "partial"),
    [
        (
            [dev("GPU-A", 0), dev("GPU-B", 1), dev("GPU-C", 2), dev("GPU-D", 3)],
            req(2, memreq=1),
            ctx(quota=one_card_quota),
            "1/4 AllocatedCardsInsufficientRequest, 3/4 ResourceQuotaNotFit",
            ["GPU-D"],
        ),
        (
            [
                dev("GPU-A", 0, usedmem=16384),
                dev("GPU-B", 1, usedmem=16384),
                dev("GPU-C", 2),
                dev("GPU-D", 3),
            ],
            req(3, memreq=1),
            ctx(),
            "2/4 AllocatedCardsInsufficientRequest, 2/4 CardInsufficientMemory",
            ["GPU-D", "GPU-C"],
        ),
        (
            [
                dev("GPU-A", 0, health=False),
                dev("GPU-B", 1, used=10),
                dev("GPU-C", 2, usedcores=100),
                dev("GPU-D", 3, mode="mig"),
            ],
            req(1),
            ctx(),
            "1/4 CardComputeUnitsExhausted, 1/4 CardMigTopologyInfeasible, "
            "1/4 CardNotHealth, 1/4 CardTimeSlicingExhausted",
            [],
        ),
        (
            [dev(f"GPU-{i}", i, health=i not in (0, 6)) for i in range(12)],
            req(12),
            ctx(),
            "10/12 AllocatedCardsInsufficientRequest, 2/12 CardNotHealth",
            [f"GPU-{i}" for i in range(11, -1, -1) if i not in (0, 6)],
        ),
    ],
    ids=["spec-example", "allocated-counts-devices", "mixed-reasons-sorted", "string-sort-10-before-2"],
)
def test_failure_reason_strings(
    devices: list[DeviceUsage], request_: DeviceRequest, context: FitContext, reason: str, partial: list[str]
) -> None:
    outcome = fit(devices, request_, context)
    assert not outcome.ok
    assert outcome.reason == reason
    assert uuids(outcome) == partial  # HAMi returns the partial list too


def test_devices_are_tried_from_the_end() -> None:
    devices = [dev("GPU-A", 0), dev("GPU-B", 1), dev("GPU-C", 2)]
    assert uuids(fit(devices, req(1), ctx())) == ["GPU-C"]
    assert uuids(fit(devices, req(2), ctx())) == ["GPU-C", "GPU-B"]
    assert uuids(fit(devices, req(3), ctx())) == ["GPU-C", "GPU-B", "GPU-A"]


def test_allocation_fields() -> None:
    outcome = fit([dev("GPU-A", 7, totalmem=32768)], req(1, memreq=1000, cores=30), ctx())
    assert outcome.ok and outcome.reason == ""
    assert outcome.devices == (ContainerDevice("GPU-A", "NVIDIA", 1000, 30, idx=7),)


@pytest.mark.parametrize(
    ("device", "request_", "memory"),
    [
        (dev(totalmem=32768), req(pct=50), 16384),
        (dev(totalmem=24576), req(pct=33), 8110),
        (dev(totalmem=3), req(pct=50), 1),
        (dev(totalmem=32768), req(memreq=1000, pct=50), 1000),
        (dev(totalmem=32768), req(pct=100), 32768),
        # Go: int32(2147483647 * 50) wraps to -50, and -50 / 100 truncates to 0
        (dev(totalmem=2**31 - 1, usedmem=0), req(pct=50), 0),
    ],
    ids=["half", "integer-division", "tiny-card", "absolute-wins", "whole-card", "int32-wraparound"],
)
def test_memory_request_per_card(device: DeviceUsage, request_: DeviceRequest, memory: int) -> None:
    outcome = fit([device], request_, ctx())
    assert outcome.ok
    assert outcome.devices[0].usedmem == memory


def test_percentage_is_resolved_per_card() -> None:
    devices = [dev("GPU-A", 0, totalmem=16384), dev("GPU-B", 1, totalmem=40960)]
    outcome = fit(devices, req(2, pct=25), ctx())
    assert [(d.uuid, d.usedmem) for d in outcome.devices] == [("GPU-B", 10240), ("GPU-A", 4096)]


def test_core_clamp_is_sticky_and_recorded() -> None:
    devices = [dev("GPU-A", 0, totalcore=200), dev("GPU-B", 1, totalcore=200), dev("GPU-C", 2, health=False)]
    outcome = fit(devices, req(2, cores=180), ctx())
    assert outcome.ok
    assert [d.usedcores for d in outcome.devices] == [100, 100]


def test_exclusive_only_applies_to_cards_with_100_cores() -> None:
    assert fit([dev(used=1, totalcore=200)], req(cores=100), ctx()).ok
    assert fit([dev(used=0)], req(cores=100), ctx()).ok


def test_compute_exhausted_needs_zero_cores() -> None:
    assert fit([dev(totalcore=0)], req(cores=0), ctx()).ok
    assert not fit([dev(usedcores=100)], req(cores=0), ctx()).ok


def test_mutex_accepts_idle_cards() -> None:
    devices = [dev("GPU-A", 0), dev("GPU-B", 1, used=1)]
    outcome = fit(devices, req(1), ctx(policy="mutex"))
    assert uuids(outcome) == ["GPU-A"]
    # "mutexx" is not the mutex policy
    assert uuids(fit(devices, req(1), ctx(policy="mutexx"))) == ["GPU-B"]


def test_quota_callback_sees_the_devices_chosen_so_far() -> None:
    seen: list[list[str]] = []

    def spy(devices: Sequence[ContainerDevice]) -> bool:
        seen.append([d.uuid for d in devices])
        return True

    fit([dev("GPU-A", 0), dev("GPU-B", 1)], req(2, memreq=5, cores=7), ctx(quota=spy))
    assert seen == [["GPU-B"], ["GPU-B", "GPU-A"]]


# --------------------------------------------------------------------------------------------------------
# NUMA binding


def _numa(*numas: int) -> list[DeviceUsage]:
    return [dev(f"GPU-{i}", i, numa=n) for i, n in enumerate(numas)]


BIND = {"nvidia.com/numa-bind": "true"}


@pytest.mark.parametrize(
    ("devices", "nums", "annotations", "ok", "chosen", "reason"),
    [
        (_numa(0, 0, 1), 2, BIND, True, ["GPU-1", "GPU-0"], ""),
        (_numa(0, 1), 2, BIND, False, ["GPU-0"], "1/2 AllocatedCardsInsufficientRequest, 1/2 NumaNotFit"),
        (_numa(0, 1, 1), 3, BIND, False, ["GPU-0"], "1/3 AllocatedCardsInsufficientRequest, 2/3 NumaNotFit"),
        (
            _numa(0, 1, 1, 2),
            3,
            BIND,
            False,
            ["GPU-0"],
            "1/4 AllocatedCardsInsufficientRequest, 3/4 NumaNotFit",
        ),
        (_numa(0, 1), 2, {}, True, ["GPU-1", "GPU-0"], ""),
        (_numa(0, 1), 2, {"nvidia.com/numa-bind": "yes"}, True, ["GPU-1", "GPU-0"], ""),
        (_numa(1, 1), 2, BIND, True, ["GPU-1", "GPU-0"], ""),
    ],
    ids=[
        "run-in-second-numa-succeeds",
        "partial-run-counted",
        "partial-run-of-two-counts-two",
        "two-discarded-runs",
        "no-binding-crosses-numa",
        "not-a-go-bool-no-binding",
        "single-numa",
    ],
)
def test_numa_bind(
    devices: list[DeviceUsage],
    nums: int,
    annotations: dict[str, str],
    ok: bool,
    chosen: list[str],
    reason: str,
) -> None:
    outcome = fit(devices, req(nums), ctx(annotations))
    assert outcome.ok is ok
    assert uuids(outcome) == chosen
    assert outcome.reason == reason


def test_numa_change_is_noticed_before_the_uuid_check() -> None:
    devices = [
        dev("GPU-0", 0, numa=0),
        dev("GPU-1", 1, numa=0),
        dev("GPU-2", 2, numa=1),
        dev("GPU-3", 3, numa=1),
    ]
    annotations = {**BIND, "nvidia.com/nouse-gpuuuid": "GPU-2"}
    outcome = fit(devices, req(2), ctx(annotations))
    # GPU-3 alone on NUMA 1 (GPU-2 excluded): that run is discarded when GPU-1 starts NUMA 0
    assert outcome.ok and uuids(outcome) == ["GPU-1", "GPU-0"]
    failed = fit(devices, req(3), ctx(annotations))
    # sorted as strings: "1/4 ..." before "2/4 ..."
    assert failed.reason == "1/4 CardUuidMismatch, 1/4 NumaNotFit, 2/4 AllocatedCardsInsufficientRequest"


def test_numa_bind_with_topology_discards_partial_runs_silently() -> None:
    outcome = fit(_numa(0, 1), req(2), ctx(BIND, policy="topology-aware"))
    assert not outcome.ok
    assert outcome.reason == "1/2 AllocatedCardsInsufficientRequest"


# --------------------------------------------------------------------------------------------------------
# Topology-aware selection


PAIRS = {
    "GPU-0": {"GPU-1": 100, "GPU-2": 10, "GPU-3": 20},
    "GPU-1": {"GPU-0": 100, "GPU-2": 10, "GPU-3": 20},
    "GPU-2": {"GPU-0": 10, "GPU-1": 10, "GPU-3": 600},
    "GPU-3": {"GPU-0": 20, "GPU-1": 20, "GPU-2": 600},
}
FOUR = [dev(f"GPU-{i}", i) for i in range(4)]


@pytest.mark.parametrize(
    ("devices", "nums", "pairs", "chosen"),
    [
        (FOUR, 4, PAIRS, ["GPU-3", "GPU-2", "GPU-1", "GPU-0"]),
        (FOUR, 1, PAIRS, ["GPU-1"]),
        (FOUR, 2, PAIRS, ["GPU-3", "GPU-2"]),
        (FOUR, 3, PAIRS, ["GPU-3", "GPU-2", "GPU-1"]),
        (FOUR, 1, {}, ["GPU-3"]),
        (FOUR, 2, {}, ["GPU-3", "GPU-2"]),
        (FOUR, 2, {"GPU-1": {"GPU-0": 50}, "GPU-0": {"GPU-1": 0}}, ["GPU-1", "GPU-0"]),
        (FOUR, 2, {"GPU-0": {"GPU-1": 50}}, ["GPU-3", "GPU-2"]),
        (FOUR, 1, {"GPU-3": {"GPU-2": -1}}, ["GPU-3"]),
        (FOUR, 2, {f"GPU-{i}": {f"GPU-{j}": -1 for j in range(4)} for i in range(4)}, ["GPU-3", "GPU-2"]),
    ],
    ids=[
        "exact-count-in-trial-order",
        "single-card-worst-connected",
        "best-pair",
        "best-triple",
        "no-scores-first-found",
        "no-scores-first-combination",
        "scores-read-from-the-earlier-tried-card",
        "asymmetric-scores-other-direction-ignored",
        "negative-scores-single",
        "negative-scores-still-choose",
    ],
)
def test_topology(
    devices: list[DeviceUsage], nums: int, pairs: dict[str, dict[str, int]], chosen: list[str]
) -> None:
    outcome = fit(devices, req(nums), ctx(policy="topology-aware", pairs=pairs))
    assert outcome.ok
    assert uuids(outcome) == chosen


def test_topology_too_few_candidates() -> None:
    devices = [dev("GPU-0", 0), dev("GPU-1", 1, health=False)]
    outcome = fit(devices, req(2), ctx(policy="topology-aware"))
    assert outcome.reason == "1/2 AllocatedCardsInsufficientRequest, 1/2 CardNotHealth"


def test_topology_in_a_chain() -> None:
    outcome = fit(FOUR, req(1), ctx(policy="binpack,topology-aware", pairs=PAIRS))
    assert uuids(outcome) == ["GPU-1"]


# --------------------------------------------------------------------------------------------------------
# Selection annotations (§3.3)


@pytest.mark.parametrize(
    ("annotations", "device_type", "allowed"),
    [
        ({}, "NVIDIA A100-SXM4-40GB", True),
        ({"nvidia.com/use-gputype": "A100"}, "NVIDIA A100-SXM4-40GB", True),
        ({"nvidia.com/use-gputype": "A10"}, "NVIDIA A100-SXM4-40GB", True),
        ({"nvidia.com/use-gputype": "a100"}, "NVIDIA A100-SXM4-40GB", True),
        ({"nvidia.com/use-gputype": " V100 , A100 "}, "NVIDIA A100-SXM4-40GB", True),
        ({"nvidia.com/use-gputype": "V100"}, "NVIDIA A100-SXM4-40GB", False),
        ({"nvidia.com/use-gputype": ""}, "NVIDIA A100-SXM4-40GB", True),
        ({"nvidia.com/use-gputype": " , "}, "NVIDIA A100-SXM4-40GB", True),
        ({"nvidia.com/nouse-gputype": "A100"}, "NVIDIA A100-SXM4-40GB", False),
        ({"nvidia.com/nouse-gputype": "V100,"}, "NVIDIA A100-SXM4-40GB", True),
        ({"nvidia.com/nouse-gputype": ""}, "NVIDIA A100-SXM4-40GB", True),
        (
            {"nvidia.com/use-gputype": "A10", "nvidia.com/nouse-gputype": "A100"},
            "NVIDIA A100-SXM4-40GB",
            False,
        ),
        ({"nvidia.com/use-gputype": "A10", "nvidia.com/nouse-gputype": "A100"}, "NVIDIA A10", True),
        ({"nvidia.com/use-gputype": "Tesla V100-PCIE-32GB"}, "NVIDIA-Tesla V100-PCIE-32GB", True),
    ],
    ids=[
        "no-annotation",
        "substring",
        "substring-a10-selects-a100",
        "case-insensitive",
        "list-trimmed",
        "not-listed",
        "empty-is-no-constraint",
        "only-blanks-is-no-constraint",
        "nouse",
        "nouse-not-listed",
        "empty-nouse",
        "use-and-nouse",
        "use-and-nouse-exact-card",
        "full-name",
    ],
)
def test_type_allowed(annotations: dict[str, str], device_type: str, allowed: bool) -> None:
    assert type_allowed(annotations, device_type) is allowed


@pytest.mark.parametrize(
    ("annotations", "uuid", "allowed"),
    [
        ({}, "GPU-a", True),
        ({"nvidia.com/use-gpuuuid": "GPU-a"}, "GPU-a", True),
        ({"nvidia.com/use-gpuuuid": "GPU-b, GPU-a"}, "GPU-a", True),
        ({"nvidia.com/use-gpuuuid": "GPU-A"}, "GPU-a", False),
        ({"nvidia.com/use-gpuuuid": "GPU"}, "GPU-a", False),
        ({"nvidia.com/use-gpuuuid": ""}, "GPU-a", True),
        ({"nvidia.com/nouse-gpuuuid": "GPU-a"}, "GPU-a", False),
        ({"nvidia.com/nouse-gpuuuid": " GPU-a "}, "GPU-a", False),
        ({"nvidia.com/nouse-gpuuuid": "GPU-b"}, "GPU-a", True),
        ({"nvidia.com/use-gpuuuid": "GPU-a,GPU-b", "nvidia.com/nouse-gpuuuid": "GPU-a"}, "GPU-a", False),
        ({"nvidia.com/use-gpuuuid": "GPU-a,GPU-b", "nvidia.com/nouse-gpuuuid": "GPU-a"}, "GPU-b", True),
    ],
    ids=[
        "no-annotation",
        "listed",
        "list-trimmed",
        "exact-case",
        "no-substring",
        "empty-is-no-constraint",
        "excluded",
        "excluded-trimmed",
        "not-excluded",
        "use-and-nouse-both-apply",
        "use-and-nouse-other-card",
    ],
)
def test_uuid_allowed(annotations: dict[str, str], uuid: str, allowed: bool) -> None:
    assert uuid_allowed(annotations, uuid) is allowed


@pytest.mark.parametrize(
    ("annotations", "mode", "allowed"),
    [
        ({}, "mig", True),
        ({"nvidia.com/vgpu-mode": "hami-core"}, "hami-core", True),
        ({"nvidia.com/vgpu-mode": "hami-core"}, "mig", False),
        ({"nvidia.com/vgpu-mode": "hami-core,mps"}, "mps", True),
        ({"nvidia.com/vgpu-mode": "mig"}, "", True),
        ({"nvidia.com/vgpu-mode": ""}, "hami-core", False),
        ({"nvidia.com/vgpu-mode": "HAMI-CORE"}, "hami-core", False),
    ],
    ids=["absent", "same", "other", "list", "empty-device-mode", "empty-annotation", "case-sensitive"],
)
def test_mode_allowed(annotations: dict[str, str], mode: str, allowed: bool) -> None:
    assert mode_allowed(annotations, mode) is allowed
