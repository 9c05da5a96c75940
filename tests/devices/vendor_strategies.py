"""Hypothesis strategies for mixed clusters: nodes carrying NVIDIA, Ascend, Hygon, Cambricon and Moore
Threads devices (several vendors on one node too), existing usage, and pods asking any mix of them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core_builders import NVIDIA, gpu, pod
from hypothesis import strategies as st

from app.core.model import DeviceInfo, DeviceUse, NodeDevices
from app.core.vendor import Vendor
from app.devices.ascend import CHART_CHIPS, Ascend
from app.devices.cambricon import Cambricon
from app.devices.hygon import Hygon
from app.devices.mthreads import Mthreads

CHIPS = {c.common_word: c for c in CHART_CHIPS}
VENDORS: tuple[Vendor, ...] = (
    NVIDIA,
    Cambricon(),
    Hygon(),
    Mthreads(),
    Ascend(CHIPS["Ascend910B3"]),
    Ascend(CHIPS["Ascend310P"]),
    Ascend(CHIPS["Ascend910C"]),
)
FAMILIES = ("nvidia", "ascend910b3", "ascend310p", "ascend910c", "hygon", "cambricon", "mthreads")


def _ascend(draw: st.DrawFn, name: str, cw: str, mem: int, core: int, count: int) -> list[DeviceInfo]:
    topology = cw != "Ascend310P" and draw(st.sampled_from([True, True, False]))
    size = draw(st.sampled_from([2, 4, 8] if cw != "Ascend910C" else [2, 4, 6]))
    return [
        DeviceInfo(
            f"{name}-{cw}-{i}",
            i,
            count,
            mem,
            core,
            cw,
            0,
            "",
            draw(st.sampled_from([True] * 9 + [False])),
            cw,
            custom={"NetworkID": 0 if cw == "Ascend910C" or i < size // 2 else 1} if topology else {},
        )
        for i in range(size)
    ]


@st.composite
def node_devices(draw: st.DrawFn, name: str) -> NodeDevices:
    families = draw(st.lists(st.sampled_from(FAMILIES), min_size=1, max_size=3, unique=True))
    devices: list[DeviceInfo] = []
    for family in families:
        if family == "nvidia":
            devices += [
                gpu(
                    f"{name}-GPU-{i}",
                    i,
                    count=draw(st.sampled_from([2, 10])),
                    mem=draw(st.sampled_from([16384, 32768])),
                )
                for i in range(draw(st.integers(1, 3)))
            ]
        elif family == "ascend910b3":
            devices += _ascend(draw, name, "Ascend910B3", 65536, 20, 4)
        elif family == "ascend310p":
            devices += _ascend(draw, name, "Ascend310P", 21527, 8, 7)
        elif family == "ascend910c":
            devices += _ascend(draw, name, "Ascend910C", 65536, 20, 4)
        elif family == "hygon":
            devices += [
                DeviceInfo(
                    f"{name}-DCU-{i}",
                    i,
                    4,
                    16384,
                    100,
                    draw(st.sampled_from(["DCU", "Z100"])),
                    0,
                    "hami-core",
                    True,
                    "DCU",
                )
                for i in range(draw(st.integers(1, 3)))
            ]
        elif family == "cambricon":
            devices += [
                DeviceInfo(f"{name}-cambricon-mlu-{i}", i, 100, 23808, 100, "MLU", 0, "", True, "MLU")
                for i in range(draw(st.integers(1, 3)))
            ]
        else:
            devices += [
                DeviceInfo(f"{name}-mthreads-{i}", i, 100, 49152, 16, "Mthreads", 0, "", True, "Mthreads")
                for i in range(draw(st.integers(1, 2)))
            ]
    return NodeDevices(name, tuple(devices))


@st.composite
def existing_use(draw: st.DrawFn, devices: tuple[DeviceInfo, ...]) -> dict[str, DeviceUse]:
    """Usage of other pods, within each device's capacity."""
    use = {}
    for d in devices:
        if draw(st.integers(0, 2)) == 0:
            use[d.id] = DeviceUse(
                draw(st.integers(1, max(d.count, 1))),
                draw(st.integers(0, d.devmem)),
                draw(st.integers(0, d.devcore)),
            )
    return use


def _limits(draw: st.DrawFn) -> dict[str, Any]:
    """One container's limits: some of the vendors, with the values their webhooks would leave."""
    wanted = draw(st.lists(st.sampled_from(FAMILIES), max_size=2, unique=True))
    limits: dict[str, Any] = {}
    for family in wanted:
        if family == "nvidia":
            limits["nvidia.com/gpu"] = draw(st.sampled_from([1, 1, 2]))
            if draw(st.booleans()):
                limits["nvidia.com/gpumem"] = draw(st.sampled_from([1000, 8000, 20000]))
            limits["nvidia.com/gpucores"] = draw(st.sampled_from([0, 30, 100]))
        elif family.startswith("ascend"):
            cw = {"ascend910b3": "Ascend910B3", "ascend310p": "Ascend310P", "ascend910c": "Ascend910C"}[
                family
            ]
            chip = CHIPS[cw]
            count = draw(st.sampled_from([2, 4] if cw == "Ascend910C" else [1, 1, 2, 3]))
            limits[chip.resource_name] = count
            sizes = [t.memory for t in chip.templates] if count == 1 else []
            limits[chip.resource_memory_name] = draw(st.sampled_from([*sizes, chip.memory_allocatable]))
        elif family == "hygon":
            limits["hygon.com/dcunum"] = draw(st.sampled_from([1, 2]))
            if draw(st.booleans()):
                limits["hygon.com/dcumem"] = draw(st.sampled_from([1000, 4000, 16384]))
                limits["hygon.com/dcucores"] = draw(st.sampled_from([10, 50]))
        elif family == "cambricon":
            limits["cambricon.com/vmlu"] = draw(st.sampled_from([1, 2]))
            if draw(st.booleans()):
                limits["cambricon.com/mlu.smlu.vmemory"] = draw(st.sampled_from([4, 40, 93]))
                limits["cambricon.com/mlu.smlu.vcore"] = draw(st.sampled_from([10, 50]))
        else:
            count = draw(st.sampled_from([1, 1, 2]))
            limits["mthreads.com/vgpu"] = count
            limits["mthreads.com/sgpu-memory"] = (
                draw(st.sampled_from([2, 8, 96])) if count == 1 else 96 * count
            )
            limits["mthreads.com/sgpu-core"] = 16 * count if count > 1 else draw(st.sampled_from([0, 4, 16]))
    return limits


@dataclass(frozen=True)
class MixedScenario:
    nodes: tuple[NodeDevices, ...]
    usage: dict[str, dict[str, DeviceUse]]
    pod: dict[str, Any]
    gpu_policy: str
    node_policy: str


@st.composite
def mixed_scenarios(draw: st.DrawFn, max_nodes: int = 4) -> MixedScenario:
    nodes, usage = [], {}
    for n in range(draw(st.integers(1, max_nodes))):
        the_node = draw(node_devices(f"node-{n}"))
        nodes.append(the_node)
        usage[the_node.name] = draw(existing_use(the_node.devices))
    containers = []
    for i in range(draw(st.integers(1, 3))):
        limits = _limits(draw)
        containers.append({"name": f"c{i}", "resources": {"limits": limits} if limits else {}})
    if not any(c["resources"] for c in containers):
        containers[0] = {"name": "c0", "resources": {"limits": {"hygon.com/dcunum": 1}}}
    inits = []
    if draw(st.integers(0, 3)) == 0:
        limits = _limits(draw)
        inits.append({"name": "init", "resources": {"limits": limits} if limits else {}})
    return MixedScenario(
        tuple(nodes),
        usage,
        pod(*containers, init=inits),
        draw(st.sampled_from(["spread", "binpack", "mutex"])),
        draw(st.sampled_from(["binpack", "spread"])),
    )
