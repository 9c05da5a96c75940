"""app.core.why: one sentence with the amounts behind each reason key, in the vendor's units."""

from __future__ import annotations

import pytest

from app.core.inventory import decode_node
from app.core.model import PERCENT_UNSET, DeviceRequest, DeviceUse, NodeDevices
from app.core.why import Asked, counted, numbers
from sim.nodes.objects import build_cluster, node_object
from sim.nodes.vendors import parse_vendors
from sim.workload.report import VENDOR_BY_KEY, VENDORS


def node(kinds: str) -> NodeDevices:
    spec = build_cluster(1, seed=2, gpus_per_node=2, zones=1, vendors=parse_vendors(kinds))
    return decode_node(node_object(spec.nodes[0]), VENDORS)


def asked(key: str, nums: int = 1, mem: int = 0, pct: int = PERCENT_UNSET, cores: int = 0) -> Asked:
    return Asked("main", VENDOR_BY_KEY[key], DeviceRequest(nums, key, mem, pct, cores))


def test_counted_parts() -> None:
    assert counted("1/4 AllocatedCardsInsufficientRequest, 3/4 ResourceQuotaNotFit") == [
        ("AllocatedCardsInsufficientRequest", 1, 4),
        ("ResourceQuotaNotFit", 3, 4),
    ]
    assert counted("node unregistered") == [("node unregistered", 0, 0)]


@pytest.mark.parametrize(
    ("kinds", "use", "one", "reason", "sentences"),
    [
        pytest.param(
            "amd",
            {1: DeviceUse(1, 1000, 300)},
            asked("AMD", cores=50),
            "2/2 CardInsufficientCore",
            [
                "CardInsufficientCore: asks 50% on one device; the most free on any of its 2 devices is "
                + "304 CUs of 304 CUs"
            ],
            id="amd-asks-percent-holds-compute-units",
        ),
        pytest.param(
            "awsneuron",
            {i: DeviceUse(1, 0, 1) for i in range(6)},
            asked("AWSNeuron", cores=2),
            "6/6 CardInsufficientCore",
            [
                "CardInsufficientCore: asks 2 NeuronCores on one device; the most free on any of its 6 "
                + "devices is 1 of 2 cores"
            ],
            id="neuron-cores-are-bits",
        ),
        pytest.param(
            "nvidia",
            {0: DeviceUse(1, 1000, 10), 1: DeviceUse(2, 1000, 10)},
            asked("NVIDIA", cores=100),
            "2/2 ExclusiveDeviceAllocateConflict",
            [
                "ExclusiveDeviceAllocateConflict: asks a device of its own (whole device or mutex policy); "
                + "2 of 2 run tasks"
            ],
            id="exclusive",
        ),
        pytest.param(
            "nvidia",
            {0: DeviceUse(10, 1000, 10), 1: DeviceUse(10, 1000, 10)},
            asked("NVIDIA", mem=10),
            "2/2 CardTimeSlicingExhausted",
            ["CardTimeSlicingExhausted: 2 of 2 devices are full (10 tasks each)"],
            id="time-slicing",
        ),
        pytest.param(
            "nvidia",
            {},
            asked("NVIDIA"),
            "2/2 CardCordoned",
            ["CardCordoned: 2 of 2 devices are cordoned (the node's hami.io/device-cordon)"],
            id="cordoned",
        ),
        pytest.param(
            "nvidia",
            {},
            asked("NVIDIA", pct=50),
            "2/2 CardInsufficientMemory",
            [
                "CardInsufficientMemory: asks 50% of one device's memory (40960 MiB of 81920 MiB on the "
                + "device with the most free); the most free on any of its 2 devices is 81920 MiB"
            ],
            id="percentage-memory",
        ),
        pytest.param(
            "nvidia",
            {},
            asked("NVIDIA", nums=2),
            "1/2 AllocatedCardsInsufficientRequest, 1/2 CardNotFoundCustomFilterRule",
            [
                "AllocatedCardsInsufficientRequest: asks 2 devices; 1 of 2 fit",
                "CardNotFoundCustomFilterRule: 1 of 2 devices refused by NVIDIA's rule "
                + "CardNotFoundCustomFilterRule",
            ],
            id="fewer-and-a-vendor-rule",
        ),
    ],
)
def test_sentences(
    kinds: str, use: dict[int, DeviceUse], one: Asked, reason: str, sentences: list[str]
) -> None:
    the_node = node(kinds)
    ids = [d.id for d in the_node.devices if one.vendor.sees(d.type, d.vendor)]
    lines = numbers(reason, the_node, {ids[i]: u for i, u in use.items()}, [one], {}, {}, "ns")
    assert lines == sentences


def test_several_containers_are_named_and_other_vendors_counts_skipped() -> None:
    the_node = node("nvidia+hygon")
    lines = numbers(
        "2/2 CardInsufficientMemory",
        the_node,
        {},
        [
            asked("NVIDIA", mem=90000),
            Asked("side", VENDOR_BY_KEY["DCU"], DeviceRequest(1, "DCU", 90000, 101, 0)),
        ],
        {},
        {},
        "ns",
    )
    assert lines == [
        "container main: CardInsufficientMemory: asks 90000 MiB on one device; the most free on any of its 2 "
        "devices is 81920 MiB"
    ]  # the node's 4 DCUs are not the 2 devices this reason counts
