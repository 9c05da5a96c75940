"""MIG on NVIDIA `mig`-mode GPUs (reference §4.4, §4.7 check 13 and "MIG details", §4.10, quirk #12):
profile and placement selection, the overlap test with slices in use and slices already queued for the
container, the allowlist, `isMIGRequest`, the same-GPU revisit in Fit, AddResourceUsage and the annotation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from app.core.model import (
    ContainerDevice,
    DeviceRequest,
    DeviceUsage,
    MigAssignment,
    MigPlacement,
    MigProfile,
    NodeDevices,
)
from app.core.vendor import AddUsageError, FitContext
from app.devices.nvidia import Nvidia, NvidiaConfig, keys, mig
from app.devices.nvidia.config import MigAllowlistEntry
from app.devices.nvidia.fit import fit

A100 = "NVIDIA A100-SXM4-40GB"


def profile(name: str, memory: int, core: int, slices: int, *starts: int, size: int = 1) -> MigProfile:
    return MigProfile(name, memory, core, slices, tuple(MigPlacement(s, size) for s in starts))


P1G = profile("1g.5gb", 4864, 14, 1, 0, 1, 2, 3, 4, 5, 6)
P2G = profile("2g.10gb", 9984, 28, 2, 0, 2, 4, size=2)
P3G = profile("3g.20gb", 20096, 42, 3, 0, 4, size=4)
P4G = profile("4g.20gb", 20096, 57, 4, 0, size=4)
P7G = profile("7g.40gb", 40192, 100, 7, 0, size=8)
A100_PROFILES = (P1G, P2G, P3G, P4G, P7G)


def at(*pairs: tuple[int, int]) -> list[MigPlacement]:
    return [MigPlacement(start, size) for start, size in pairs]


def gpu(
    uuid: str = "GPU-a",
    index: int = 0,
    *,
    profiles: tuple[MigProfile, ...] = A100_PROFILES,
    in_use: Sequence[MigPlacement] = (),
    used: int = 0,
    usedmem: int = 0,
    mode: str = "mig",
    type: str = A100,
) -> DeviceUsage:
    return DeviceUsage(
        uuid, index, used, 7, usedmem, 40960, 100, 0, mode, 0, type, True, profiles, list(in_use)
    )


def req(nums: int = 1, memreq: int = 1000) -> DeviceRequest:
    return DeviceRequest(nums, keys.VENDOR, memreq)


def context(annotations: Mapping[str, str] | None = None, policy: str = "spread") -> FitContext:
    return FitContext(dict(annotations or {}), "default", policy, NodeDevices("n1", ()))


# -- profile and placement selection -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("profiles", "occupied", "memory", "expected"),
    [
        (A100_PROFILES, [], 1000, ("1g.5gb", (6, 1))),  # smallest profile with enough memory
        (A100_PROFILES, [], 0, ("1g.5gb", (6, 1))),
        (A100_PROFILES, [], 4864, ("1g.5gb", (6, 1))),  # exactly the profile's memory is enough
        (A100_PROFILES, [], 4865, ("2g.10gb", (0, 2))),
        (A100_PROFILES, [], 15000, ("3g.20gb", (4, 4))),  # 3g and 4g tie on memory: fewer slices wins
        ((P4G, P3G), [], 15000, ("3g.20gb", (4, 4))),  # ... whatever the registration order
        (A100_PROFILES, [], 40192, ("7g.40gb", (0, 8))),
        (A100_PROFILES, [], 40193, None),
        # the smallest profile has no free placement: the next larger one is taken
        (A100_PROFILES, at((0, 1), (1, 1), (2, 1), (3, 1), (4, 1), (5, 1), (6, 1)), 1000, None),
        ((P1G, P2G), at((6, 1), (5, 1), (4, 1), (3, 1), (2, 1)), 1000, ("1g.5gb", (1, 1))),
        ((P1G, P2G), at((0, 1), (1, 1), (2, 1), (3, 1), (4, 1), (5, 1), (6, 1)), 1000, None),
        ((P1G, P2G), at((4, 4)), 1000, ("1g.5gb", (3, 1))),
        ((P2G,), at((4, 4)), 1000, ("2g.10gb", (0, 2))),
        ((P1G, P2G), at((0, 1), (1, 1), (2, 1), (3, 1)), 6000, ("2g.10gb", (4, 2))),
        ((), [], 1, None),
    ],
    ids=[
        "smallest",
        "zero-memory",
        "exact-memory",
        "next-profile",
        "tie-fewer-slices",
        "tie-any-order",
        "whole-card",
        "too-big",
        "all-slices-taken",
        "1g-high-first-skips-taken",
        "1g-full-no-upgrade-into-taken",
        "1g-below-a-3g",
        "2g-low-first",
        "2g-skips-overlap",
        "no-profiles",
    ],
)
def test_select(
    profiles: tuple[MigProfile, ...],
    occupied: list[MigPlacement],
    memory: int,
    expected: tuple[str, tuple[int, int]] | None,
) -> None:
    chosen = mig.select(profiles, occupied, memory)
    if expected is None:
        assert chosen is None
    else:
        assert chosen is not None
        assert (chosen[0].name, (chosen[1].start, chosen[1].size)) == expected


@pytest.mark.parametrize(
    ("name", "starts", "order"),
    [
        ("1g.5gb", (0, 1, 2, 6), [6, 2, 1, 0]),  # 1g.* and 3g.*: higher start first
        ("3g.20gb", (0, 4), [4, 0]),
        ("1g.10gb", (6, 0, 4, 2), [6, 4, 2, 0]),
        ("2g.10gb", (4, 0, 2), [0, 2, 4]),  # the others: lower start first
        ("4g.20gb", (4, 0), [0, 4]),
        ("7g.40gb", (0,), [0]),
        ("11g.x", (0, 3), [0, 3]),  # only the prefix `1g.` counts, not `11g.`
    ],
)
def test_placement_order(name: str, starts: tuple[int, ...], order: list[int]) -> None:
    assert [p.start for p in mig.ordered_placements(profile(name, 1, 1, 1, *starts))] == order


def test_placement_order_is_stable_and_skips_empty_slices() -> None:
    shape = MigProfile("2g.x", 1, 1, 2, (MigPlacement(2, 2), MigPlacement(0, 0), MigPlacement(2, 3)))
    assert mig.ordered_placements(shape) == [MigPlacement(2, 2), MigPlacement(2, 3)]


def test_the_first_profile_of_a_name_gives_the_placements() -> None:
    twin = profile("1g.5gb", 9000, 14, 1, 3)
    chosen = mig.select((P1G, twin), [], 5000)  # HAMi findMigProfile: placements of the first of the name
    assert chosen == (twin, MigPlacement(6, 1))


@pytest.mark.parametrize(
    ("a", "b", "overlap"),
    [
        ((0, 1), (1, 1), False),  # half-open ranges: adjacent slices do not overlap
        ((0, 2), (1, 1), True),
        ((4, 4), (6, 1), True),
        ((0, 8), (7, 1), True),
        ((3, 1), (0, 4), True),
        ((4, 0), (4, 4), False),  # an empty slice overlaps nothing
    ],
)
def test_overlap(a: tuple[int, int], b: tuple[int, int], overlap: bool) -> None:
    assert mig.overlaps(MigPlacement(*a), MigPlacement(*b)) is overlap
    assert mig.overlaps(MigPlacement(*b), MigPlacement(*a)) is overlap


@pytest.mark.parametrize(
    ("occupied", "queued", "memory", "fits"),
    [
        ([], [], 1000, True),
        ([], [20000], 20000, True),  # 3g at 4 queued, then 3g at 0
        ([], [20000, 20000], 1000, False),  # two 3g fill the card
        (at((0, 4)), [20000], 1000, False),
        (at((0, 4)), [1000, 1000], 1000, True),  # 1g at 6 and 5 queued, 4 is free
        (at((0, 4)), [1000, 1000, 1000], 1, False),  # 6, 5, 4 queued: the card is full
        (at((4, 4)), [10000], 10000, False),  # 10000 MiB needs a 3g: the queued one takes 0, none is left
        ([], [40000], 1, False),
        ([], [50000], 1, False),  # a queued slice that no longer fits: the device fails too
    ],
)
def test_fits_counts_queued_and_in_use_slices(
    occupied: list[MigPlacement], queued: list[int], memory: int, fits: bool
) -> None:
    assert mig.fits(A100_PROFILES, occupied, queued, memory) is fits


# -- the allowlist ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("allowlist", "device_type", "names"),
    [
        ((), A100, ["1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"]),
        ((MigAllowlistEntry(("A100-SXM4-40GB",), ("1g.5gb", "7g.40gb")),), A100, ["1g.5gb", "7g.40gb"]),
        # an entry that does not name the model leaves the registered profiles as they are
        (
            (MigAllowlistEntry(("A30",), ("1g.6gb",)),),
            A100,
            ["1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"],
        ),
        # every entry naming the model counts (the chart's `H20` also names `H200`)
        (
            (
                MigAllowlistEntry(("A100",), ("1g.5gb",)),
                MigAllowlistEntry(("A100-SXM4-40GB", "A30"), ("3g.20gb", "9g.99gb")),
            ),
            A100,
            ["1g.5gb", "3g.20gb"],
        ),
        (
            (MigAllowlistEntry(("a100-sxm4-40gb",), ("1g.5gb",)),),
            A100,
            ["1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"],
        ),
        ((MigAllowlistEntry(("A100",), ("9g.99gb",)),), A100, []),
    ],
    ids=["none", "restricts", "other-model", "union", "case-sensitive", "nothing-allowed"],
)
def test_allowlist(allowlist: tuple[MigAllowlistEntry, ...], device_type: str, names: list[str]) -> None:
    assert [p.name for p in mig.usable_profiles(gpu(type=device_type), allowlist)] == names


def test_allowlist_applies_in_fit_and_add_usage() -> None:
    allow = NvidiaConfig(mig_profile_allowlist=(MigAllowlistEntry(("A100",), ("3g.20gb",)),))
    vendor = Nvidia(allow)
    outcome = vendor.fit([gpu()], req(memreq=1000), context())
    assert outcome.ok
    device = gpu()
    final = vendor.add_usage(device, outcome.devices[0])
    assert final.mig == MigAssignment("3g.20gb", MigPlacement(4, 4))
    closed = Nvidia(NvidiaConfig(mig_profile_allowlist=(MigAllowlistEntry(("A100",), ("7g.40gb",)),)))
    assert closed.fit([gpu(in_use=at((6, 1)))], req(), context()).reason == "1/1 CardMigTopologyInfeasible"


# -- isMIGRequest and NodeInsufficientDevice ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "devices", "request_type", "expected"),
    [
        ({}, [gpu()], keys.VENDOR, True),
        ({keys.VGPU_MODE: "mig"}, [gpu()], keys.VENDOR, True),
        ({keys.VGPU_MODE: "hami-core,mig"}, [gpu()], keys.VENDOR, True),
        ({keys.VGPU_MODE: "hami-core"}, [gpu()], keys.VENDOR, False),  # present without `mig`
        ({keys.VGPU_MODE: ""}, [gpu()], keys.VENDOR, False),
        ({}, [gpu(mode="hami-core")], keys.VENDOR, False),  # no `mig` candidate
        ({}, [gpu(mode="hami-core"), gpu("GPU-b", 1)], keys.VENDOR, True),
        ({}, [], keys.VENDOR, False),
        ({}, [gpu()], "OTHER", False),
    ],
)
def test_is_mig_request(
    annotations: dict[str, str], devices: list[DeviceUsage], request_type: str, expected: bool
) -> None:
    request = DeviceRequest(2, request_type)
    assert mig.is_mig_request(devices, request, annotations) is expected
    assert Nvidia().may_reuse_devices(devices, request, annotations) is expected


# -- Fit: check 13 and the revisit ---------------------------------------------------------------------------


def test_one_gpu_serves_several_slices_of_a_container() -> None:
    outcome = fit([gpu()], req(3, 1000), context())
    assert outcome.ok
    assert [d.uuid for d in outcome.devices] == ["GPU-a"] * 3
    assert all(d.usedmem == 1000 and d.mig is None for d in outcome.devices)  # Fit keeps the request


def test_revisit_is_limited_by_placements_only() -> None:
    # quirk #12: slots, memory and cores are not updated between passes, so 7 slices fit although the
    # card's `count` check (used < count) would allow only one more task
    assert fit([gpu(used=6)], req(7, 1000), context()).ok
    outcome = fit([gpu(used=6)], req(8, 1000), context())
    # HAMi's count of allocated cards is the number of slices, over the number of devices
    assert outcome.reason == "1/1 CardMigTopologyInfeasible, 7/1 AllocatedCardsInsufficientRequest"
    assert len(outcome.devices) == 7


def test_slices_in_use_and_queued_limit_the_revisit() -> None:
    outcome = fit([gpu(in_use=at((0, 4)))], req(2, 15000), context())
    assert outcome.reason == "1/1 AllocatedCardsInsufficientRequest, 1/1 CardMigTopologyInfeasible"


def test_mig_check_comes_after_the_others() -> None:
    full = gpu(usedmem=40960)
    assert fit([full], req(1, 1000), context()).reason == "1/1 CardInsufficientMemory"
    assert fit([gpu(profiles=())], req(1, 1000), context()).reason == "1/1 CardMigTopologyInfeasible"


def test_memory_percentage_is_resolved_before_the_profile_is_chosen() -> None:
    half = DeviceRequest(1, keys.VENDOR, 0, 50)  # 50 % of 40960 = 20480 > 20096: only 7g fits
    outcome = fit([gpu()], half, context())
    assert outcome.ok and outcome.devices[0].usedmem == 20480
    device = gpu()
    assert Nvidia().add_usage(device, outcome.devices[0]).mig == MigAssignment("7g.40gb", MigPlacement(0, 8))


def test_revisit_then_the_next_gpu() -> None:
    # the sorted list is consumed from the end: GPU-b first, two slices there, then GPU-a
    devices = [gpu("GPU-a", 0), gpu("GPU-b", 1, in_use=at((0, 4), (4, 1)))]
    outcome = fit(devices, req(4, 1000), context())
    assert outcome.ok
    assert [d.uuid for d in outcome.devices] == ["GPU-b", "GPU-b", "GPU-a", "GPU-a"]


def test_topology_collects_every_slice_of_every_gpu() -> None:
    devices = [gpu("GPU-a", 0, in_use=at((0, 4), (4, 2))), gpu("GPU-b", 1, mode="hami-core")]
    outcome = fit(devices, req(2, 1000), context(policy="topology-aware"))
    assert outcome.ok
    assert [d.uuid for d in outcome.devices] == ["GPU-b", "GPU-a"]  # combinations in candidate order


def test_mode_annotation_excludes_mig_devices() -> None:
    outcome = fit([gpu()], req(1, 1000), context({keys.VGPU_MODE: "hami-core"}))
    assert outcome.reason == "1/1 CardTypeMismatch"


# -- AddResourceUsage and the annotation ------------------------------------------------------------------


def test_add_usage_takes_the_profile_and_records_the_slice() -> None:
    device = gpu(in_use=at((6, 1)))
    chosen = ContainerDevice("GPU-a", keys.VENDOR, 1000, 30)
    final = Nvidia().add_usage(device, chosen)
    assert final == ContainerDevice(
        "GPU-a", keys.VENDOR, 4864, 14, mig=MigAssignment("1g.5gb", MigPlacement(5, 1))
    )
    assert device.mig_in_use == at((6, 1), (5, 1))
    assert (device.used, device.usedmem, device.usedcores) == (1, 4864, 14)


def test_add_usage_fails_without_a_free_slice() -> None:
    device = gpu(in_use=at((0, 8)))
    with pytest.raises(AddUsageError, match="MIG profile and placement allocation failed"):
        Nvidia().add_usage(device, ContainerDevice("GPU-a", keys.VENDOR, 1000, 0))
    assert device.used == 0 and device.mig_in_use == at((0, 8))


def test_add_usage_on_other_modes_is_unchanged() -> None:
    device = gpu(mode="hami-core")
    chosen = ContainerDevice("GPU-a", keys.VENDOR, 1000, 30)
    assert Nvidia().add_usage(device, chosen) == chosen
    assert device.mig_in_use == []


def slice_of(profile: str, start: int, size: int, uuid: str = "GPU-a", mem: int = 4864) -> ContainerDevice:
    return ContainerDevice(uuid, keys.VENDOR, mem, 14, mig=MigAssignment(profile, MigPlacement(start, size)))


def test_pod_annotations_byte_format() -> None:
    plain = ContainerDevice("GPU-b", keys.VENDOR, 3000, 30)
    devices = ((slice_of("1g.5gb", 6, 1),), (), (plain, slice_of("2g.10gb", 0, 2, "GPU-c", 9984)))
    annotations = Nvidia().pod_annotations(devices)
    assert annotations == {
        keys.TO_ALLOCATE: "GPU-a,NVIDIA,4864,14:;;GPU-b,NVIDIA,3000,30:GPU-c,NVIDIA,9984,14:;",
        keys.ALLOCATED: "GPU-a,NVIDIA,4864,14:;;GPU-b,NVIDIA,3000,30:GPU-c,NVIDIA,9984,14:;",
        keys.MIG_ALLOCATIONS: (
            '[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.5gb",'
            '"placement":{"start":6,"size":1}},'
            '{"containerIndex":2,"deviceIndex":1,"gpuUUID":"GPU-c","profile":"2g.10gb",'
            '"placement":{"start":0,"size":2}}]'
        ),
    }


def test_no_mig_annotation_without_slices() -> None:
    annotations = Nvidia().pod_annotations(((ContainerDevice("GPU-b", keys.VENDOR, 3000, 30),),))
    assert keys.MIG_ALLOCATIONS not in annotations
