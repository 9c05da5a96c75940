"""Hypothesis strategies for mixed clusters: nodes carrying NVIDIA, Ascend, Hygon, Cambricon, Moore Threads,
AWS Neuron, AMD, Vastai and Biren devices, and the vendors of `more_vendor_strategies` (Metax, Iluvatar,
Kunlunxin, Enflame) (several vendors on one node too), existing usage, and pods asking any mix of them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import more_vendor_strategies as v2
from core_builders import NVIDIA, gpu, pod
from hypothesis import strategies as st

from app.core.model import DeviceInfo, DeviceUse, NodeDevices
from app.core.vendor import Vendor
from app.devices.amd import Amd
from app.devices.ascend import CHART_CHIPS, Ascend
from app.devices.awsneuron import AwsNeuron
from app.devices.biren import Biren
from app.devices.cambricon import Cambricon
from app.devices.hygon import Hygon
from app.devices.mthreads import Mthreads
from app.devices.vastai import Vastai

CHIPS = {c.common_word: c for c in CHART_CHIPS}
VENDORS: tuple[Vendor, ...] = (
    NVIDIA,
    Cambricon(),
    Hygon(),
    Mthreads(),
    Ascend(CHIPS["Ascend910B3"]),
    Ascend(CHIPS["Ascend310P"]),
    Ascend(CHIPS["Ascend910C"]),
    # --- AWS Neuron, AMD, Vastai, Biren ---
    AwsNeuron(),
    Amd(),
    Vastai(),
    Biren(),
    *v2.VENDORS2,
)
FAMILIES = ("nvidia", "ascend910b3", "ascend310p", "ascend910c", "hygon", "cambricon", "mthreads")
VENDORS3_FAMILIES = ("awsneuron", "amd", "vastai", "biren")  # their nodes and limits: end of this file
FAMILIES += VENDORS3_FAMILIES + v2.FAMILIES2


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
def node_devices(draw: st.DrawFn, name: str, among: tuple[str, ...] = FAMILIES) -> NodeDevices:
    families = draw(st.lists(st.sampled_from(among), min_size=1, max_size=3, unique=True))
    devices: list[DeviceInfo] = []
    info: dict[str, Any] = {}
    for family in families:
        if family in VENDORS3_FAMILIES:
            devices += _vendors3_devices(draw, name, family)
        elif family in v2.FAMILIES2:
            found, learned = v2.devices(draw, name, family)
            devices += found
            info.update(learned)
        elif family == "nvidia":
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
    return NodeDevices(name, tuple(devices), info=info)


@st.composite
def existing_use(draw: st.DrawFn, devices: tuple[DeviceInfo, ...]) -> dict[str, DeviceUse]:
    """Usage of other pods, within each device's capacity."""
    use = {}
    for d in devices:
        if draw(st.integers(0, 2)) == 0:
            use[d.id] = v2.existing(draw, d) or DeviceUse(
                draw(st.integers(1, max(d.count, 1))),
                draw(st.integers(0, d.devmem)),
                draw(st.integers(0, d.devcore)),
            )
    return use


FAMILY_OF_KEY = {
    "NVIDIA": "nvidia",
    "Ascend910B3": "ascend910b3",
    "Ascend310P": "ascend310p",
    "Ascend910C": "ascend910c",
    "DCU": "hygon",
    "MLU": "cambricon",
    "Mthreads": "mthreads",
    "AWSNeuron": "awsneuron",
    "AMD": "amd",
    "Vastai": "vastai",
    "Biren": "biren",
    **v2.FAMILY_OF_KEY,
}


def _limits(
    draw: st.DrawFn, pool: tuple[str, ...] = FAMILIES, app_class: bool = False, least: int = 0
) -> dict[str, Any]:
    """One container's limits: some (at least `least`) of the vendors of `pool`, with the values their
    webhooks would leave."""
    wanted = draw(st.lists(st.sampled_from(pool), min_size=least, max_size=2, unique=True))
    limits: dict[str, Any] = {}
    for family in wanted:
        if family in VENDORS3_FAMILIES:
            limits.update(_vendors3_limits(draw, family))
        elif family in v2.FAMILIES2:
            limits.update(v2.limits(draw, family, app_class))
        elif family == "nvidia":
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
def mixed_scenarios(draw: st.DrawFn, max_nodes: int = 4, among: tuple[str, ...] = FAMILIES) -> MixedScenario:
    """`among`: the vendor families nodes and pods draw from (all by default)."""
    nodes, usage = [], {}
    for n in range(draw(st.integers(1, max_nodes))):
        the_node = draw(node_devices(f"node-{n}", among))
        nodes.append(the_node)
        usage[the_node.name] = draw(existing_use(the_node.devices))
    notes = v2.annotations(draw)
    # mostly the families some node has (a pod of absent vendors only exercises NodeInsufficientDevice)
    present = tuple(sorted({FAMILY_OF_KEY.get(d.vendor, "nvidia") for n in nodes for d in n.devices}))
    pool = present if draw(st.integers(0, 4)) else among
    containers = []
    for i in range(draw(st.integers(1, 3))):
        limits = _limits(draw, pool, v2.APP in notes)
        containers.append({"name": f"c{i}", "resources": {"limits": limits} if limits else {}})
    if not any(c["resources"] for c in containers):
        containers[0] = {"name": "c0", "resources": {"limits": _limits(draw, pool, v2.APP in notes, 1)}}
    inits = []
    if draw(st.integers(0, 3)) == 0:
        limits = _limits(draw, pool, v2.APP in notes)
        inits.append({"name": "init", "resources": {"limits": limits} if limits else {}})
    return MixedScenario(
        tuple(nodes),
        usage,
        pod(*containers, init=inits, annotations=notes),
        draw(st.sampled_from(["spread", "binpack", "mutex"])),
        draw(st.sampled_from(["binpack", "spread"])),
    )


# --- AWS Neuron, AMD, Vastai, Biren (vendors §2.10-2.13) ------------------------------------------------


def _vendors3_devices(draw: st.DrawFn, name: str, family: str) -> list[DeviceInfo]:
    if family == "awsneuron":  # 2-core trn1/inf2 devices, or 4-core inf1 ones; runs need 4+
        cores = draw(st.sampled_from([2, 2, 4]))
        kind = draw(st.sampled_from(["trn1.32xlarge", "inf2.48xlarge", ""]))
        return [
            DeviceInfo(
                f"{name}-AWSNeuron-{i}",
                i,
                cores,
                0,
                2**cores - 1,
                "AWSNeuron",
                0,
                "",
                draw(st.sampled_from([True] * 9 + [False])),
                "AWSNeuron",
                custom={"AWSNodeType": kind},
            )
            for i in range(draw(st.sampled_from([1, 2, 4, 8])))
        ]
    if family == "amd":
        product, mem, cus = draw(
            st.sampled_from([("AMD Instinct MI300X VF", 196608, 304), ("AMD Instinct MI210", 65536, 104)])
        )
        return [
            DeviceInfo(f"{name}-AMD-{i}", i, 4, mem, cus, product, 0, "hami-core", True, "AMD")
            for i in range(draw(st.integers(1, 3)))
        ]
    if family == "vastai":
        dies = draw(st.booleans())
        return [
            DeviceInfo(
                f"{name}-va-{i}",
                i,
                draw(st.sampled_from([1, 2])),
                16384,
                100,
                "Vastai",
                0,
                "",
                True,
                "Vastai",
                custom={"DeviceStrategy": "die", "AIC": str(i // 2)} if dies else {},
            )
            for i in range(draw(st.integers(1, 4)))
        ]
    return [
        DeviceInfo(
            f"{name}-biren-{i}", i, draw(st.sampled_from([1, 4])), 32768, 100, "Biren", 0, "", True, "Biren"
        )
        for i in range(draw(st.integers(1, 3)))
    ]


def _vendors3_limits(draw: st.DrawFn, family: str) -> dict[str, Any]:
    """Limits the vendor's webhook admits."""
    if family == "awsneuron":
        if draw(st.booleans()):
            return {"aws.amazon.com/neuron": draw(st.sampled_from([1, 1, 2, 4]))}
        return {"aws.amazon.com/neuroncore": draw(st.sampled_from([1, 2, 4]))}
    if family == "amd":
        limits: dict[str, Any] = {"amd.com/gpu": draw(st.sampled_from([1, 1, 2]))}
        if draw(st.booleans()):
            limits["amd.com/gpumem"] = draw(st.sampled_from([4096, 65536]))
            limits["amd.com/gpucores"] = draw(st.sampled_from([10, 50, 100]))
        return limits
    if family == "vastai":
        return {"vastaitech.com/va": draw(st.sampled_from([1, 1, 2]))}
    return {"birentech.com/gpu": draw(st.sampled_from([1, 1, 2]))}


VENDORS3_FOCUS = (*VENDORS3_FAMILIES, "nvidia", "hygon")  # with a lock-taking and a capacity-free vendor


def scenarios(max_nodes: int = 4) -> st.SearchStrategy[MixedScenario]:
    """Every family, or mostly these four (among all, a pod rarely finds a node with what it asks)."""
    return st.one_of(mixed_scenarios(max_nodes), mixed_scenarios(max_nodes, VENDORS3_FOCUS))
