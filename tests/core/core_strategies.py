"""Hypothesis strategies for whole decisions: random nodes, existing usage, pods and policies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from core_builders import ctr, gpu, node, pod
from hypothesis import strategies as st

from app.core.mig import overlaps
from app.core.model import DeviceInfo, DeviceUse, MigPlacement, MigProfile, MigSlice, NodeDevices

GPU_POLICIES = [
    "spread",
    "binpack",
    "mutex",
    "topology-aware",
    "numa",
    "binpack,numa",
    "numa,binpack",
    "spread,numa",
    "mutex,topology-aware",
    "binpack,mutex",
    "",
    "unknown",
]
NODE_POLICIES = ["binpack", "spread"]
# surrogates cannot be encoded as UTF-8, so no annotation can hold them
NO_SURROGATES: tuple[Literal["Cs"], ...] = ("Cs",)
TYPES = [
    "NVIDIA-Tesla V100-PCIE-32GB",
    "NVIDIA-Tesla V100-PCIE-32GB",
    "NVIDIA A100-SXM4-40GB",
    "NVIDIA A100-SXM4-40GB",
    "NVIDIA",
    "Tesla T4",
]


@dataclass(frozen=True)
class Scenario:
    nodes: tuple[NodeDevices, ...]
    usage: dict[str, dict[str, DeviceUse]]
    pod: dict[str, Any]
    gpu_policy: str
    node_policy: str


def _profile(
    name: str, memory: int, core: int, slices: int, starts: range | tuple[int, ...], size: int
) -> MigProfile:
    return MigProfile(name, memory, core, slices, tuple(MigPlacement(s, size) for s in starts))


# What a device plugin registers for an A100 40GB in MIG mode, and a smaller variant (1g and 2g only, so
# that requests fall back to larger profiles and run out of placements).
A100_MIG = (
    _profile("1g.5gb", 4864, 14, 1, range(7), 1),
    _profile("2g.10gb", 9984, 28, 2, (0, 2, 4), 2),
    _profile("3g.20gb", 20096, 42, 3, (0, 4), 4),
    _profile("4g.20gb", 20096, 57, 4, (0,), 4),
    _profile("7g.40gb", 40192, 100, 7, (0,), 8),
)
MIG_PROFILE_SETS = [(), A100_MIG, A100_MIG, A100_MIG[:2]]


@st.composite
def devices(draw: st.DrawFn, prefix: str) -> tuple[DeviceInfo, ...]:
    size = draw(st.sampled_from([1, 2, 3, 4, 4]))
    result = []
    for index in range(size):
        uuid = f"{prefix}-GPU-{index}"
        mode = draw(st.sampled_from(["hami-core"] * 7 + ["mig", "mig", ""]))
        result.append(
            gpu(
                uuid,
                index,
                count=draw(st.sampled_from([0, 1, 2, 4, 10, 10, 10] + ([7, 7, 7] if mode == "mig" else []))),
                mem=draw(st.sampled_from([0, 1000, 8000, 16384, 32768, 32768, 40960])),
                core=draw(st.sampled_from([0, 50, 100, 100, 100, 200])),
                type=draw(st.sampled_from(TYPES)),
                numa=draw(st.integers(0, 1)),
                mode=mode,
                health=draw(st.sampled_from([True] * 9 + [False])),
                pair={
                    f"{prefix}-GPU-{other}": draw(st.integers(0, 200))
                    for other in range(size)
                    if other != index
                },
                mig_profiles=draw(st.sampled_from(MIG_PROFILE_SETS)) if mode == "mig" else (),
            )
        )
    return tuple(result)


def _slices(draw: st.DrawFn, profiles: tuple[MigProfile, ...]) -> tuple[MigSlice, ...]:
    """Slices other pods hold: registered placements, possibly overlapping (the fit must avoid them all)."""
    choices = [MigSlice(p.name, placement) for p in profiles for placement in p.placements]
    if not choices:
        return ()
    return tuple(sorted(draw(st.lists(st.sampled_from(choices), max_size=3)), key=MigSlice.key))


@st.composite
def existing_use(draw: st.DrawFn, devs: tuple[DeviceInfo, ...]) -> dict[str, DeviceUse]:
    """Usage of other pods; may exceed capacity (a device that is over-committed must never be chosen).

    On `mig` devices the pods hold MIG slices, usually with an allocation for every slot (else the device is
    unhealthy); rarely a `hami-core` device or a GPU the node does not have holds slices (both fail closed).
    """
    use = {}
    for d in devs:
        if draw(st.integers(0, 2)) == 0:
            slots = draw(st.integers(0, max(d.count, 1)))
            slices = (
                _slices(draw, d.mig_profiles or A100_MIG)
                if d.mode == "mig" or draw(st.integers(0, 9)) == 0
                else ()
            )
            placed = slots if slices and draw(st.integers(0, 4)) else 0
            use[d.id] = DeviceUse(
                slots,
                draw(st.integers(0, d.devmem + 1000)),
                draw(st.integers(0, d.devcore + 10)),
                placed,
                slices,
            )
    if devs and draw(st.integers(0, 19)) == 0:
        use["GPU-elsewhere"] = DeviceUse(mig=_slices(draw, A100_MIG))
    return use


@st.composite
def gpu_container(draw: st.DrawFn, name: str) -> dict[str, Any]:
    if draw(st.integers(0, 3)) == 0:
        return ctr(name)  # asks for no GPU at all
    return ctr(
        name,
        gpu=draw(st.sampled_from([1, 1, 1, 2, 2, 3])),
        mem=draw(st.none() | st.sampled_from([0, 500, 1000, 3000, 9000, 20000])),
        pct=draw(st.none() | st.none() | st.sampled_from([0, 25, 50, 100, 150])),
        cores=draw(st.none() | st.sampled_from([0, 10, 30, 60, 100, 150])),
        section=draw(st.sampled_from(["limits", "requests"])),
    )


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    nodes = []
    usage = {}
    for n in range(draw(st.integers(1, 3))):
        name = f"node-{n}"
        devs = draw(devices(name))
        cordoned = (
            draw(st.lists(st.sampled_from([d.id for d in devs]), max_size=1))
            if draw(st.integers(0, 3)) == 0
            else []
        )
        nodes.append(node(name, *devs, cordoned=cordoned))
        usage[name] = draw(existing_use(devs))
    inits = [draw(gpu_container(f"init-{i}")) for i in range(draw(st.integers(0, 2)))]
    apps = [draw(gpu_container(f"app-{i}")) for i in range(draw(st.integers(1, 3)))]
    if not any(c["resources"] for c in [*inits, *apps]):
        apps[0] = ctr("app-0", gpu=1)  # the filter passes GPU-less pods through without deciding
    annotations = {}
    if draw(st.booleans()):
        annotations["nvidia.com/numa-bind"] = "true"
    if draw(st.integers(0, 4)) == 0:
        annotations["hami.io/device-scoring-weights"] = draw(
            st.sampled_from(["slot=1,core=0,memory=0", "slot=0,core=2,memory=1", "slot=3,core=1,memory=5"])
        )
    return Scenario(
        nodes=tuple(nodes),
        usage=usage,
        pod=pod(*apps, init=inits, annotations=annotations),
        gpu_policy=draw(st.sampled_from(GPU_POLICIES)),
        node_policy=draw(st.sampled_from(NODE_POLICIES)),
    )


# -- MIG scenarios: nodes with `mig`-mode A100s, some slices already held, pods asking for slices --

A100 = "NVIDIA A100-SXM4-40GB"


@dataclass(frozen=True)
class MigScenario:
    nodes: tuple[NodeDevices, ...]
    usage: dict[str, dict[str, DeviceUse]]
    pod: dict[str, Any]
    gpu_policy: str
    node_policy: str


@st.composite
def mig_scenarios(draw: st.DrawFn) -> MigScenario:
    nodes, usage = [], {}
    for n in range(draw(st.integers(1, 3))):
        devices = []
        for index in range(draw(st.integers(1, 3))):
            mig = draw(st.integers(0, 4)) > 0
            devices.append(
                gpu(
                    f"n{n}-GPU-{index}",
                    index,
                    count=7 if mig else 10,
                    mem=40960,
                    type=A100,
                    numa=draw(st.integers(0, 1)),
                    mode="mig" if mig else "hami-core",
                    mig_profiles=draw(st.sampled_from([A100_MIG, A100_MIG, A100_MIG[:2], A100_MIG[1:]]))
                    if mig
                    else (),
                )
            )
        name = f"node-{n}"
        nodes.append(node(name, *devices))
        usage[name] = {d.id: draw(_held(d)) for d in devices if d.mode == "mig" and draw(st.booleans())}
    containers = [draw(_container(f"app-{i}")) for i in range(draw(st.integers(1, 3)))]
    inits = [draw(_container(f"init-{i}")) for i in range(draw(st.integers(0, 1)))]
    if not any(c["resources"] for c in [*inits, *containers]):
        containers[0] = ctr("app-0", gpu=1)  # the filter passes GPU-less pods through without deciding
    return MigScenario(
        tuple(nodes),
        usage,
        pod(*containers, init=inits),
        draw(st.sampled_from(GPU_POLICIES)),
        draw(st.sampled_from(NODE_POLICIES)),
    )


@st.composite
def _held(draw: st.DrawFn, device: DeviceInfo) -> DeviceUse:
    """Slices other pods hold (non-overlapping, as our own decisions leave them), with their allocations."""
    held: list[MigSlice] = []
    for _ in range(draw(st.integers(0, 3))):
        profile = draw(st.sampled_from(device.mig_profiles))
        placement = draw(st.sampled_from(profile.placements))
        if not any(overlaps(placement, h.placement) for h in held):
            held.append(MigSlice(profile.name, placement))
    profiles = {p.name: p for p in device.mig_profiles}
    mem = sum(profiles[h.profile].memory_mb for h in held)
    cores = sum(profiles[h.profile].core for h in held)
    return DeviceUse(len(held), mem, min(cores, 100), len(held), tuple(sorted(held, key=MigSlice.key)))


@st.composite
def _container(draw: st.DrawFn, name: str) -> dict[str, Any]:
    if draw(st.integers(0, 4)) == 0:
        return ctr(name)
    return ctr(
        name,
        gpu=draw(st.integers(1, 4)),
        mem=draw(st.none() | st.sampled_from([0, 1000, 4864, 5000, 9984, 15000, 20096, 30000])),
        pct=draw(st.none() | st.none() | st.sampled_from([10, 25, 50])),
    )
