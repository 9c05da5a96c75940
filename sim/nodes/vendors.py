"""Simulated nodes of the non-NVIDIA vendors: what each vendor's device plugin publishes on its Node.

A simulated node is NVIDIA GPUs (sim.nodes.objects) plus any of these parts (`--vendors`, cycled over the
nodes):
- `ascend910b3` / `ascend910c` / `ascend310p`: Huawei's Ascend plugin (reference vendors §2.1.2, the one
  plugin the reference read): `hami.io/node-register-<cw>` JSON with `index, id, count (vNPUs per chip),
  devmem, devcore, type, health` and, for 910 chips, `custominfo.NetworkID` (0 for chips 0-3, 1 above; 0 on
  910C); `hami.io/node-handshake-<cw>: Reported_<YYYY.MM.DD HH:MM:SS>`; `hami-vnpu-core: "false"`;
  allocatable `huawei.com/<cw>` = chips x vNPUs;
- `hygon`: `hami.io/node-dcu-register` in the colon format, allocatable `hygon.com/dcunum`;
- `cambricon`: no annotation, capacity and allocatable `cambricon.com/mlu.smlu.vcore` (100 per card) and
  `cambricon.com/mlu.smlu.vmemory` (256 MiB units), allocatable `cambricon.com/vmlu`;
- `mthreads`: capacity and allocatable `mthreads.com/sgpu-core` (16 per GPU) and `mthreads.com/sgpu-memory`
  (512 MiB units), allocatable `mthreads.com/vgpu`;
- `awsneuron`: an inf2.24xlarge (label `node.kubernetes.io/instance-type`), capacity `aws.amazon.com/neuron`
  6 and `aws.amazon.com/neuroncore` 12 (§2.10), served by the Neuron plugin (sim.nodes.vendorplugins);
- `amd`: `hami.io/node-amd-register` JSON with two MI300X VFs (196608 MiB, 304 CUs, §2.11), capacity
  `amd.com/gpu`;
- `vastai`: `hami.io/node-va-register` JSON with four dies on two cards (`custominfo` `DeviceStrategy: die`,
  `AIC`, §2.12) and the handshake; `biren`: `hami.io/node-biren-register` with four GPUs (§2.13).
- `metax`: capacity `metax-tech.com/gpu` and Metax's topology tables `metax-tech.com/gpu.topology.losses` /
  `.scores`; `metax-sgpu`: Metax's `metax-tech.com/node-gpu-devices` JSON (two MetaLink zones),
  allocatable `metax-tech.com/sgpu`; `iluvatar`: `hami.io/node-BI-V150-register` (colon format);
  `kunlun`: capacity `kunlunxin.com/xpu` (8 cards); `kunlun-vxpu`: `hami.io/node-register-xpu` (JSON);
  `enflame`: capacity `enflame.com/gcu`; `enflame-drs`: `enflame.com/gcu-drs-capacity` (4 GCUs of 6
  slices, profiles 1g.6gb / 3g.20gb / 6g.40gb), allocatable `enflame.com/drs-gcu` (reference vendors
  §2.4-§2.9).
Each part also carries the devices as the scheduler will discover them (for the demo's verdict).
Plugins other than Ascend's were not read for the reference; their annotations follow what HAMi writes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from app.core.codec import encode_register_legacy
from app.core.model import DeviceInfo
from sim.nodes.part import REPORTED, VendorPart, registered
from sim.nodes.twobackends import (
    enflame,
    enflame_drs,
    kunlun,
    kunlun_vxpu,
    metax,
    metax_sgpu,
)


def _ascend(
    node: str, cw: str, chips: int, vnpus: int, memory: int, aicore: int, network: bool
) -> VendorPart:
    devices = []
    register = []
    for i in range(chips):
        custom = {"NetworkID": 0 if cw == "Ascend910C" or i <= 3 else 1} if network else {}
        uuid = f"{node}-{cw}-{i}"
        devices.append(DeviceInfo(uuid, i, vnpus, memory, aicore, cw, 0, "", True, cw, custom=custom))
        item: dict[str, Any] = {"index": i} if i else {}
        item.update(
            {"id": uuid, "count": vnpus, "devmem": memory, "devcore": aicore, "type": cw, "health": True}
        )
        if custom:
            item["custominfo"] = custom
        register.append(item)
    return VendorPart(
        kind=cw.lower(),
        key=cw,
        resource=f"huawei.com/{cw}",
        devices=tuple(devices),
        annotations={
            f"hami.io/node-register-{cw}": json.dumps(register, separators=(",", ":")),
            f"hami.io/node-handshake-{cw}": REPORTED,
            "hami-vnpu-core": "false",
        },
        allocatable={f"huawei.com/{cw}": str(chips * vnpus)},
        to_allocate=f"hami.io/{cw}-devices-to-allocate",
    )


def _hygon(node: str) -> VendorPart:
    devices = tuple(
        DeviceInfo(f"{node}-DCU-{i}", i, 4, 16384, 100, "DCU", 0, "hami-core", True, "DCU") for i in range(4)
    )
    return VendorPart(
        kind="hygon",
        key="DCU",
        resource="hygon.com/dcunum",
        devices=devices,
        annotations={"hami.io/node-dcu-register": encode_register_legacy(devices)},
        allocatable={"hygon.com/dcunum": "16"},
        to_allocate="hami.io/dcu-devices-to-allocate",
    )


def _cambricon(node: str) -> VendorPart:
    cards, units = 4, 93  # 93 x 256 MiB = 23808 MiB per card
    devices = tuple(
        DeviceInfo(f"{node}-cambricon-mlu-{i}", i, 100, units * 256, 100, "MLU", 0, "", True, "MLU")
        for i in range(cards)
    )
    capacity = {
        "cambricon.com/mlu.smlu.vcore": str(cards * 100),
        "cambricon.com/mlu.smlu.vmemory": str(cards * units),
    }
    return VendorPart(
        kind="cambricon",
        key="MLU",
        resource="cambricon.com/vmlu",
        devices=devices,
        capacity=capacity,
        allocatable={**capacity, "cambricon.com/vmlu": str(cards * 10)},
        plugin="dsmlu",
    )


def _mthreads(node: str) -> VendorPart:
    gpus = 2
    devices = tuple(
        DeviceInfo(f"{node}-mthreads-{i}", i, 100, 96 * 512, 16, "Mthreads", 0, "", True, "Mthreads")
        for i in range(gpus)
    )
    capacity = {"mthreads.com/sgpu-core": str(gpus * 16), "mthreads.com/sgpu-memory": str(gpus * 96)}
    return VendorPart(
        kind="mthreads",
        key="Mthreads",
        resource="mthreads.com/vgpu",
        devices=devices,
        capacity=capacity,
        allocatable={**capacity, "mthreads.com/vgpu": str(gpus * 16)},
        plugin="mthreads",
    )


# --- AWS Neuron, AMD, Vastai, Biren (vendors §2.10-2.13) ------------------------------------------------


def _awsneuron(node: str) -> VendorPart:
    count, cores = 6, 2
    label = {"AWSNodeType": "inf2.24xlarge"}
    devices = tuple(
        DeviceInfo(
            f"{node}-AWSNeuron-{i}",
            i,
            cores,
            0,
            2**cores - 1,
            "AWSNeuron",
            0,
            "",
            True,
            "AWSNeuron",
            custom=label,
        )
        for i in range(count)
    )
    resources = {"aws.amazon.com/neuron": str(count), "aws.amazon.com/neuroncore": str(count * cores)}
    return VendorPart(
        kind="awsneuron",
        key="AWSNeuron",
        resource="aws.amazon.com/neuron",
        devices=devices,
        capacity=resources,
        allocatable=resources,
        plugin="neuron",
        labels={"node.kubernetes.io/instance-type": "inf2.24xlarge"},
        other_resources=("aws.amazon.com/neuroncore",),
    )


def _amd(node: str) -> VendorPart:
    product = "AMD Instinct MI300X VF"
    devices = tuple(
        DeviceInfo(f"{node}-amd-{i}", i, 4, 196608, 304, product, 0, "hami-core", True, "AMD")
        for i in range(2)
    )
    return registered(node, "amd", "AMD", "amd.com/gpu", "hami.io/node-amd-register", devices)


def _vastai(node: str) -> VendorPart:
    devices = tuple(
        DeviceInfo(
            f"{node}-va-{i}",
            i,
            1,
            16384,
            100,
            "Vastai",
            0,
            "",
            True,
            "Vastai",
            custom={"DeviceStrategy": "die", "AIC": str(i // 2)},
        )
        for i in range(4)
    )
    handshake = {"hami.io/node-handshake-va": REPORTED}
    return registered(
        node, "vastai", "Vastai", "vastaitech.com/va", "hami.io/node-va-register", devices, **handshake
    )


def _biren(node: str) -> VendorPart:
    devices = tuple(
        DeviceInfo(f"{node}-biren-{i}", i, 2, 32768, 100, "Biren", 0, "", True, "Biren") for i in range(4)
    )
    handshake = {"hami.io/node-handshake-biren": REPORTED}
    return registered(
        node, "biren", "Biren", "birentech.com/gpu", "hami.io/node-biren-register", devices, **handshake
    )


def _iluvatar(node: str) -> VendorPart:
    devices = tuple(
        DeviceInfo(f"{node}-BI-{i}", i, 4, 32768, 100, "BI-V150", 0, "hami-core", True, "BI-V150")
        for i in range(4)
    )
    return VendorPart(
        kind="iluvatar",
        key="BI-V150",
        resource="iluvatar.ai/BI-V150-vgpu",
        devices=devices,
        annotations={"hami.io/node-BI-V150-register": encode_register_legacy(devices)},
        allocatable={"iluvatar.ai/BI-V150-vgpu": "16"},
        to_allocate="hami.io/BI-V150-devices-to-allocate",
    )


PARTS: Mapping[str, Callable[[str], VendorPart]] = {
    "ascend910b3": lambda node: _ascend(node, "Ascend910B3", 8, 4, 65536, 20, True),
    "ascend910c": lambda node: _ascend(node, "Ascend910C", 8, 4, 65536, 20, True),
    "ascend310p": lambda node: _ascend(node, "Ascend310P", 4, 7, 21527, 8, False),
    "hygon": _hygon,
    "cambricon": _cambricon,
    "mthreads": _mthreads,
    "awsneuron": _awsneuron,
    "amd": _amd,
    "vastai": _vastai,
    "biren": _biren,
    "metax": metax,
    "metax-sgpu": metax_sgpu,
    "iluvatar": _iluvatar,
    "kunlun": kunlun,
    "kunlun-vxpu": kunlun_vxpu,
    "enflame": enflame,
    "enflame-drs": enflame_drs,
}


def parse_vendors(text: str) -> list[tuple[str, ...]]:
    """`nvidia,ascend910b3,hygon+cambricon` -> the vendor parts of each node kind, cycled over the nodes
    (`nvidia` = NVIDIA GPUs only; `+` combines parts on one node; NVIDIA GPUs come with every kind that
    names `nvidia`)."""
    kinds: list[tuple[str, ...]] = []
    for entry in (e.strip() for e in text.split(",") if e.strip()):
        parts = tuple(p.strip() for p in entry.split("+") if p.strip())
        for part in parts:
            if part != "nvidia" and part not in PARTS:
                raise ValueError(f"unknown vendor {part!r}; known: nvidia, {', '.join(PARTS)}")
        kinds.append(parts)
    if not kinds:
        raise ValueError("no vendor given")
    return kinds
