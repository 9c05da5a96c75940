"""Fitting a pod on one node: init/app phases, padding, quota inside Fit (reference §4.3, §4.4, §6.3)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from core_builders import NVIDIA, VENDORS, context, ctr, gpu, node, pod, run, run_scenario
from core_strategies import Scenario, scenarios
from hypothesis import given, settings

from app.core.codec import decode_pod_single_device, encode_pod_single_device
from app.core.decision import ASSIGNED_NODE, allocation_annotations
from app.core.fit import evaluate_node
from app.core.model import ContainerDevice, DeviceUse, NodeDevices, QuotaEntry, QuotaView
from app.core.policy import MUTEX, policy_contains
from app.core.reservations import reservation_from_pod
from app.core.usage import allocation_uses, collapse_pod, device_uses
from app.devices.nvidia import keys

SMALL = 10000  # MiB on the single-card node used below


def _one_card() -> tuple[NodeDevices, ...]:
    return (node("n1", gpu("GPU-A", 0, mem=SMALL)),)


def _encoded(decision_devices: object) -> str:
    assert isinstance(decision_devices, dict)
    return encode_pod_single_device(decision_devices["NVIDIA"])


def test_init_containers_are_fitted_independently_against_pre_pod_usage() -> None:
    # Each init container alone fits; together they would not: init containers run one at a time.
    the_pod = pod(ctr("app", gpu=1, mem=8000), init=[ctr("i0", gpu=1, mem=8000), ctr("i1", gpu=1, mem=8000)])
    winner = run(the_pod, _one_card()).winner
    assert winner is not None and winner.devices is not None
    assert _encoded(winner.devices) == "GPU-A,NVIDIA,8000,0:;GPU-A,NVIDIA,8000,0:;GPU-A,NVIDIA,8000,0:;"
    # what the pod holds: the init peak against the app sum, one device entry
    assert collapse_pod(winner.devices, 2) == {
        "NVIDIA": ((ContainerDevice("GPU-A", "NVIDIA", 8000, 0, slots=1),),)
    }


def test_init_containers_see_existing_usage() -> None:
    the_pod = pod(ctr("app", gpu=1, mem=1000), init=[ctr("i0", gpu=1, mem=8000)])
    decision = run(the_pod, _one_card(), {"n1": {"GPU-A": DeviceUse(1, 3000, 0)}})
    assert decision.winner is None
    assert decision.failed == {"n1": "1/1 CardInsufficientMemory"}


def test_app_containers_accumulate() -> None:
    the_pod = pod(ctr("a0", gpu=1, mem=6000), ctr("a1", gpu=1, mem=6000))
    decision = run(the_pod, _one_card())
    assert decision.winner is None
    assert decision.failed == {"n1": "1/1 CardInsufficientMemory"}


def test_app_containers_do_not_see_init_allocations() -> None:
    the_pod = pod(ctr("a0", gpu=1, mem=6000), ctr("a1", gpu=1, mem=4000), init=[ctr("i0", gpu=1, mem=10000)])
    winner = run(the_pod, _one_card()).winner
    assert winner is not None and winner.devices is not None
    assert _encoded(winner.devices) == "GPU-A,NVIDIA,10000,0:;GPU-A,NVIDIA,6000,0:;GPU-A,NVIDIA,4000,0:;"


def test_slots_accumulate_across_app_containers() -> None:
    nodes = (node("n1", gpu("GPU-A", 0, count=2)),)
    the_pod = pod(ctr("a0", gpu=1, mem=1), ctr("a1", gpu=1, mem=1), ctr("a2", gpu=1, mem=1))
    assert run(the_pod, nodes).failed == {"n1": "1/1 CardTimeSlicingExhausted"}
    assert run(pod(ctr("a0", gpu=1, mem=1), ctr("a1", gpu=1, mem=1)), nodes).winner is not None


def test_failing_init_container_fails_the_node_with_its_reason() -> None:
    the_pod = pod(ctr("app", gpu=1, mem=1), init=[ctr("i0", gpu=1, mem=SMALL + 1)])
    assert run(the_pod, _one_card()).failed == {"n1": "1/1 CardInsufficientMemory"}


@pytest.mark.parametrize(
    ("the_pod", "expected"),
    [
        (pod(ctr("app", gpu=1, mem=100), init=[ctr("istio-init")]), ";GPU-A,NVIDIA,100,0:;"),
        (pod(ctr("sidecar"), ctr("app", gpu=1, mem=100)), ";GPU-A,NVIDIA,100,0:;"),
        (pod(ctr("app", gpu=1, mem=100), ctr("sidecar")), "GPU-A,NVIDIA,100,0:;;"),
        (
            pod(ctr("c0"), ctr("c1", gpu=1, mem=5), ctr("c2"), init=[ctr("i0"), ctr("i1", gpu=1, mem=7)]),
            ";GPU-A,NVIDIA,7,0:;;GPU-A,NVIDIA,5,0:;;",
        ),
    ],
    ids=["gpu-less-init-container", "gpu-less-first-app-container", "gpu-less-last-app-container", "mixed"],
)
def test_gpu_less_containers_get_an_empty_group_with_model_types(
    the_pod: dict[str, Any], expected: str
) -> None:
    # Quirk #1, fixed: padded by vendor key, so entry i is container i even with real model strings.
    winner = run(the_pod, _one_card()).winner
    assert winner is not None and winner.devices is not None
    assert _encoded(winner.devices) == expected
    groups = decode_pod_single_device(expected)
    containers = len(the_pod["spec"]["containers"]) + len(the_pod["spec"].get("initContainers", []))
    assert len(groups) == containers + 1  # plus the decoder's trailing group


def test_node_score_uses_pre_pod_usage() -> None:
    the_pod = pod(ctr("a", gpu=1, mem=16000, cores=50), init=[ctr("i", gpu=1, mem=8000)])
    node_one = node("n1", gpu("GPU-A", 0), gpu("GPU-B", 1))
    verdict = evaluate_node(node_one, {"GPU-A": DeviceUse(1, 8000, 30)}, context(the_pod), {"NVIDIA": NVIDIA})
    assert verdict.fits
    assert verdict.score == pytest.approx(3.2207, abs=1e-4)


@pytest.mark.parametrize(
    ("nodes", "the_pod", "reason"),
    [
        ((node("n1", gpu("GPU-A", 0), gpu("GPU-B", 1)),), pod(ctr("a", gpu=3)), "NodeInsufficientDevice"),
        ((node("n1", gpu("GPU-A", 0, type="Tesla T4")),), pod(ctr("a", gpu=1)), "NodeInsufficientDevice"),
        (
            (node("n1", gpu("GPU-A", 0), gpu("GPU-B", 1, type="Tesla T4")),),
            pod(ctr("a", gpu=2)),
            "NodeInsufficientDevice",
        ),
        ((node("n1", gpu("GPU-A", 0, type="nvidia t4")),), pod(ctr("a", gpu=1, mem=1)), ""),
    ],
    ids=[
        "more-than-the-node-has",
        "type-without-vendor-word",
        "only-vendor-typed-devices-count",
        "vendor-word-case-insensitive",
    ],
)
def test_candidates_are_devices_whose_type_contains_the_vendor(
    nodes: tuple[NodeDevices, ...], the_pod: dict[str, Any], reason: str
) -> None:
    decision = run(the_pod, nodes)
    if reason:
        assert decision.failed == {"n1": reason}
    else:
        assert decision.winner is not None


def _quota(mem_limit: int | None = None, core_limit: int | None = None, used_mem: int = 0) -> QuotaView:
    entries = {}
    if mem_limit is not None:
        entries["nvidia.com/gpumem"] = QuotaEntry(used=used_mem, limit=mem_limit, limit_set=True)
    if core_limit is not None:
        entries["nvidia.com/gpucores"] = QuotaEntry(limit=core_limit, limit_set=True)
    return {"default": entries}


@pytest.mark.parametrize(
    ("the_pod", "quota", "reason"),
    [
        (
            pod(ctr("a", gpu=2, mem=6000)),
            _quota(10000),
            "1/2 AllocatedCardsInsufficientRequest, 1/2 ResourceQuotaNotFit",
        ),
        (pod(ctr("a", gpu=2, mem=5000)), _quota(10000), ""),
        (pod(ctr("a", gpu=1, mem=6000), ctr("b", gpu=1, mem=6000)), _quota(10000), "2/2 ResourceQuotaNotFit"),
        (pod(ctr("a", gpu=1, mem=6000)), _quota(10000, used_mem=5000), "2/2 ResourceQuotaNotFit"),
        (pod(ctr("a", gpu=1, mem=8000), init=[ctr("i", gpu=1, mem=8000)]), _quota(10000), ""),
        (
            pod(ctr("a", gpu=1, mem=1000), init=[ctr("i", gpu=1, mem=11000)]),
            _quota(10000),
            "2/2 ResourceQuotaNotFit",
        ),
        (
            pod(ctr("a", gpu=1, cores=60), ctr("b", gpu=1, cores=60)),
            _quota(core_limit=100),
            "2/2 ResourceQuotaNotFit",
        ),
        (pod(ctr("a", gpu=1, pct=50)), _quota(16383), "2/2 ResourceQuotaNotFit"),
        (pod(ctr("a", gpu=1, pct=50)), _quota(16384), ""),
        (pod(ctr("a", gpu=1, mem=1)), _quota(0), "2/2 ResourceQuotaNotFit"),
        (pod(ctr("a", gpu=1, mem=1)), {"other": _quota(0)["default"]}, ""),
    ],
    ids=[
        "second-card-over-limit",
        "both-cards-within-limit",
        "second-container-over-limit",
        "others-usage-counts",
        "init-peak-not-added-to-app",
        "init-peak-over-limit",
        "cores-limit",
        "percentage-resolved-per-card",
        "percentage-at-limit",
        "explicit-zero-blocks",
        "other-namespace-quota-ignored",
    ],
)
def test_quota_is_checked_inside_fit(the_pod: dict[str, Any], quota: QuotaView, reason: str) -> None:
    nodes = (node("n1", gpu("GPU-A", 0), gpu("GPU-B", 1)),)
    decision = run(the_pod, nodes, quota=quota)
    if reason:
        assert decision.failed == {"n1": reason}
    else:
        assert decision.winner is not None, decision.failed


def test_quota_memory_factor_scales_the_limit() -> None:
    from app.devices.nvidia import NvidiaConfig

    config = NvidiaConfig(memory_factor=4)
    the_pod = pod(ctr("a", gpu=1, mem=2500))  # 10000 MiB after the factor
    nodes = (node("n1", gpu("GPU-A", 0)),)
    assert run(the_pod, nodes, quota=_quota(2500), config=config).winner is not None
    assert run(the_pod, nodes, quota=_quota(2499), config=config).failed == {"n1": "1/1 ResourceQuotaNotFit"}


# --------------------------------------------------------------------------------------------------------
# Properties over random nodes, usage, pods and policies


def _check_capacity(scenario: Scenario) -> None:
    decision = run_scenario(scenario)
    ctx = context(scenario.pod, gpu_policy=scenario.gpu_policy)
    for verdict in decision.ranked:
        assert verdict.devices is not None
        the_node = next(n for n in scenario.nodes if n.name == verdict.node)
        info = {d.id: d for d in the_node.devices}
        existing = scenario.usage.get(verdict.node, {})
        groups = verdict.devices.get("NVIDIA", ())
        # one group per container (init first), each with exactly the requested number of devices
        assert len(groups) == len(ctx.requests.containers)
        for group, requests in zip(groups, ctx.requests.containers, strict=True):
            wanted = requests.get("NVIDIA")
            assert len(group) == (wanted.nums if wanted else 0)
            plain = [d.uuid for d in group if info[d.uuid].mode != "mig"]
            assert len(set(plain)) == len(plain)  # only a MIG GPU serves one container twice
            for d in group:
                device = info[d.uuid]
                assert device.health and d.uuid not in the_node.cordoned
                assert (d.mig is not None) == (device.mode == "mig")  # slices: tests/core/test_mig_fit.py
                assert "nvidia" in device.type.lower()
                assert 0 <= d.usedcores <= 100
                if policy_contains(scenario.gpu_policy, MUTEX):
                    assert existing.get(d.uuid, DeviceUse()).slots == 0
                if device.devcore == 100 and d.usedcores == 100:
                    assert existing.get(d.uuid, DeviceUse()).slots == 0
        uses = device_uses(collapse_pod(verdict.devices, ctx.requests.init_count))
        for uuid, use in uses.items():
            before = existing.get(uuid, DeviceUse())
            device = info[uuid]
            if device.mode == "mig":
                continue  # one pod's slices are limited by the placements only (quirk #12)
            assert before.slots + use.slots <= device.count
            assert before.mem + use.mem <= device.devmem
            assert before.cores + use.cores <= device.devcore


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_a_fit_never_exceeds_slots_memory_or_cores(scenario: Scenario) -> None:
    _check_capacity(scenario)


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_rebuilding_usage_from_the_annotation_equals_the_collapsed_allocation(scenario: Scenario) -> None:
    decision = run_scenario(scenario)
    winner = decision.winner
    if winner is None or winner.devices is None:
        return
    init_count = len(scenario.pod["spec"].get("initContainers", []))
    expected = collapse_pod(winner.devices, init_count)
    annotations = allocation_annotations(winner.node, winner.devices, VENDORS, 1755756039)
    placed = copy.deepcopy(scenario.pod)
    placed["metadata"]["annotations"].update(annotations)
    assert placed["metadata"]["annotations"][ASSIGNED_NODE] == winner.node
    assert annotations[keys.ALLOCATED] == annotations[keys.TO_ALLOCATE]
    reservation = reservation_from_pod(placed, VENDORS)
    assert reservation is not None
    assert reservation.node == winner.node
    assert reservation.devices == expected
    assert reservation.uses == allocation_uses(winner.devices, init_count)  # MIG slices included
