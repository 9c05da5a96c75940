"""The vendor seam carries every shape HAMi's vendors have (app/core/vendor.py, docs/vendors.md): a toy
vendor whose devices come from node capacity and labels, that scores nodes from the allocation, tags the
devices its pods hold and writes annotations that need pod and node context. The core must handle it with
no special case, and the service's fast path must still decide exactly like `decide`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson
import pytest
from core_builders import NVIDIA, context, gpu, node, pod

from app.core import health
from app.core.admission import scheduler_owned
from app.core.codec import CodecError
from app.core.decision import allocation_annotations, decide, stale_annotations
from app.core.health import Health, Reported
from app.core.inventory import NodeUnregistered, decode_node
from app.core.model import ContainerDevice, DeviceInfo, DeviceRequest, DeviceUsage, DeviceUse, PodSingleDevice
from app.core.reservations import reservation_from_pod, vendor_tags
from app.core.usage import allocation_uses
from app.core.vendor import (
    AnnotationContext,
    Discovery,
    FitContext,
    FitOutcome,
    LockSpec,
    NodeView,
    PodKey,
    ResourceNames,
    ScoreContext,
    Vendor,
)
from app.devices.common import template
from app.devices.common.base import VendorDefaults, device_lists
from app.devices.common.nodes import capacity_int64
from app.state.fastpath import FastPath
from app.state.ledger import BOUND, Entry
from app.state.snapshot import NodeRecord, Snapshot, encode_node
from app.state.snapshot import decode_node as decode_record
from app.state.usage import UsageView

TOY = "Toy"
CAPACITY = "example.com/toy"
CLASS = "example.com/class"
ALLOCATED, PROFILE = "example.com/toy-allocated", "example.com/toy-profile"


@dataclasses.dataclass(frozen=True)
class ToyVendor(VendorDefaults):
    """Capacity-derived (like Cambricon), scores nodes (like Ascend), tags devices (like Metax sGPU)."""

    @property
    def key(self) -> str:
        return TOY

    resources = ResourceNames(CAPACITY, "example.com/toy-mem")
    memory_factor = 1
    allocated_annotation = ALLOCATED
    to_allocate_annotation = ""
    handshake_annotation = ""
    source = f"capacity {CAPACITY}"
    lock = LockSpec("example.com/toy.lock", owned=False)
    pod_keys = (PodKey(ALLOCATED), PodKey(PROFILE))
    scores_nodes = True

    def registered(self, node: NodeView) -> bool:
        return CAPACITY in node.capacity

    def discover(self, node: NodeView) -> Discovery:
        cards = capacity_int64(node, CAPACITY) or 0
        if cards <= 0:
            raise CodecError(f"device not found {CAPACITY}")
        zone = node.labels.get("example.com/zone", "")
        devices = tuple(
            DeviceInfo(
                f"{node.name}-toy-{i}", i, 2, 1000, 100, "TOY", 0, "", True, TOY, custom={"zone": zone}
            )
            for i in range(cards)
        )
        return Discovery(devices, {"zone": zone})

    def health(self, node: NodeView, reported: Reported, now: datetime) -> Health:
        return health.ALWAYS_HEALTHY

    def container_request(self, container: Mapping[str, Any]) -> DeviceRequest | None:
        limits = (container.get("resources") or {}).get("limits") or {}
        nums = int(limits.get(CAPACITY, 0))
        return DeviceRequest(nums, TOY, 500, 0, 0) if nums else None

    def fit(self, devices: Sequence[DeviceUsage], request: DeviceRequest, ctx: FitContext) -> FitOutcome:
        rules = template.Rules(TOY, "", "", custom=lambda d, c: "class=batch" not in d.tags)
        return template.fit(devices, request, ctx, rules)

    def usage_tags(self, pod_annotations: Mapping[str, str]) -> tuple[str, ...]:
        value = pod_annotations.get(CLASS)
        return (f"class={value}",) if value else ()

    def score_node(self, ctx: ScoreContext) -> float:
        """7 per allocated device whose zone label matches the node's (a topology score)."""
        zone = ctx.node.info.get(TOY, {}).get("zone")
        by_id = {d.id: d for d in ctx.node.devices}
        return float(
            7 * sum(1 for group in ctx.allocation for d in group if by_id[d.uuid].custom["zone"] == zone)
        )

    def pod_annotations(
        self, devices: PodSingleDevice, ctx: AnnotationContext | None = None
    ) -> dict[str, str]:
        assert ctx is not None
        result = device_lists(devices, ALLOCATED)
        if result:
            result[PROFILE] = (
                f"{ctx.written['hami.io/vgpu-node']}/{len(ctx.pod['spec']['containers'])}/{ctx.now_nanos}"
            )
        return result

    def mutate_container(self, container: dict[str, Any], pod: dict[str, Any]) -> bool:
        return False


VENDORS: tuple[Vendor, ...] = (NVIDIA, ToyVendor())


def k8s_node(
    name: str, cards: Any, zone: str = "a", annotations: Mapping[str, str] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {"example.com/zone": zone},
            "annotations": dict(annotations or {}),
        },
        "status": {"capacity": {CAPACITY: cards}, "allocatable": {CAPACITY: cards}},
    }


def toy_pod(cards: int, *, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    return pod({"name": "c", "resources": {"limits": {CAPACITY: cards}}}, annotations=labels)


def test_devices_derived_from_capacity_and_labels() -> None:
    decoded = decode_node(k8s_node("n1", "2", "z"), VENDORS)
    assert [d.id for d in decoded.devices] == ["n1-toy-0", "n1-toy-1"]
    assert decoded.devices[0].custom == {"zone": "z"} and decoded.info == {TOY: {"zone": "z"}}
    with pytest.raises(NodeUnregistered, match=r"capacity example\.com/toy: device not found"):
        decode_node(k8s_node("n1", "0"), VENDORS)
    with pytest.raises(NodeUnregistered, match="not an integer"):
        decode_node(k8s_node("n1", "1.5"), VENDORS)
    with pytest.raises(NodeUnregistered, match="no device registration"):
        decode_node({"metadata": {"name": "cpu"}, "status": {"capacity": {"cpu": "8"}}}, VENDORS)


def test_custom_info_survives_the_snapshot() -> None:
    decoded = decode_node(k8s_node("n1", "1", "z"), VENDORS)
    record = decode_record("n1", 3, orjson.loads(orjson.dumps(encode_node(NodeRecord(decoded, 3)))))
    assert record.devices == decoded


def test_the_vendor_score_is_added_to_the_node_score() -> None:
    """Node b's base score is lower, but its zone matches: binpack picks the higher total (7 + base)."""
    a = decode_node(k8s_node("a", "2", "x"), VENDORS)
    a = dataclasses.replace(a, info={TOY: {"zone": "other"}})
    b = decode_node(k8s_node("b", "2", "y"), VENDORS)
    usage = {"a": {"a-toy-0": DeviceUse(1, 100, 10)}}
    ctx = context(toy_pod(1), vendors=VENDORS)
    decision = decide(ctx, ["a", "b"], {"a": a, "b": b}, usage, VENDORS)
    scores = {v.node: v.score for v in decision.ranked}
    assert scores["b"] == 7.0
    assert 0 < scores["a"] < 7.0
    assert decision.winner is not None and decision.winner.node == "b"


def test_fast_path_evaluates_every_node_for_a_scoring_vendor() -> None:
    nodes = {
        "a": dataclasses.replace(decode_node(k8s_node("a", "2", "x"), VENDORS), info={TOY: {"zone": "q"}}),
        "b": decode_node(k8s_node("b", "1", "y"), VENDORS),
        "c": node("c", gpu("GPU-c")),
    }
    entries = [Entry("o", "default", "o", "a", BOUND, {"a-toy-1": DeviceUse(1, 900, 0)})]
    usage = UsageView()
    usage.load(entries)
    snapshot = Snapshot(1, {n: NodeRecord(d, 1) for n, d in nodes.items()})
    for labels, cards in (({}, 1), ({}, 2), ({}, 3)):
        ctx = context(toy_pod(cards, labels=labels), vendors=VENDORS)
        expected = decide(ctx, ["a", "b", "c"], nodes, {"a": entries[0].uses}, VENDORS)
        choice = FastPath().choose(ctx, ["a", "b", "c"], snapshot, usage, VENDORS)
        assert choice.winner == expected.winner
        if expected.winner is None:
            assert choice.failed == expected.failed


def test_tags_reach_later_fits_and_rebuild_like_the_ledger() -> None:
    """The tags of a pod are on the devices it holds, equal whether computed live or rebuilt."""
    decoded = decode_node(k8s_node("n1", "1"), VENDORS)
    first = context(toy_pod(1, labels={CLASS: "batch"}), vendors=VENDORS)
    winner = decide(first, ["n1"], {"n1": decoded}, {}, VENDORS).winner
    assert winner is not None and winner.devices is not None
    live = allocation_uses(winner.devices, 0, vendor_tags(first.annotations, VENDORS))
    assert live["n1-toy-0"].tags == ("class=batch",)
    the_pod = toy_pod(1, labels={CLASS: "batch"})
    the_pod["metadata"]["annotations"].update(
        allocation_annotations("n1", winner.devices, VENDORS, 1, the_pod)
    )
    rebuilt = reservation_from_pod(the_pod, VENDORS)
    assert rebuilt is not None and rebuilt.uses == live
    # the custom rule reads the tags: a device held by a batch pod is refused
    second = decide(context(toy_pod(1), vendors=VENDORS), ["n1"], {"n1": decoded}, {"n1": live}, VENDORS)
    assert second.failed == {"n1": "1/1 CardNotFoundCustomFilterRule"}


def test_annotations_get_pod_and_node_context_and_stale_keys_go() -> None:
    the_pod = toy_pod(1)
    devices = {TOY: ((ContainerDevice("n1-toy-0", TOY, 500, 0),),)}
    written = allocation_annotations("n1", devices, VENDORS, 5, the_pod, 5_000_000_123)
    assert written[PROFILE] == "n1/1/5000000123"
    assert written[ALLOCATED] == "n1-toy-0,Toy,500,0:;"
    earlier = {PROFILE: "old", "hami.io/vgpu-mig-allocations": "[]", "other": "x"}
    nvidia_only = allocation_annotations(
        "n1", {"NVIDIA": ((ContainerDevice("G", "NVIDIA", 1, 1),),)}, VENDORS, 5
    )
    assert stale_annotations(earlier, nvidia_only, VENDORS) == ["hami.io/vgpu-mig-allocations", PROFILE]
    assert scheduler_owned(PROFILE, VENDORS) and not scheduler_owned("other", VENDORS)
    assert not scheduler_owned("", VENDORS)  # vendors without a to-allocate key name none
