"""The simulated nodes of the vendors HAMi serves with two backends each — Metax (whole GPUs
`metax-tech.com/gpu` and sGPUs), Kunlunxin (whole XPUs and vXPUs) and Enflame (whole GCUs and DRS slices),
reference vendors §2.4-§2.9 — and the device-config sections that enable both backends
(`TWO_BACKEND_SECTIONS`, the chart's values). sim/nodes/vendors.py lists every part and documents what each
publishes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from app.core.codec import encode_register_json
from app.core.model import DeviceInfo
from sim.nodes.part import VendorPart, capacity_part

# the device-config sections that enable Metax, Kunlunxin and Enflame, both backends each (the chart's values)
TWO_BACKEND_SECTIONS: Mapping[str, Mapping[str, Any]] = {
    "metax": {"resourceCountName": "metax-tech.com/gpu", "resourceVCountName": "metax-tech.com/sgpu"},
    "kunlun": {"resourceCountName": "kunlunxin.com/xpu", "resourceVCountName": "kunlunxin.com/vxpu"},
    "enflame": {"resourceNameGCU": "enflame.com/gcu"},
}


def metax(node: str) -> VendorPart:
    devices = tuple(
        DeviceInfo(f"{node}-metax-{i}", i, 1, 65536, 100, "Metax-GPU", 0, "", True, "Metax-GPU")
        for i in range(4)
    )
    tables = {
        "metax-tech.com/gpu.topology.losses": '{"1":0,"2":10,"3":40,"4":20}',
        "metax-tech.com/gpu.topology.scores": '{"1":100,"2":90,"3":60,"4":80}',
    }
    return capacity_part(
        "metax",
        "Metax-GPU",
        "metax-tech.com/gpu",
        devices,
        annotations=tables,
        to_allocate="hami.io/metax-gpu-devices-to-allocate",
    )


def metax_sgpu(node: str) -> VendorPart:
    zones = (1, 1, 2, 2)
    devices = tuple(
        DeviceInfo(
            f"{node}-sgpu-{i}",
            i,
            16,
            32768,
            100,
            "Metax-SGPU",
            0,
            "",
            True,
            "Metax-SGPU",
            custom={"QosPolicy": "", "Model": "C500", "LinkZone": zone},
        )
        for i, zone in enumerate(zones)
    )
    register = [
        {
            "uuid": d.id,
            "model": "C500",
            "totalDevCount": 16,
            "totalCompute": 100,
            "totalVRam": 32768,
            "numa": 0,
            "healthy": True,
            "linkZone": z,
        }
        for d, z in zip(devices, zones, strict=True)
    ]
    return VendorPart(
        kind="metax-sgpu",
        key="Metax-SGPU",
        resource="metax-tech.com/sgpu",
        devices=devices,
        annotations={"metax-tech.com/node-gpu-devices": json.dumps(register, separators=(",", ":"))},
        allocatable={"metax-tech.com/sgpu": str(16 * len(devices))},
        to_allocate="hami.io/metax-sgpu-devices-to-allocate",
    )


def kunlun(node: str) -> VendorPart:
    devices = tuple(
        DeviceInfo(f"{node}-kunlun-{i}", i, 100, 98304, 100, "kunlun", int(i >= 4), "", True, "kunlun")
        for i in range(8)
    )
    return capacity_part("kunlun", "kunlun", "kunlunxin.com/xpu", devices, plugin="kunlun")


def kunlun_vxpu(node: str) -> VendorPart:
    devices = tuple(
        DeviceInfo(f"{node}-xpu-{i}", i, 4, 98304, 100, "XPU", 0, "", True, "XPU") for i in range(8)
    )
    return VendorPart(
        kind="kunlun-vxpu",
        key="XPU",
        resource="kunlunxin.com/vxpu",
        devices=devices,
        annotations={"hami.io/node-register-xpu": encode_register_json(devices)},
        allocatable={"kunlunxin.com/vxpu": "32"},
        to_allocate="hami.io/xpu-devices-to-allocate",
    )


def enflame(node: str) -> VendorPart:
    devices = tuple(
        DeviceInfo(f"{node}-GCU-{i}", i, 1, 100, 100, "GCU", 0, "", True, "GCU") for i in range(4)
    )
    return capacity_part(
        "enflame", "GCU", "enflame.com/gcu", devices, to_allocate="hami.io/enflame-gcu-devices-to-allocate"
    )


def enflame_drs(node: str) -> VendorPart:
    profiles = {"1g.6gb": "0", "3g.20gb": "1", "6g.40gb": "2"}
    devices = tuple(
        DeviceInfo(
            f"{node}-enflame-drs-{i}",
            i,
            6,
            40960,
            100,
            "Enflame",
            0,
            "",
            True,
            "Enflame",
            custom={"minor": str(i), "index": str(i), "profiles": profiles, "maxSlice": 6},
        )
        for i in range(4)
    )
    capacity = {
        "devices": [{"index": str(i), "minor": str(i), "capacity": 6} for i in range(4)],
        "profiles": profiles,
    }
    return VendorPart(
        kind="enflame-drs",
        key="Enflame",
        resource="enflame.com/drs-gcu",
        devices=devices,
        annotations={"enflame.com/gcu-drs-capacity": json.dumps(capacity, separators=(",", ":"))},
        allocatable={"enflame.com/drs-gcu": "24"},
        plugin="enflame-drs",
    )
