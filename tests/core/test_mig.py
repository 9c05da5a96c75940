"""MIG allocations in the core (reference §4.2, §4.4, §4.10, §12 #12): the `hami.io/vgpu-mig-allocations`
codec, a pod's MIG slices in its device uses, the fail-closed health rules of usage reconstruction,
`NodeInsufficientDevice`'s exception for MIG requests, and the round trip decision -> annotations ->
reservation."""

from __future__ import annotations

from typing import Any

import pytest
from core_builders import VENDORS, context, ctr, gpu, node, pod, run

from app.core import mig
from app.core.codec import CodecError
from app.core.decision import allocation_annotations
from app.core.fit import evaluate_node
from app.core.model import (
    ContainerDevice,
    DeviceUse,
    MigAssignment,
    MigInstance,
    MigPlacement,
    MigProfile,
    MigSlice,
    NodeDevices,
)
from app.core.reservations import reservation_from_pod
from app.core.usage import allocation_uses, device_uses, working_devices

A100 = "NVIDIA A100-SXM4-40GB"
PROFILES = (
    MigProfile("1g.5gb", 4864, 14, 1, tuple(MigPlacement(s, 1) for s in range(7))),
    MigProfile("3g.20gb", 20096, 42, 3, (MigPlacement(0, 4), MigPlacement(4, 4))),
    MigProfile("7g.40gb", 40192, 100, 7, (MigPlacement(0, 8),)),
)


def mig_gpu(uuid: str, index: int = 0, **kw: Any) -> Any:
    from dataclasses import replace

    return replace(gpu(uuid, index, count=7, mem=40960, type=A100, mode="mig", **kw), mig_profiles=PROFILES)


def allocation(
    container: int, device: int, uuid: str, profile: str, start: int, size: int, instance: Any = None
) -> mig.MigAllocation:
    return mig.MigAllocation(container, device, uuid, profile, MigPlacement(start, size), instance)


def piece(profile: str, start: int, size: int, instance: MigInstance | None = None) -> MigSlice:
    return MigSlice(profile, MigPlacement(start, size), instance)


# -- the annotation ---------------------------------------------------------------------------------------


SPEC_EXAMPLE = (
    '[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.5gb",'
    '"placement":{"start":6,"size":1}}]'
)


def test_encode_is_the_spec_example_byte_for_byte() -> None:
    assert mig.encode([allocation(0, 0, "GPU-a", "1g.5gb", 6, 1)]) == SPEC_EXAMPLE
    assert mig.encode([]) == "[]"


def test_encode_escapes_like_go_and_writes_the_runtime_identity_last() -> None:
    entry = allocation(1, 2, "GPU-<&>", "2g.10gb", 0, 2, MigInstance("MIG-x", 4, 0))
    assert mig.encode([entry]) == (
        '[{"containerIndex":1,"deviceIndex":2,"gpuUUID":"GPU-\\u003c\\u0026\\u003e","profile":"2g.10gb",'
        '"placement":{"start":0,"size":2},"migUUID":"MIG-x","gpuInstanceID":4,"computeInstanceID":0}]'
    )


def test_decode_round_trips_and_reads_the_device_plugins_fields() -> None:
    assert mig.decode(SPEC_EXAMPLE) == (allocation(0, 0, "GPU-a", "1g.5gb", 6, 1),)
    realized = (
        '[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.5gb",'
        '"placement":{"start":6,"size":1},"migUUID":"MIG-a","gpuInstanceID":7,"computeInstanceID":0,'
        '"futureField":{"x":1}}]'
    )
    assert mig.decode(realized) == (allocation(0, 0, "GPU-a", "1g.5gb", 6, 1, MigInstance("MIG-a", 7, 0)),)
    entries = (
        allocation(0, 0, "GPU-a", "1g.5gb", 6, 1),
        allocation(2, 1, "GPU-b", "3g.20gb", 4, 4, MigInstance("MIG-b", 1, 0)),
    )
    assert mig.decode(mig.encode(entries)) == entries


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", ()),
        ("null", ()),
        ("[]", ()),
        # Go's decoder matches keys case-insensitively (the last one wins)
        (
            '[{"CONTAINERINDEX":1,"deviceindex":0,"GpuUuid":"GPU-a","profile":"x","profile":"1g.5gb",'
            '"Placement":{"START":2,"Size":1}}]',
            (allocation(1, 0, "GPU-a", "1g.5gb", 2, 1),),
        ),
        # gpuInstanceID 0 is a value, not an absence (a pointer in Go)
        (
            '[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"G","profile":"p","placement":{"start":0,'
            '"size":1},"migUUID":"M","gpuInstanceID":0,"computeInstanceID":0}]',
            (allocation(0, 0, "G", "p", 0, 1, MigInstance("M", 0, 0)),),
        ),
    ],
    ids=["empty", "null", "no-entries", "case-insensitive", "zero-ids"],
)
def test_decode(value: str, expected: tuple[mig.MigAllocation, ...]) -> None:
    assert mig.decode(value) == expected


BASE = '"containerIndex":0,"deviceIndex":0,"gpuUUID":"G","profile":"p","placement":{"start":0,"size":1}'


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{", "invalid hami.io/vgpu-mig-allocations"),
        ("{}", "expected a JSON array"),
        ("[1]", "MIG allocation 0 is not an object"),
        ("[null]", "MIG allocation 0 is incomplete"),
        ('[{"migUUID":"M"}]', "MIG allocation 0 is incomplete"),  # checked before the runtime identity
        ('[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"G","profile":"p"}]', "allocation 0 is incomplete"),
        (f"[{{{BASE.replace('G', '')}}}]", "is incomplete"),
        (f"[{{{BASE.replace(':0,', ':-1,', 1)}}}]", "is incomplete"),
        (f"[{{{BASE}}},{{{BASE}}}]", "duplicate MIG allocation for container 0 device 0"),
        (f'[{{{BASE},"migUUID":"M"}}]', "MIG allocation 0 has partial runtime identity"),
        (f'[{{{BASE},"gpuInstanceID":1,"computeInstanceID":0}}]', "partial runtime identity"),
        (f'[{{{BASE},"gpuInstanceID":-1,"computeInstanceID":0,"migUUID":"M"}}]', "gpuInstanceID"),
        (f'[{{{BASE},"placement":[1]}}]', "placement is not an object"),
        ('[{"containerIndex":1.5}]', "containerIndex"),
    ],
)
def test_decode_errors(value: str, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        mig.decode(value)


def test_a_corrupt_annotation_counts_as_none() -> None:
    assert mig.pod_allocations({mig.ANNOTATION: "[1]"}) == ()
    assert mig.pod_allocations({}) == ()
    assert mig.pod_allocations({mig.ANNOTATION: SPEC_EXAMPLE}) == (allocation(0, 0, "GPU-a", "1g.5gb", 6, 1),)


def test_allocations_index_containers_and_devices() -> None:
    slice_a = ContainerDevice("GPU-a", "NVIDIA", 4864, 14, mig=MigAssignment("1g.5gb", MigPlacement(6, 1)))
    plain = ContainerDevice("GPU-b", "NVIDIA", 100, 0)
    empty = ContainerDevice("GPU-c", "NVIDIA", 1, 0, mig=MigAssignment("1g.5gb", MigPlacement(0, 0)))
    assert mig.allocations(((), (plain, slice_a, empty), (slice_a,))) == (
        allocation(1, 1, "GPU-a", "1g.5gb", 6, 1),
        allocation(2, 0, "GPU-a", "1g.5gb", 6, 1),
    )


# -- a pod's uses --------------------------------------------------------------------------------------------


def test_attach_marks_slots_with_slices_and_keeps_slices_of_gpus_not_held() -> None:
    uses = {"GPU-a": DeviceUse(2, 9728, 28), "GPU-b": DeviceUse(1, 100, 0)}
    entries = [
        allocation(0, 0, "GPU-a", "1g.5gb", 6, 1),
        allocation(0, 1, "GPU-a", "1g.5gb", 5, 1),
        allocation(1, 0, "GPU-z", "3g.20gb", 4, 4),
    ]
    assert mig.attach(uses, entries) == {
        "GPU-a": DeviceUse(2, 9728, 28, 2, (piece("1g.5gb", 5, 1), piece("1g.5gb", 6, 1))),
        "GPU-b": DeviceUse(1, 100, 0),
        "GPU-z": DeviceUse(mig=(piece("3g.20gb", 4, 4),)),
    }
    assert device_uses({}, []) == {}


def test_device_use_is_a_multiset_sum() -> None:
    a = DeviceUse(1, 10, 1, 1, (piece("1g.5gb", 6, 1),))
    b = DeviceUse(2, 20, 2, 0, (piece("1g.5gb", 0, 1), piece("1g.5gb", 6, 1)))  # sorted, as all uses are
    total = a.plus(b)
    assert total == DeviceUse(
        3, 30, 3, 1, (piece("1g.5gb", 0, 1), piece("1g.5gb", 6, 1), piece("1g.5gb", 6, 1))
    )
    assert total == b.plus(a)
    assert total.minus(a) == b and total.minus(b) == a
    assert total.minus(a).minus(b) == DeviceUse()


# -- usage reconstruction: HAMi's fail-closed rules ----------------------------------------------------------


def health(the_node: NodeDevices, use: dict[str, DeviceUse]) -> dict[str, bool]:
    return {d.id: d.health for d in working_devices(the_node, use)}


HELD = DeviceUse(1, 4864, 14, 1, (piece("1g.5gb", 6, 1),))  # a pod holding a slice of its GPU
BARE = DeviceUse(1, 4864, 14)  # a pod holding the GPU without any MIG allocation
STRAY = DeviceUse(mig=(piece("1g.5gb", 6, 1),))  # allocations of a GPU the pod's devices do not name
MIXED = node("n", mig_gpu("M0"), mig_gpu("M1", 1), gpu("H0", 2))


@pytest.mark.parametrize(
    ("use", "expected"),
    [
        ({}, {"M0": True, "M1": True, "H0": True}),
        ({"M0": HELD}, {"M0": True, "M1": True, "H0": True}),
        ({"M0": BARE}, {"M0": False, "M1": True, "H0": True}),  # used without an allocation
        ({"M0": HELD.plus(BARE)}, {"M0": False, "M1": True, "H0": True}),  # one of two pods lacks it
        ({"M0": STRAY}, {"M0": True, "M1": True, "H0": True}),  # leftovers stay in use
        ({"H0": HELD}, {"M0": True, "M1": True, "H0": False}),  # a MIG task on a hami-core GPU
        ({"H0": STRAY}, {"M0": True, "M1": True, "H0": False}),
        ({"H0": BARE}, {"M0": True, "M1": True, "H0": True}),
        ({"GPU-gone": STRAY}, {"M0": False, "M1": False, "H0": True}),  # unknown GPU: all MIG devices
        ({"GPU-gone": BARE}, {"M0": True, "M1": True, "H0": True}),  # unknown devices are ignored
    ],
    ids=[
        "idle",
        "slice-held",
        "mig-without-allocation",
        "one-pod-without-allocation",
        "leftover-on-mig",
        "mig-task-on-hami-core",
        "leftover-on-hami-core",
        "plain-use-of-hami-core",
        "leftover-on-unknown-gpu",
        "plain-use-of-unknown-gpu",
    ],
)
def test_health_rules(use: dict[str, DeviceUse], expected: dict[str, bool]) -> None:
    assert health(MIXED, use) == expected


def test_slices_in_use_reach_the_working_copy() -> None:
    working = working_devices(MIXED, {"M0": HELD.plus(STRAY.plus(DeviceUse(mig=(piece("3g.20gb", 0, 4),))))})
    assert working[0].mig_in_use == [MigPlacement(0, 4), MigPlacement(6, 1), MigPlacement(6, 1)]
    assert working[0].mig_profiles == PROFILES
    assert working[1].mig_in_use == []


def test_an_unhealthy_registration_stays_unhealthy() -> None:
    assert health(node("n", mig_gpu("M0", health=False)), {"M0": HELD}) == {"M0": False}


# -- NodeInsufficientDevice (§4.4) ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("devices", "annotations", "fits", "reason"),
    [
        ((mig_gpu("M0"),), {}, True, ""),  # three slices of one GPU
        ((mig_gpu("M0"),), {"nvidia.com/vgpu-mode": "mig"}, True, ""),
        ((mig_gpu("M0"),), {"nvidia.com/vgpu-mode": "hami-core"}, False, "NodeInsufficientDevice"),
        ((gpu("H0"),), {}, False, "NodeInsufficientDevice"),
        ((gpu("H0"), mig_gpu("M0", 1)), {}, True, ""),
    ],
    ids=["mig", "mig-mode", "other-mode", "no-mig-device", "mixed"],
)
def test_node_insufficient_device_exception(
    devices: tuple[Any, ...], annotations: dict[str, str], fits: bool, reason: str
) -> None:
    the_pod = pod(ctr("c", gpu=3, mem=1000), annotations=annotations)
    verdict = evaluate_node(node("n", *devices), {}, context(the_pod), {"NVIDIA": VENDORS[0]})
    assert verdict.fits is fits
    assert verdict.reason == reason


def test_a_gpu_without_free_slices_is_infeasible_and_the_reason_says_so() -> None:
    full = {"M0": DeviceUse(2, 40192, 84, 2, (piece("3g.20gb", 0, 4), piece("3g.20gb", 4, 4)))}
    decision = run(pod(ctr("c", gpu=1, mem=500)), [node("n", mig_gpu("M0"))], {"n": full})
    assert decision.failed == {"n": "1/1 CardMigTopologyInfeasible"}


# -- decision -> annotations -> reservation ---------------------------------------------------------------


def scheduled(annotations: dict[str, str], init: int, apps: int) -> dict[str, Any]:
    return pod(
        *[ctr(f"c{i}") for i in range(apps)],
        init=[ctr(f"i{i}") for i in range(init)],
        annotations=annotations,
    )


def test_round_trip_from_decision_to_reservation() -> None:
    the_pod = pod(
        ctr("a", gpu=2, mem=1000), ctr("b"), ctr("c", gpu=1, mem=15000), init=[ctr("i", gpu=1, mem=1)]
    )
    the_node = node("n", mig_gpu("M0"))
    winner = run(the_pod, [the_node]).winner
    assert winner is not None and winner.devices is not None
    annotations = allocation_annotations("n", winner.devices, VENDORS, 1)
    assert mig.decode(annotations[mig.ANNOTATION]) == (
        allocation(0, 0, "M0", "1g.5gb", 6, 1),  # the init container, fitted on the pod-free GPU
        allocation(1, 0, "M0", "1g.5gb", 6, 1),
        allocation(1, 1, "M0", "1g.5gb", 5, 1),
        allocation(3, 0, "M0", "3g.20gb", 0, 4),
    )
    reservation = reservation_from_pod(scheduled(annotations, 1, 3), VENDORS)
    assert reservation is not None
    expected = allocation_uses(winner.devices, 1)
    assert reservation.uses == expected
    assert expected["M0"].mig_slots == expected["M0"].slots == 3
    again = working_devices(the_node, reservation.uses)[0]
    assert sorted((p.start, p.size) for p in again.mig_in_use) == [(0, 4), (5, 1), (6, 1), (6, 1)]
    assert again.health


def test_a_pod_without_its_mig_annotation_makes_the_gpu_unhealthy() -> None:
    annotations = {"hami.io/vgpu-node": "n", "hami.io/vgpu-devices-allocated": "M0,NVIDIA,4864,14:;"}
    reservation = reservation_from_pod(scheduled(annotations, 0, 1), VENDORS)
    assert reservation is not None
    assert health(node("n", mig_gpu("M0")), dict(reservation.uses)) == {"M0": False}
    annotations[mig.ANNOTATION] = "not json"  # corrupt: ignored, the same
    reservation = reservation_from_pod(scheduled(annotations, 0, 1), VENDORS)
    assert reservation is not None
    assert health(node("n", mig_gpu("M0")), dict(reservation.uses)) == {"M0": False}
    annotations[mig.ANNOTATION] = SPEC_EXAMPLE.replace("GPU-a", "M0")
    reservation = reservation_from_pod(scheduled(annotations, 0, 1), VENDORS)
    assert reservation is not None
    assert health(node("n", mig_gpu("M0")), dict(reservation.uses)) == {"M0": True}
