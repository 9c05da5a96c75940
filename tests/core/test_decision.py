"""The filter decision across nodes, the pod annotations and the event texts (reference §4.1, §4.8–§4.10)."""

from __future__ import annotations

from typing import Any

import pytest
from core_builders import V100, VENDORS, context, ctr, gpu, node, pod, run

from app.core.codec import CodecError
from app.core.decision import (
    ASSIGNED_NODE,
    ASSIGNED_TIME,
    allocation_annotations,
    binding_success_event,
    decide,
    failure_events,
    rank,
    reason_keys,
    success_event,
    unregistered_reason,
)
from app.core.fit import NodeVerdict
from app.core.model import DeviceUse, NodeDevices
from app.core.score import format_score
from app.devices.nvidia import keys

WORKED_ANNOTATION = "GPU-B,NVIDIA,3000,30:;;GPU-B,NVIDIA,16384,0:GPU-A,NVIDIA,16384,0:;"
EXISTING = {"gpu-node-1": {"GPU-A": DeviceUse(1, 8000, 30)}}


def _worked_pod(**kwargs: Any) -> dict[str, Any]:
    return pod(
        ctr("c0", gpu=1, mem=3000, cores=30),
        ctr("c1"),
        ctr("c2", gpu=2, pct=50),
        **kwargs,
    )


@pytest.mark.parametrize("device_type", [V100, "NVIDIA"], ids=["production-model-type", "unit-test-type"])
def test_worked_example_annotations(device_type: str) -> None:
    nodes = (node("gpu-node-1", gpu("GPU-A", 0, type=device_type), gpu("GPU-B", 1, type=device_type)),)
    decision = run(_worked_pod(), nodes, EXISTING)
    winner = decision.winner
    assert winner is not None and winner.devices is not None
    annotations = allocation_annotations(winner.node, winner.devices, VENDORS, 1755756039)
    assert annotations == {
        "hami.io/vgpu-node": "gpu-node-1",
        "hami.io/vgpu-time": "1755756039",
        "hami.io/vgpu-devices-to-allocate": WORKED_ANNOTATION,
        "hami.io/vgpu-devices-allocated": WORKED_ANNOTATION,
    }
    assert (
        success_event(winner, 1, 0) == "find fit node(gpu-node-1), score 3.22, ranked 1 of 1 nodes"
        " (the 0 ranked ahead do not fit)"
    )


def test_worked_example_with_init_containers() -> None:
    # An init container takes GPU-B whole-card (spread: the idle card); it is fitted on pre-pod usage, so the
    # app containers still see GPU-B idle and are placed exactly as without it.
    nodes = (node("gpu-node-1", gpu("GPU-A", 0), gpu("GPU-B", 1)),)
    the_pod = _worked_pod(init=[ctr("setup", gpu=1, mem=20000), ctr("istio-init")])
    winner = run(the_pod, nodes, EXISTING).winner
    assert winner is not None and winner.devices is not None
    annotations = allocation_annotations(winner.node, winner.devices, VENDORS, 1)
    assert annotations[keys.TO_ALLOCATE] == "GPU-B,NVIDIA,20000,0:;;" + WORKED_ANNOTATION


def test_worked_example_collapsed_usage_and_quota() -> None:
    from app.core.quota import pod_quota_use
    from app.core.usage import collapse_pod, device_uses

    nodes = (node("gpu-node-1", gpu("GPU-A", 0), gpu("GPU-B", 1)),)
    winner = run(_worked_pod(), nodes, EXISTING).winner
    assert winner is not None and winner.devices is not None
    collapsed = collapse_pod(winner.devices, 0)
    assert device_uses(collapsed) == {"GPU-A": DeviceUse(1, 16384, 0), "GPU-B": DeviceUse(2, 19384, 30)}
    assert pod_quota_use(collapsed, VENDORS) == {"nvidia.com/gpumem": 35768, "nvidia.com/gpucores": 30}


def test_simulation_like_decision_ignores_usage() -> None:
    # §4.9: with Nodes given, usage is zero: the same pod lands as on an empty cluster.
    nodes = (node("gpu-node-1", gpu("GPU-A", 0), gpu("GPU-B", 1)),)
    winner = run(_worked_pod(), nodes, {}).winner
    assert winner is not None and winner.devices is not None
    assert winner.score == 0.0
    annotations = allocation_annotations(winner.node, winner.devices, VENDORS, 1)
    # c0 goes to the last registered of two equal cards (tried first), c2 takes both
    assert annotations[keys.ALLOCATED] == "GPU-B,NVIDIA,3000,30:;;GPU-A,NVIDIA,16384,0:GPU-B,NVIDIA,16384,0:;"


def _busy(name: str, used: int) -> tuple[NodeDevices, dict[str, dict[str, DeviceUse]]]:
    return node(name, gpu(f"{name}-A", 0)), {name: {f"{name}-A": DeviceUse(used, used * 1000, used * 10)}}


@pytest.mark.parametrize(
    ("node_policy", "annotation", "winner", "listed"),
    [
        ("binpack", None, "busy", "idle:0.00,mid:2.31,busy:4.61"),
        ("spread", None, "idle", "busy:4.61,mid:2.31,idle:0.00"),
        ("spread", "binpack", "busy", "idle:0.00,mid:2.31,busy:4.61"),
        ("binpack", "spread", "idle", "busy:4.61,mid:2.31,idle:0.00"),
        ("other", None, "busy", "idle:0.00,mid:2.31,busy:4.61"),
    ],
    ids=[
        "binpack-fullest",
        "spread-emptiest",
        "annotation-binpack",
        "annotation-spread",
        "unknown-is-binpack",
    ],
)
def test_node_policy_and_success_event(
    node_policy: str, annotation: str | None, winner: str, listed: str
) -> None:
    nodes, usage = [], {}
    for name, used in (("idle", 0), ("mid", 1), ("busy", 2)):
        n, u = _busy(name, used)
        nodes.append(n)
        usage.update(u)
    annotations = {"hami.io/node-scheduler-policy": annotation} if annotation else {}
    decision = run(
        pod(ctr("a", gpu=1, mem=1), annotations=annotations), nodes, usage, node_policy=node_policy
    )
    assert decision.winner is not None and decision.winner.node == winner
    assert ",".join(f"{v.node}:{format_score(v.score)}" for v in decision.ranked) == listed


def test_success_event_names_the_winner_its_score_and_rank() -> None:
    winner = NodeVerdict("c", True, 3.0)
    assert success_event(winner, 5000, 12) == (
        "find fit node(c), score 3.00, ranked 13 of 5000 nodes (the 12 ranked ahead do not fit)"
    )


@pytest.mark.parametrize(
    ("policy", "winner"),
    [("binpack", "n3"), ("spread", "n3")],
    ids=["binpack-tie-last-candidate", "spread-tie-last-candidate"],
)
def test_node_ties_go_to_the_last_candidate(policy: str, winner: str) -> None:
    nodes = [node(n, gpu(f"{n}-A", 0)) for n in ("n1", "n2", "n3")]
    decision = run(pod(ctr("a", gpu=1)), nodes, node_policy=policy)
    assert [v.node for v in decision.ranked] == ["n1", "n2", "n3"]
    assert decision.winner is not None and decision.winner.node == winner


def test_failures_and_unregistered_nodes() -> None:
    ctx = context(pod(ctr("a", gpu=1, mem=40000)))
    nodes = {"small": node("small", gpu("s-A", 0)), "two": node("two", gpu("t-A", 0), gpu("t-B", 1))}
    decision = decide(ctx, ["small", "ghost", "broken", "two"], nodes, {}, VENDORS, {"broken": "bad JSON"})
    assert decision.winner is None
    assert decision.failed == {
        "small": "1/1 CardInsufficientMemory",
        "ghost": "node unregistered",
        "broken": "node unregistered: bad JSON",
        "two": "2/2 CardInsufficientMemory",
    }
    assert failure_events(decision.failed, 4) == [
        "2 nodes CardInsufficientMemory(small,two)",
        "no available node, 4 nodes do not meet",
    ]


def test_failure_events_one_per_reason_key() -> None:
    failed = {
        "n3": "1/4 AllocatedCardsInsufficientRequest, 3/4 ResourceQuotaNotFit",
        "n1": "2/2 CardInsufficientMemory",
        "n2": "1/2 CardInsufficientMemory, 1/2 CardNotHealth",
        "n4": "NodeInsufficientDevice",
        "n5": "node unregistered",
        "n6": "Device type not found",
    }
    assert failure_events(failed, 6) == [
        "1 nodes AllocatedCardsInsufficientRequest(n3)",
        "2 nodes CardInsufficientMemory(n1,n2)",
        "1 nodes CardNotHealth(n2)",
        "1 nodes ResourceQuotaNotFit(n3)",
        "no available node, 6 nodes do not meet",
    ]


@pytest.mark.parametrize(
    ("reason", "keys_"),
    [
        (
            "1/4 AllocatedCardsInsufficientRequest, 3/4 ResourceQuotaNotFit",
            ["AllocatedCardsInsufficientRequest", "ResourceQuotaNotFit"],
        ),
        ("10/12 CardNotHealth", ["CardNotHealth"]),
        ("NodeInsufficientDevice", []),
        ("node unregistered: x", []),
        ('Device with UUID "u" not found on node n after Fit', []),
        ("", []),
    ],
    ids=["two-keys", "two-digit-counts", "no-count-prefix", "unregistered", "device-not-found", "empty"],
)
def test_reason_keys(reason: str, keys_: list[str]) -> None:
    assert reason_keys(reason) == keys_


def test_allocation_annotations_without_devices() -> None:
    assert allocation_annotations("n1", {}, VENDORS, 42) == {ASSIGNED_NODE: "n1", ASSIGNED_TIME: "42"}
    assert allocation_annotations("n1", {"NVIDIA": ()}, VENDORS, 42) == {
        ASSIGNED_NODE: "n1",
        ASSIGNED_TIME: "42",
    }


def test_pod_context_reads_policies_and_weights() -> None:
    annotations = {
        "hami.io/gpu-scheduler-policy": "binpack,numa",
        "hami.io/node-scheduler-policy": "spread",
        "nvidia.com/numa-bind": "True",
        "hami.io/device-scoring-weights": "slot=0,core=0,memory=1",
    }
    ctx = context(pod(ctr("a", gpu=1), annotations=annotations, namespace="team"))
    assert (ctx.gpu_policy, ctx.node_policy, ctx.numa_bind) == ("binpack,numa", "spread", True)
    assert (ctx.weights.slot, ctx.weights.core, ctx.weights.memory) == (0, 0, 1)
    assert ctx.namespace == "team" and ctx.name == "p"
    defaults = context(pod(ctr("a", gpu=1)), gpu_policy="mutex", node_policy="spread")
    assert (defaults.gpu_policy, defaults.node_policy, defaults.numa_bind) == ("mutex", "spread", False)


def test_pod_context_refuses_invalid_scoring_weights() -> None:
    with pytest.raises(CodecError, match="invalid device scoring weights"):
        context(pod(ctr("a", gpu=1), annotations={"hami.io/device-scoring-weights": "slot=1"}))


def test_pod_without_device_requests_is_not_a_hami_pod() -> None:
    assert not context(pod(ctr("a"), ctr("b", gpu=0))).requests.any


def test_rank_is_stable() -> None:
    verdicts = [NodeVerdict("a", True, 1.0), NodeVerdict("b", True, 1.0), NodeVerdict("c", True, 0.5)]
    assert [v.node for v in rank(verdicts, "binpack")] == ["c", "a", "b"]
    assert [v.node for v in rank(verdicts, "spread")] == ["a", "b", "c"]


def test_small_texts() -> None:
    assert unregistered_reason(None) == "node unregistered"
    assert unregistered_reason("") == "node unregistered"
    assert binding_success_event("n1", "default", "p") == "Successfully binding node [n1] to default/p"
