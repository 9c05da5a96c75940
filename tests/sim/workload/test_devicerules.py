"""The vendor-aware oversubscription verdict (sim/workload/devicerules.py): holders that stay within every sum
of a device can still break its vendor's rules — two pods holding one NeuronCore (issue 19, finding 2), a
whole card held twice, two vXPU sizes on one XPU, Metax sGPU classes and QoS mixed — and the verdicts of the
demo and of the chaos storm (sim.workload.report, sim.chaos.check) report them; holders a vendor lets share
pass."""

from __future__ import annotations

import pytest

from app.core.model import ContainerDevice, DeviceInfo
from sim.workload.devicerules import Holder, conflicts
from sim.workload.report import VENDOR_BY_KEY


def device(vendor: str, count: int, devmem: int, devcore: int, mode: str = "") -> DeviceInfo:
    return DeviceInfo(f"dev-{vendor}", 0, count, devmem, devcore, vendor, 0, mode, True, vendor)


def holder(name: str, vendor: str, cores: int, mem: int = 0, notes: dict[str, str] | None = None) -> Holder:
    entry = ContainerDevice(f"dev-{vendor}", vendor, mem, cores)
    return Holder(name, (entry,), notes or {})


def halves(name: str) -> Holder:
    """A pod whose two containers took 50 % of the cores each."""
    entry = ContainerDevice("dev-NVIDIA", "NVIDIA", 1000, 50)
    return Holder(name, (entry, entry), {})


NEURON = device("AWSNeuron", 2, 0, 3)
ONLINE = {"metax-tech.com/sgpu-app-class": "online"}
OFFLINE = {"metax-tech.com/sgpu-app-class": "offline", "metax-tech.com/sgpu-qos-policy": "best-effort"}


def qos(policy: str) -> dict[str, str]:
    return {"metax-tech.com/sgpu-qos-policy": policy}


CASES = [
    ("neuron-same-core", NEURON, [holder("a", "AWSNeuron", 1), holder("b", "AWSNeuron", 1)], ["core-mask"]),
    ("neuron-other-core", NEURON, [holder("a", "AWSNeuron", 1), holder("b", "AWSNeuron", 2)], []),
    ("neuron-whole-and-core", NEURON,
     [holder("a", "AWSNeuron", 3), holder("b", "AWSNeuron", 2)], ["core-mask"]),
    ("neuron-outside-the-mask", NEURON, [holder("a", "AWSNeuron", 4)], ["core-mask"]),
    ("kunlun-card-twice", device("kunlun", 100, 98304, 100),
     [holder("a", "kunlun", 100, 98304), holder("b", "kunlun", 100, 98304)], ["exclusive"]),
    ("gcu-card-twice", device("GCU", 1, 100, 100),
     [holder("a", "GCU", 100, 100), holder("b", "GCU", 100, 100)], ["exclusive"]),
    ("gcu-alone", device("GCU", 1, 100, 100), [holder("a", "GCU", 100, 100)], []),
    ("nvidia-full-cores-shared", device("NVIDIA", 10, 81920, 100),
     [holder("a", "NVIDIA", 100, 1000), holder("b", "NVIDIA", 0, 1000)], ["exclusive"]),
    ("nvidia-two-containers-of-halves-and-another-pod", device("NVIDIA", 10, 81920, 100),
     [holder("a", "NVIDIA", 0, 1000), halves("b")], []),
    ("nvidia-halves", device("NVIDIA", 10, 81920, 100),
     [holder("a", "NVIDIA", 50, 1000), holder("b", "NVIDIA", 50, 1000)], []),
    ("nvidia-mig-not-judged", device("NVIDIA", 7, 81920, 100, "mig"),
     [holder("a", "NVIDIA", 100, 1000), holder("b", "NVIDIA", 0, 1000)], []),
    ("cambricon-full-cores-shared", device("MLU", 100, 23808, 100),
     [holder("a", "MLU", 100, 2560), holder("b", "MLU", 25, 2560)], ["exclusive"]),
    ("vxpu-two-sizes", device("XPU", 4, 98304, 100),
     [holder("a", "XPU", 25, 24576), holder("b", "XPU", 50, 49152)], ["vxpu-template"]),
    ("vxpu-one-size", device("XPU", 4, 98304, 100),
     [holder("a", "XPU", 25, 24576), holder("b", "XPU", 25, 24576)], []),
    ("sgpu-two-policies", device("Metax-SGPU", 16, 32768, 100),
     [holder("a", "Metax-SGPU", 25, 4096, qos("best-effort")),
      holder("b", "Metax-SGPU", 25, 4096, qos("fixed-share"))], ["qos"]),
    ("sgpu-one-policy", device("Metax-SGPU", 16, 32768, 100),
     [holder("a", "Metax-SGPU", 25, 4096, qos("burst-share")),
      holder("b", "Metax-SGPU", 25, 4096, qos("burst-share"))], []),
    ("sgpu-classed-and-not", device("Metax-SGPU", 16, 32768, 100),
     [holder("a", "Metax-SGPU", 0, 4096, ONLINE), holder("b", "Metax-SGPU", 25, 4096, qos("best-effort"))],
     ["app-class"]),
    ("sgpu-online-joins-offline-exclusive", device("Metax-SGPU", 16, 32768, 100),
     [holder("a", "Metax-SGPU", 100, 4096, OFFLINE), holder("b", "Metax-SGPU", 0, 4096, ONLINE)], []),
    ("sgpu-exclusive-shared", device("Metax-SGPU", 16, 32768, 100),
     [holder("a", "Metax-SGPU", 100, 4096, qos("best-effort")),
      holder("b", "Metax-SGPU", 25, 4096, qos("best-effort"))], ["exclusive"]),
]  # fmt: skip


@pytest.mark.parametrize(("dev", "holders", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_vendor_rules(dev: DeviceInfo, holders: list[Holder], expected: list[str]) -> None:
    assert conflicts(dev, VENDOR_BY_KEY[dev.vendor], holders) == expected
