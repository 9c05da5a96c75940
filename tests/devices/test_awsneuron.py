"""AWS Neuron, byte-compatible with HAMi's `AWSNeuronDevices` (reference vendors §2.10, quirks §3.10)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from vendor_builders import dev, fit_ctx, res, view

from app.core.codec import CodecError
from app.core.health import Reported
from app.core.model import ContainerDevice, DeviceInfo, DeviceRequest, PodRequests
from app.core.quota import admission_excess, build_view, pod_quota_use, tracked_resources
from app.core.vendor import AdmissionError, AnnotationContext, InvalidRequest
from app.devices.awsneuron import AwsNeuron, AwsNeuronConfig, parse_awsneuron_config
from app.devices.awsneuron.fit import claim, popcount

AWS = AwsNeuron()
ALLOCATED = "hami.io/aws-neuron-devices-allocated"
NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
TRN1 = {"AWSNodeType": "trn1.32xlarge"}
INF2 = {"AWSNodeType": "inf2.48xlarge"}


def neuron(index: int, custom: dict[str, str] | None = None, **kw: Any) -> Any:
    """A 2-core device (trn1/inf2): count 2, core mask 3, no memory (V§2.10 Discovery)."""
    kw.setdefault("count", 2)
    kw.setdefault("totalcore", 3)
    kw.setdefault("totalmem", 0)
    kw.setdefault("type", "AWSNeuron")
    return dev(f"n1-AWSNeuron-{index}", index, vendor="AWSNeuron", custom=custom or TRN1, **kw)


def node(n: int, custom: dict[str, str] | None = None, **busy: dict[str, int]) -> list[Any]:
    return [neuron(i, custom, **busy.get(f"d{i}", {})) for i in range(n)]


WHOLE = DeviceRequest(1, "AWSNeuron", 0, 100, 2)  # device count request (marker 100)


def cores(nums: int, per: int) -> DeviceRequest:
    return DeviceRequest(nums, "AWSNeuron", 0, 0, per)


def devices(nums: int) -> DeviceRequest:
    return DeviceRequest(nums, "AWSNeuron", 0, 100, 2)


def test_keys_and_names() -> None:
    """V§1.2 key table: allocated key only, no lock, no handshake; V§1.6 quota on neuroncore only."""
    assert AWS.key == "AWSNeuron"
    assert AWS.allocated_annotation == ALLOCATED
    assert AWS.to_allocate_annotation == "" and AWS.handshake_annotation == ""
    assert AWS.lock is None and not AWS.scores_nodes
    assert (AWS.resources.count, AWS.resources.cores) == (
        "aws.amazon.com/neuron",
        "aws.amazon.com/neuroncore",
    )
    assert AWS.resources.memory == "" and AWS.memory_factor == 0
    assert tracked_resources([AWS]) == {"aws.amazon.com/neuroncore"}
    assert "node.kubernetes.io/instance-type" in AWS.reads.node_labels
    assert parse_awsneuron_config({"resourceCountName": "x/n"}) == AwsNeuronConfig("x/n")


# --- discovery (V§2.10) ---------------------------------------------------------------------------------


def test_discovery_trn1_example() -> None:
    """V§2.10: trn1 with 16 devices / 32 cores => Count 2, Devcore 3, Devmem 0, the instance type kept."""
    node_ = view(
        "ip-1",
        capacity={"aws.amazon.com/neuron": "16", "aws.amazon.com/neuroncore": "32"},
        labels={"node.kubernetes.io/instance-type": "trn1.32xlarge"},
    )
    assert AWS.registered(node_)
    found = AWS.discover(node_).devices
    assert len(found) == 16
    assert found[3] == DeviceInfo(
        "ip-1-AWSNeuron-3", 3, 2, 0, 3, "AWSNeuron", 0, "", True, "AWSNeuron", custom=TRN1
    )


def test_discovery_uses_each_nodes_own_cores() -> None:
    """V§3.10 #1 fixed: an inf1 node (4 cores per device) next to a trn1 node keeps its 4 cores."""
    inf1 = view("i", capacity={"aws.amazon.com/neuron": "4", "aws.amazon.com/neuroncore": "16"})
    trn1 = view("t", capacity={"aws.amazon.com/neuron": "16", "aws.amazon.com/neuroncore": "32"})
    assert AWS.discover(trn1).devices[0].devcore == 3
    assert (AWS.discover(inf1).devices[0].count, AWS.discover(inf1).devices[0].devcore) == (4, 15)
    no_label = AWS.discover(inf1).devices[0].custom
    assert no_label == {"AWSNodeType": ""}  # HAMi reads the missing label as ""


@pytest.mark.parametrize(
    ("capacity", "message"),
    [
        pytest.param({"aws.amazon.com/neuron": "0"}, "device not found aws.amazon.com/neuron", id="V§2.10 0"),
        pytest.param({}, "device not found aws.amazon.com/neuron", id="V§2.10 absent"),
        pytest.param(
            {"aws.amazon.com/neuron": "1", "aws.amazon.com/neuroncore": "64"},
            "at most 30",
            id="mask too wide",
        ),
    ],
)
def test_discovery_errors(capacity: dict[str, str], message: str) -> None:
    with pytest.raises(CodecError, match=message):
        AWS.discover(view(capacity=capacity))


def test_not_registered_without_the_capacity_and_always_healthy() -> None:
    assert not AWS.registered(view(capacity={"aws.amazon.com/neuron": "0"}))
    verdict = AWS.health(view(), Reported(), NOW)
    assert verdict.healthy and verdict.stamp is None  # V§1.10 (true, true)


# --- requests and webhook (V§2.10) ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("container", "expected"),
    [
        pytest.param(res(limits={"aws.amazon.com/neuron": 2}), devices(2), id="V§2.10 count path"),
        pytest.param(res(requests={"aws.amazon.com/neuron": 1}), devices(1), id="count in requests"),
        pytest.param(
            res(limits={"aws.amazon.com/neuroncore": 1}), cores(1, 1), id="V§2.10 1 core => {1,..,1}"
        ),
        pytest.param(res(limits={"aws.amazon.com/neuroncore": 2}), cores(1, 2), id="2 cores: one device"),
        pytest.param(res(limits={"aws.amazon.com/neuroncore": 8}), cores(4, 2), id="8 cores: 4 devices x 2"),
        pytest.param(
            res(limits={"aws.amazon.com/neuron": 1, "aws.amazon.com/neuroncore": 1}),
            devices(1),
            id="the count wins over cores",
        ),
        pytest.param(res(limits={"aws.amazon.com/neuron": 0}), None, id="count 0: no request"),
        pytest.param(res(limits={"nvidia.com/gpu": 1}), None, id="not Neuron"),
    ],
)
def test_container_request(container: dict[str, Any], expected: DeviceRequest | None) -> None:
    assert AWS.container_request(container) == expected


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        pytest.param(
            {"aws.amazon.com/neuron": "1.5"}, "aws.amazon.com/neuron must be an integer", id="V§2.10"
        ),
        pytest.param({"aws.amazon.com/neuron": -1}, "aws.amazon.com/neuron must be greater than 0", id="neg"),
        pytest.param(
            {"aws.amazon.com/neuron": 2**31},
            "aws.amazon.com/neuron must not exceed 2147483647",
            id="too many",
        ),
        pytest.param(
            {"aws.amazon.com/neuroncore": 3},
            "aws.amazon.com/neuroncore must be 1 or a multiple of 2, got 3",
            id="V§2.10 split rule",
        ),
        pytest.param({"aws.amazon.com/neuroncore": 0}, "must be greater than 0", id="0 cores"),
    ],
)
def test_refused_requests_and_webhook_errors(limits: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        AWS.container_request(res(limits=limits))
    with pytest.raises(AdmissionError, match=message):
        AWS.mutate_container(res(limits=limits), {})


def test_webhook_count_zero_is_refused() -> None:
    """V§2.10: the webhook refuses a count of 0 (`must be greater than 0`)."""
    with pytest.raises(AdmissionError, match="must be greater than 0"):
        AWS.mutate_container(res(limits={"aws.amazon.com/neuron": 0}), {})


@pytest.mark.parametrize(
    ("container", "expected"),
    [
        pytest.param(res(limits={"aws.amazon.com/neuron": 1}), True, id="count"),
        pytest.param(res(requests={"aws.amazon.com/neuroncore": 4}), True, id="cores in requests"),
        pytest.param(res(limits={"nvidia.com/gpu": 1}), False, id="not Neuron"),
    ],
)
def test_webhook_does_not_mutate(container: dict[str, Any], expected: bool) -> None:
    before = repr(container)
    assert AWS.mutate_container(container, {}) is expected
    assert repr(container) == before


# --- Fit, one device (V§2.10 Nums == 1) -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("used", "need", "width", "mask"),
    [
        pytest.param(0, 2, 2, 3, id="V§2.10 prior 0, need 2 => 3"),
        pytest.param(0, 1, 2, 1, id="V§2.10 prior 0, need 1 => 1"),
        pytest.param(1, 1, 2, 2, id="V§2.10 3 - prior (1) => 2"),
        pytest.param(2, 1, 2, 1, id="V§2.10 3 - prior (2) => 1"),
        pytest.param(5, 2, 4, 10, id="4-core device: the two lowest free bits"),
    ],
)
def test_claim(used: int, need: int, width: int, mask: int) -> None:
    assert claim(used, need, width) == mask
    assert popcount(15) == 4 and popcount(-1) == 0


def test_one_device_whole_takes_every_core_of_the_last_candidate() -> None:
    outcome = AWS.fit(node(3), WHOLE, fit_ctx())
    assert outcome.ok
    assert [(d.uuid, d.usedmem, d.usedcores, d.idx) for d in outcome.devices] == [("n1-AWSNeuron-2", 0, 3, 2)]


def test_one_core_takes_the_free_core_of_a_half_used_device() -> None:
    """V§2.10 example: 1 core on device Idx 1 with core 0 busy => mask 2."""
    outcome = AWS.fit(node(2, d1={"used": 1, "usedcores": 1}), cores(1, 1), fit_ctx())
    assert [(d.uuid, d.usedcores) for d in outcome.devices] == [("n1-AWSNeuron-1", 2)]


def test_whole_device_on_a_4_core_node_takes_4_cores() -> None:
    inf1 = [neuron(0, INF2, count=4, totalcore=15)]
    assert AWS.fit(inf1, WHOLE, fit_ctx()).devices[0].usedcores == 15


@pytest.mark.parametrize(
    ("device", "request_", "annotations", "policy", "reason"),
    [
        pytest.param(neuron(0, health=False), WHOLE, {}, "spread", "1/1 CardNotHealth", id="V§2.10 health"),
        pytest.param(
            neuron(0, type="Other"), WHOLE, {}, "spread", "1/1 CardTypeMismatch", id="V§2.10 Contains(Type)"
        ),
        pytest.param(
            neuron(0),
            WHOLE,
            {"aws.amazon.com/use-neuron-uuid": "x"},
            "spread",
            "1/1 CardUuidMismatch",
            id="use-neuron-uuid",
        ),
        pytest.param(
            neuron(0),
            WHOLE,
            {"aws.amazon.com/nouse-neuron-uuid": "n1-AWSNeuron-0"},
            "spread",
            "1/1 CardUuidMismatch",
            id="nouse-neuron-uuid",
        ),
        pytest.param(
            neuron(0, used=2, usedcores=3),
            cores(1, 1),
            {},
            "spread",
            "1/1 CardTimeSlicingExhausted",
            id="slots",
        ),
        pytest.param(
            neuron(0, used=1, usedcores=1),
            cores(1, 1),
            {},
            "mutex",
            "1/1 ExclusiveDeviceAllocateConflict",
            id="V§2.10 mutex",
        ),
        pytest.param(
            neuron(0, used=1, usedcores=1),
            WHOLE,
            {},
            "spread",
            "1/1 CardInsufficientCore",
            id="V§2.10 popcount",
        ),
    ],
)
def test_one_device_reasons(
    device: Any, request_: DeviceRequest, annotations: dict[str, str], policy: str, reason: str
) -> None:
    outcome = AWS.fit([device], request_, fit_ctx(annotations, policy))
    assert not outcome.ok and outcome.reason == reason


def test_one_device_failure_has_no_allocated_cards_reason() -> None:
    outcome = AWS.fit(node(2, d0={"health": False}, d1={"used": 1, "usedcores": 1}), WHOLE, fit_ctx())
    assert outcome.reason == "1/2 CardInsufficientCore, 1/2 CardNotHealth"
    assert AWS.fit([neuron(0)], DeviceRequest(1, "NVIDIA"), fit_ctx()).reason == "1/1 CardTypeMismatch"


# --- Fit, several devices (V§2.10 graphSelect, contiguous) ----------------------------------------------


def indexes(outcome: Any) -> list[int]:
    return [d.idx for d in outcome.devices]


@pytest.mark.parametrize(
    ("busy", "nums", "custom", "expected"),
    [
        pytest.param((), 4, TRN1, [0, 1, 2, 3], id="V§2.10 trn: the first aligned run of 4"),
        pytest.param((1,), 4, TRN1, [4, 5, 6, 7], id="V§2.10 trn: runs aligned at multiples of 4"),
        pytest.param((1,), 2, INF2, [2, 3], id="V§2.10 inf: any start, sliding by 1"),
        pytest.param((0, 3), 2, INF2, [1, 2], id="inf: the first free pair"),
        pytest.param((), 8, TRN1, [0, 1, 2, 3, 4, 5, 6, 7], id="trn: 8"),
        pytest.param((2, 9), 8, TRN1, None, id="no free aligned run of 8"),
        pytest.param((), 2, TRN1, None, id="V§3.10 #3 trn: 2 devices => NumaNotFit"),
        pytest.param((), 3, TRN1, None, id="V§3.10 #3 trn: 3 devices => NumaNotFit"),
        pytest.param((), 3, INF2, [0, 1, 2], id="inf: 3"),
    ],
)
def test_contiguous_runs(
    busy: tuple[int, ...], nums: int, custom: dict[str, str], expected: list[int] | None
) -> None:
    busy_map = {f"d{i}": {"used": 1, "usedcores": 1} for i in busy}
    candidates = node(16, custom, **busy_map)
    outcome = AWS.fit(candidates, devices(nums), fit_ctx())
    if expected is None:
        assert not outcome.ok and outcome.reason == "1/16 NumaNotFit"
    else:
        assert outcome.ok and indexes(outcome) == expected
        assert all(d.usedcores == 3 and d.usedmem == 0 for d in outcome.devices)  # Totalcore, Totalmem


def test_runs_are_of_device_indexes_not_list_positions() -> None:
    """V§3.10 #2 fixed: the policy sort put busy device 0 last; HAMi would take positions 0-3 = indexes
    1,2,3,0 (device 0 busy). Runs are checked by index, so 4-7 is chosen."""
    candidates = node(8, d0={"used": 1, "usedcores": 1})
    reordered = candidates[1:] + candidates[:1]
    assert indexes(AWS.fit(reordered, devices(4), fit_ctx())) == [4, 5, 6, 7]


def test_runs_respect_uuid_selectors_and_health() -> None:
    """Difference: HAMi's run skips UUID checks; a nouse'd or unhealthy device breaks a run here."""
    nouse = {"aws.amazon.com/nouse-neuron-uuid": "n1-AWSNeuron-1"}
    assert indexes(AWS.fit(node(8, INF2), devices(2), fit_ctx(nouse))) == [2, 3]
    assert indexes(AWS.fit(node(8, INF2, d0={"health": False}), devices(2), fit_ctx())) == [1, 2]


def test_core_requests_over_two_take_whole_devices() -> None:
    """V§2.10: 4 cores => 2 devices x 2 cores => the run path (inf2), whole devices (mask 3)."""
    outcome = AWS.fit(node(4, INF2), cores(2, 2), fit_ctx())
    assert indexes(outcome) == [0, 1] and [d.usedcores for d in outcome.devices] == [3, 3]


# --- annotations (V§2.10 PatchAnnotations) --------------------------------------------------------------


def pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": {"containers": list(containers), "initContainers": list(init)}}


def ctx(the_pod: dict[str, Any]) -> AnnotationContext:
    return AnnotationContext("n1", the_pod, {"hami.io/vgpu-node": "n1"}, 1700000000, 1700000000123456789)


def alloc(idx: int, mask: int) -> ContainerDevice:
    return ContainerDevice(f"n1-AWSNeuron-{idx}", "AWSNeuron", 0, mask, idx=idx, custom=(("cores", "2"),))


def test_annotations_for_whole_devices() -> None:
    """V§2.10 example (device_test.go:355): two whole devices Idx 0,1 => AWS_NEURON_IDS "0,1"."""
    groups = ((alloc(0, 3), alloc(1, 3)),)
    written = AWS.pod_annotations(groups, ctx(pod(res(limits={"aws.amazon.com/neuron": 2}))))
    assert written == {
        ALLOCATED: "n1-AWSNeuron-0,AWSNeuron,0,3:n1-AWSNeuron-1,AWSNeuron,0,3:;",
        "AWS_NEURON_IDS": "0,1",
        "NEURON_ALLOC_TIME": "1700000000123456789",
        "NEURON_ALLOCATED": "false",
        "aws.amazon.com/predicate-node": "n1",
    }


def test_annotations_for_one_core() -> None:
    """V§2.10 example: a 1-core request on device Idx 1 with mask 2 => AWS_NEURON_IDS "3"."""
    written = AWS.pod_annotations(((alloc(1, 2),),), ctx(pod(res(limits={"aws.amazon.com/neuroncore": 1}))))
    assert written["AWS_NEURON_IDS"] == "3"
    assert written["NEURON_RESOURCE_TYPE"] == "aws.amazon.com/neuroncore"
    assert written[ALLOCATED] == "n1-AWSNeuron-1,AWSNeuron,0,2:;"


def test_annotations_accumulate_over_containers() -> None:
    """V§2.10: one running list over all containers (init first); a container without devices adds
    nothing; a count in `requests` gives device indexes (V§3.10 #5 fixed)."""
    the_pod = pod(
        res("a", limits={"aws.amazon.com/neuroncore": 2}),
        res("b"),
        res("c", requests={"aws.amazon.com/neuron": 1}),
        init=(res("i", limits={"aws.amazon.com/neuron": 1}),),
    )
    groups = ((alloc(5, 3),), (alloc(0, 3),), (), (alloc(2, 3),))
    written = AWS.pod_annotations(groups, ctx(the_pod))
    assert written["AWS_NEURON_IDS"] == "5,0,1,2"
    assert written["NEURON_RESOURCE_TYPE"] == "aws.amazon.com/neuroncore"


def test_no_annotations_without_devices() -> None:
    assert AWS.pod_annotations(((),), ctx(pod(res()))) == {}
    keys = {key.name for key in AWS.pod_keys}
    assert keys == {
        ALLOCATED,
        "AWS_NEURON_IDS",
        "NEURON_ALLOC_TIME",
        "NEURON_RESOURCE_TYPE",
        "NEURON_ALLOCATED",
        "aws.amazon.com/predicate-node",
    }


def test_admission_quota_counts_neuroncores() -> None:
    """V§1.6: neuroncore quota at admission: cores x nums; a device request counts 2 cores per device."""
    view_ = build_view({"ns": {"aws.amazon.com/neuroncore": 4}}, {})
    assert admission_excess(PodRequests(({"AWSNeuron": cores(2, 2)},), 0), (AWS,), view_, "ns") is None
    assert admission_excess(PodRequests(({"AWSNeuron": devices(2)},), 0), (AWS,), view_, "ns") is None
    assert admission_excess(PodRequests(({"AWSNeuron": devices(3)},), 0), (AWS,), view_, "ns") is not None


def test_recorded_quota_counts_cores_not_masks() -> None:
    """V§3.10 #4 fixed: a whole 2-core device counts 2 cores, one core on bit 1 counts 1 (HAMi: 3 and 2),
    the same units the admission check sums."""
    collapsed = {"AWSNeuron": ((alloc(0, 3), alloc(1, 2)),)}
    assert pod_quota_use(collapsed, (AWS,)) == {"aws.amazon.com/neuroncore": 3}
