"""What the node as it is before the pod tells about the pod (app/core/prefilter.py)."""

from __future__ import annotations

import pytest
from core_builders import context, ctr, pod

from app.core.model import DeviceRequest, QuotaEntry
from app.core.prefilter import failure_reason, quota_is_slack, steps
from app.devices.nvidia import Nvidia

NVIDIA = Nvidia()


def test_steps_follow_evaluation_order_and_mark_the_pre_pod_ones() -> None:
    the_pod = pod(
        ctr("sidecar"),
        ctr("main", gpu=2, mem=1000),
        ctr("second", gpu=1),
        init=[ctr("setup", gpu=1, mem=500), ctr("istio-init"), ctr("warm", gpu=1)],
    )
    found = [(s.position, s.key, s.request.nums, s.pristine) for s in steps(context(the_pod).requests)]
    # init containers each see the node before the pod; so does the first app container with requests;
    # later app containers see the pod's earlier allocations
    assert found == [
        (0, "NVIDIA", 1, True),
        (2, "NVIDIA", 1, True),
        (4, "NVIDIA", 2, True),
        (5, "NVIDIA", 1, False),
    ]


def test_failure_reason_counts_usable_devices_as_insufficient_request() -> None:
    counts = {"CardInsufficientMemory": 2, "CardNotHealth": 1}
    assert failure_reason(counts, 0, 3) == "1/3 CardNotHealth, 2/3 CardInsufficientMemory"
    assert failure_reason(counts, 1, 4) == (
        "1/4 AllocatedCardsInsufficientRequest, 1/4 CardNotHealth, 2/4 CardInsufficientMemory"
    )


def _view(limit: int, used: int = 0) -> dict[str, dict[str, QuotaEntry]]:
    return {"default": {"nvidia.com/gpumem": QuotaEntry(used, limit, True)}}


@pytest.mark.parametrize(
    ("policy", "limit", "slack"),
    [
        ("spread", 2 * 3000 + 1000, True),  # 2 GPUs x 3000 MiB + 1 GPU x 1000 MiB fit exactly
        ("spread", 2 * 3000 + 999, False),
        ("topology-aware", 2 * 3000 + 1000, False),  # topology-aware may gather every device of the node
        ("topology-aware", 8 * 3000 + 8 * 1000, True),
    ],
)
def test_quota_is_slack_when_the_largest_possible_take_fits(policy: str, limit: int, slack: bool) -> None:
    demands = [(DeviceRequest(2, "NVIDIA", 3000), 3000), (DeviceRequest(1, "NVIDIA", 1000), 1000)]
    assert quota_is_slack(_view(limit), "default", NVIDIA, policy, demands, 8) is slack


def test_quota_is_slack_without_limits_and_never_with_negative_memory() -> None:
    demands = [(DeviceRequest(1, "NVIDIA", 0, 50), 10**6)]
    assert quota_is_slack({}, "default", NVIDIA, "spread", demands, 8)
    assert not quota_is_slack({}, "default", NVIDIA, "spread", [(DeviceRequest(1, "NVIDIA"), -5)], 8)
