"""GPU and node policies as sort orders (reference §3.3, §4.5, §4.6)."""

from __future__ import annotations

import pytest

from app.core.model import DeviceUsage
from app.core.policy import (
    ScoredDevice,
    go_parse_bool,
    gpu_policy,
    node_policy,
    node_sort_key,
    numa_bind,
    policy_contains,
    policy_names,
    sort_devices,
)


def _scored(index: int, numa: int, score: float, used: int) -> ScoredDevice:
    device = DeviceUsage(f"d{index}", index, used, 10, 0, 100, 100, 0, "hami-core", numa, "T", True)
    return ScoredDevice(device, score)


# index, numa, score, used
D = {
    0: (0, 0, 5.0, 1),
    1: (1, 1, 0.0, 0),
    2: (2, 0, 1.0, 2),
    3: (3, 1, 9.0, 0),
    4: (4, 0, 5.0, 0),
}
INPUT_ORDER = [4, 3, 2, 1, 0]  # not index order, so stability and the index tiebreak are distinguishable


@pytest.mark.parametrize(
    ("policy", "bind", "expected"),
    [
        ("spread", False, [3, 4, 0, 2, 1]),
        ("binpack", False, [1, 2, 4, 0, 3]),
        ("mutex", False, [2, 0, 4, 3, 1]),
        ("topology-aware", False, [3, 4, 0, 2, 1]),
        ("", False, [3, 4, 0, 2, 1]),
        ("unknown", False, [3, 4, 0, 2, 1]),
        ("binpack", True, [1, 3, 2, 4, 0]),
        ("spread", True, [4, 0, 2, 3, 1]),
        ("mutex", True, [2, 0, 4, 3, 1]),
        ("numa", False, [0, 2, 4, 1, 3]),
        ("numa", True, [0, 2, 4, 1, 3]),
        ("binpack,numa", False, [1, 2, 0, 4, 3]),
        (" binpack , numa ", False, [1, 2, 0, 4, 3]),
        ("numa,binpack", False, [2, 0, 4, 1, 3]),
        ("spread,numa", False, [3, 0, 4, 2, 1]),
        ("binpack,binpack", False, [1, 2, 0, 4, 3]),
        ("binpack,spread", False, [1, 2, 0, 4, 3]),
        ("mutex,topology-aware", False, [3, 0, 4, 2, 1]),
        ("binpack,mutex", False, [1, 2, 0, 4, 3]),
        ("binpack,numa", True, [2, 0, 4, 1, 3]),
        ("spread,binpack", True, [0, 4, 2, 3, 1]),
        ("mutex,topology-aware", True, [0, 4, 2, 3, 1]),
    ],
    ids=[
        "spread-lowest-score-tried-first",
        "binpack-highest-score-tried-first",
        "mutex-idle-last",
        "topology-aware-sorts-like-spread",
        "empty-sorts-like-spread",
        "unknown-sorts-like-spread",
        "numa-bind-binpack-higher-numa-first",
        "numa-bind-spread-lower-numa-first",
        "mutex-ignores-numa-bind",
        "numa-alone-is-a-chain",
        "numa-alone-with-bind",
        "chain-binpack-numa",
        "chain-trimmed",
        "chain-numa-binpack",
        "chain-spread-numa",
        "chain-deduplicated",
        "chain-first-key-decides",
        "chain-of-filters-falls-back-to-spread",
        "chain-mutex-is-a-filter",
        "numa-bind-forces-numa-first",
        "numa-bind-forces-numa-before-spread",
        "numa-bind-on-filter-chain",
    ],
)
def test_device_sort_orders(policy: str, bind: bool, expected: list[int]) -> None:
    devices = [_scored(*D[i]) for i in INPUT_ORDER]
    sort_devices(devices, policy, bind)
    assert [s.device.index for s in devices] == expected


def test_single_value_ties_keep_the_previous_order() -> None:
    devices = [_scored(i, 0, 1.0, 0) for i in (2, 0, 1)]
    sort_devices(devices, "spread", False)
    assert [s.device.index for s in devices] == [2, 0, 1]
    sort_devices(devices, "spread,numa", False)
    assert [s.device.index for s in devices] == [0, 1, 2]


@pytest.mark.parametrize(
    ("policy", "name", "expected"),
    [
        ("mutex", "mutex", True),
        ("binpack,mutex", "mutex", True),
        (" mutex , binpack", "mutex", True),
        ("mutexx", "mutex", False),
        ("binpack", "mutex", False),
        ("topology-aware,numa", "topology-aware", True),
        ("topology", "topology-aware", False),
        ("", "spread", False),
    ],
    ids=[
        "exact",
        "in-chain",
        "trimmed",
        "longer-name",
        "absent",
        "topology-in-chain",
        "prefix-only",
        "empty",
    ],
)
def test_policy_contains_is_a_list_membership(policy: str, name: str, expected: bool) -> None:
    assert policy_contains(policy, name) is expected


def test_policy_names() -> None:
    assert policy_names(" binpack ,numa,, ") == ["binpack", "numa", "", ""]


@pytest.mark.parametrize(
    ("annotations", "expected_gpu", "expected_node"),
    [
        ({}, "spread", "binpack"),
        ({"hami.io/gpu-scheduler-policy": "binpack,numa"}, "binpack,numa", "binpack"),
        ({"hami.io/node-scheduler-policy": "spread"}, "spread", "spread"),
        ({"hami.io/gpu-scheduler-policy": " mutex "}, " mutex ", "binpack"),
        ({"hami.io/gpu-scheduler-policy": "", "hami.io/node-scheduler-policy": ""}, "", ""),
    ],
    ids=["defaults", "gpu-chain-verbatim", "node-override", "gpu-value-verbatim", "empty-overrides"],
)
def test_policy_annotations(annotations: dict[str, str], expected_gpu: str, expected_node: str) -> None:
    assert gpu_policy(annotations, "spread") == expected_gpu
    assert node_policy(annotations, "binpack") == expected_node


def test_an_empty_annotation_means_spread_for_gpus_and_binpack_for_nodes_whatever_the_defaults() -> None:
    """HAMi: a present annotation replaces the default, an empty one too (`if value, ok := ...; ok`)."""
    empty = {"hami.io/gpu-scheduler-policy": "", "hami.io/node-scheduler-policy": ""}
    devices = [_scored(*D[i]) for i in INPUT_ORDER]
    sort_devices(devices, gpu_policy(empty, "binpack"), False)
    spread = [_scored(*D[i]) for i in INPUT_ORDER]
    sort_devices(spread, "spread", False)
    assert [d.device.index for d in devices] == [d.device.index for d in spread]
    scores = {"a": 1.0, "b": 2.0, "c": 3.0}
    assert sorted(scores, key=lambda n: node_sort_key(node_policy(empty, "spread"))(scores[n])) == [
        "a",
        "b",
        "c",
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1", True),
        ("t", True),
        ("T", True),
        ("TRUE", True),
        ("true", True),
        ("True", True),
        ("0", False),
        ("f", False),
        ("F", False),
        ("FALSE", False),
        ("false", False),
        ("False", False),
        ("tRUE", None),
        ("yes", None),
        ("on", None),
        (" true", None),
        ("", None),
    ],
    ids=lambda v: repr(v) if isinstance(v, str) else str(v),
)
def test_go_parse_bool_and_numa_bind(value: str, expected: bool | None) -> None:
    assert go_parse_bool(value) is expected
    assert numa_bind({"nvidia.com/numa-bind": value}) is (expected is True)


def test_numa_bind_absent() -> None:
    assert numa_bind({}) is False


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("binpack", ["a", "b", "c"]),
        ("spread", ["c", "b", "a"]),
        ("", ["a", "b", "c"]),
        ("Spread", ["a", "b", "c"]),
    ],
    ids=["binpack-fullest-last", "spread-emptiest-last", "empty-is-binpack", "case-sensitive"],
)
def test_node_sort_key(policy: str, expected: list[str]) -> None:
    scores = {"a": 1.0, "b": 2.0, "c": 3.0}
    assert sorted(scores, key=lambda n: node_sort_key(policy)(scores[n])) == expected
