"""Hypothesis parts for Metax GPU and sGPU, Iluvatar, Kunlunxin XPU and vXPU, Enflame GCU and DRS, plugged
into `vendor_strategies`: their nodes as the device plugins register them, realistic existing usage (vXPUs of
one template per device, the tags of sGPU holders), container limits as their webhooks leave them, and the pod
annotations they read (sGPU app class and QoS)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from app.core.model import DeviceInfo, DeviceUse
from app.core.vendor import Vendor
from app.devices.enflame import EnflameDrs, EnflameGcu
from app.devices.iluvatar import CHART_CHIPS, Iluvatar
from app.devices.kunlun import KunlunVxpu, KunlunXpu
from app.devices.metax import MetaxConfig, MetaxGpu, MetaxSgpu

VENDORS2: tuple[Vendor, ...] = (
    EnflameGcu(),
    EnflameDrs(),
    MetaxGpu(),
    MetaxSgpu(MetaxConfig(sgpu_topology_aware=True)),
    KunlunXpu(),
    KunlunVxpu(),
    Iluvatar(CHART_CHIPS[2]),
)
FAMILIES2 = ("metax", "sgpu", "iluvatar", "kunlun", "vxpu", "gcu", "drs")
FAMILY_OF_KEY = {
    "Metax-GPU": "metax",
    "Metax-SGPU": "sgpu",
    "BI-V150": "iluvatar",
    "kunlun": "kunlun",
    "XPU": "vxpu",
    "GCU": "gcu",
    "Enflame": "drs",
}
PROFILES = {"1g.6gb": "0", "3g.20gb": "1", "6g.40gb": "2"}
APP, QOS = "metax-tech.com/sgpu-app-class", "metax-tech.com/sgpu-qos-policy"


def _device(uuid: str, index: int, count: int, mem: int, core: int, key: str, **kw: Any) -> DeviceInfo:
    return DeviceInfo(
        uuid, index, count, mem, core, key, kw.pop("numa", 0), "", kw.pop("health", True), key, **kw
    )


def devices(draw: st.DrawFn, name: str, family: str) -> tuple[list[DeviceInfo], dict[str, Any]]:
    """One family's devices on node `name`, and what it knows of the node (vendor key -> info)."""
    if family == "metax":
        tables = {
            "metax-tech.com/gpu.topology.losses": {"1": 0, "2": draw(st.integers(0, 50)), "4": 30},
            "metax-tech.com/gpu.topology.scores": {"1": 100, "2": draw(st.integers(0, 200))},
        }
        size = draw(st.integers(1, 4))
        info = {"Metax-GPU": tables} if draw(st.booleans()) else {}
        return [_device(f"{name}-metax-{i}", i, 1, 65536, 100, "Metax-GPU") for i in range(size)], info
    if family == "sgpu":
        return [
            _device(
                f"{name}-sgpu-{i}",
                i,
                draw(st.sampled_from([4, 16])),
                32768,
                100,
                "Metax-SGPU",
                health=draw(st.sampled_from([True] * 9 + [False])),
                custom={
                    "QosPolicy": draw(st.sampled_from(["", "best-effort", "fixed-share"])),
                    "Model": "sgpu",
                    "LinkZone": draw(st.sampled_from([0, 1, 2])),
                },
            )
            for i in range(draw(st.integers(1, 4)))
        ], {}
    if family == "iluvatar":
        return [
            _device(f"{name}-BI-{i}", i, 4, 16384, 100, "BI-V150") for i in range(draw(st.integers(1, 3)))
        ], {}
    if family == "kunlun":
        size = draw(st.sampled_from([4, 8]))
        return [
            _device(f"{name}-kunlun-{i}", i, 100, 98304, 100, "kunlun", numa=int(i >= size // 2))
            for i in range(size)
        ], {}
    if family == "vxpu":
        size = draw(st.sampled_from([2, 8]))
        return [_device(f"{name}-xpu-{i}", i, 4, 98304, 100, "XPU") for i in range(size)], {}
    if family == "gcu":
        return [_device(f"{name}-GCU-{i}", i, 1, 100, 100, "GCU") for i in range(draw(st.integers(1, 4)))], {}
    custom = {"profiles": PROFILES, "maxSlice": 6}
    return [
        _device(
            f"{name}-enflame-drs-{i}",
            i,
            6,
            40960,
            100,
            "Enflame",
            custom={**custom, "minor": str(i), "index": str(i)},
        )
        for i in range(draw(st.integers(1, 2)))
    ], {}


def existing(draw: st.DrawFn, device: DeviceInfo) -> DeviceUse | None:
    """Usage of other pods as these vendors record it, or None for the generic draw."""
    if device.vendor == "XPU":
        size = draw(st.sampled_from([24576, 49152, 98304]))
        tasks = draw(st.integers(1, min(device.count, 98304 // size)))
        return DeviceUse(tasks, tasks * size, tasks * size * 100 // 98304)
    if device.vendor == "Metax-SGPU":
        tasks = draw(st.integers(1, device.count))
        app = draw(st.sampled_from(["", "online", "offline"]))
        tags = [f"app={app}"] * tasks if app else []
        if app != "online":
            tags += [f"qos={draw(st.sampled_from(['best-effort', 'fixed-share']))}"] * tasks
        return DeviceUse(
            tasks, draw(st.integers(0, device.devmem)), draw(st.integers(0, 100)), tags=tuple(sorted(tags))
        )
    return None


def limits(draw: st.DrawFn, family: str, app_class: bool) -> dict[str, Any]:
    """One container's limits for `family`, as its webhook leaves them (`app_class`: one sGPU only)."""
    if family == "metax":
        return {"metax-tech.com/gpu": draw(st.sampled_from([1, 1, 2]))}
    if family == "sgpu":
        result: dict[str, Any] = {"metax-tech.com/sgpu": 1 if app_class else draw(st.sampled_from([1, 2]))}
        if draw(st.booleans()):
            result["metax-tech.com/vmemory"] = draw(st.sampled_from([2, 8, "4Gi"]))
        result["metax-tech.com/vcore"] = draw(st.sampled_from([0, 30, 100]))
        return result
    if family == "iluvatar":
        count = draw(st.sampled_from([1, 1, 2]))
        result = {"iluvatar.ai/BI-V150-vgpu": count}
        if count > 1:
            result["iluvatar.ai/BI-V150.vCore"] = 100 * count
        elif draw(st.booleans()):
            result["iluvatar.ai/BI-V150.vMem"] = draw(st.sampled_from([8, 32]))
            result["iluvatar.ai/BI-V150.vCore"] = draw(st.sampled_from([0, 25, 50]))
        return result
    if family == "kunlun":
        return {"kunlunxin.com/xpu": draw(st.sampled_from([1, 2, 4, 8]))}
    if family == "vxpu":
        result = {"kunlunxin.com/vxpu": draw(st.sampled_from([1, 1, 2, 4]))}
        if draw(st.booleans()):
            result["kunlunxin.com/vxpu-memory"] = draw(st.sampled_from([24576, 49152]))
        return result
    if family == "gcu":
        return {"enflame.com/gcu": draw(st.sampled_from([1, 2]))}
    if draw(st.booleans()):
        return {"enflame.com/drs-gcu": draw(st.sampled_from([1, 3, 6]))}
    return {"enflame.com/gcu-memory": draw(st.sampled_from([5, 16, 40])), "enflame.com/gcu-core": 17}


def annotations(draw: st.DrawFn) -> dict[str, str]:
    """The sGPU pod annotations the webhook leaves (an app class, else a QoS policy)."""
    app = draw(st.sampled_from(["", "", "online", "offline"]))
    result = {APP: app} if app else {}
    if app != "online":
        result[QOS] = draw(st.sampled_from(["best-effort", "fixed-share", "burst-share"]))
    return result
