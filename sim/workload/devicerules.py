"""Can these pods hold this device together? Each vendor's sharing rules, judged from the API alone — what the
demo's and the chaos storm's oversubscription verdicts add to the per-dimension sums (sim.workload.report).

Summing slots, memory and cores over a device's holders and comparing with its `count`, `devmem` and
`devcore` is the rule of most vendors, not of all. Two pods can stay within every sum and still have been
handed the same thing (issue 19, finding 2): AWS Neuron records a core *bitmask* per allocation, so two pods
given the same NeuronCore of a 2-core device sum to 1 + 1 = 2 of the mask 3 and 2 of 2 slots. Here, per
device, over the holders' allocations as their annotations record them:

- `core-mask` (AWS Neuron): every holder's mask (the OR of its containers' `usedcores` on the device) lies
  within the device's mask (`devcore` = 2^cores - 1), and no bit is held by two pods — the invariant of
  app/devices/awsneuron/fit.py ("no core is ever given twice");
- `exclusive` — whole cards (the vendors built on `app.devices.common.capacity.WholeCards`: Kunlunxin XPU,
  Metax GPU, Enflame GCU) take an idle card only, so two holders is one too many; and on the vendors whose
  Fit refuses to share a card a pod takes 100 % of the cores of (HAMi's template loop and NVIDIA's:
  `total_core == 100 and cores == 100 and used > 0`, and no cores left for a pod asking none) — NVIDIA,
  Hygon, Cambricon, Iluvatar, Metax sGPU — a pod with a container that took all 100 cores shares the
  device with nobody (Metax sGPU: but online pods, whose Fit skips the core checks);
- `vxpu-template` (Kunlunxin vXPU): a device is shared only by vXPUs of one size
  (`app.devices.kunlun.vxpu.fits_vxpu`: `usedmem / used == memreq`);
- `app-class`, `qos` (Metax sGPU, `app.devices.metax.sgpu_fit`): pods with an app class (online/offline)
  never share a device with pods without one (`app_class_fits`), and the non-online, non-exclusive holders
  of a device agree on one QoS policy (`qos_fits`); the classes and policies are read with the vendor's
  own `usage_tags`, as the ledger records them.

Slot, memory and core sums stay the first check (sim.workload.report.DeviceLoad.over). Order-dependent rules
(Metax sGPU: an online pod may join offline ones but not the other way round; NVIDIA: no pod asking no cores
on a device whose cores are all taken) are not judged: some order of arrival makes such holders legal.
Neither are MIG slices (the storm has no MIG nodes; the demo's MIG nodes are judged by the sums).

The harness reuses the product's public pieces listed above (vendor classes, `usage_tags`, the tag and
class constants) instead of restating them, but never the bind re-check (`app.core.recheck`) it is there
to judge.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from app.core.mig import MIG_MODE
from app.core.model import ContainerDevice, DeviceInfo
from app.core.vendor import Vendor
from app.devices.awsneuron import AwsNeuron
from app.devices.cambricon import Cambricon
from app.devices.common.capacity import WholeCards
from app.devices.hygon import Hygon
from app.devices.iluvatar import Iluvatar
from app.devices.kunlun import KunlunVxpu
from app.devices.metax import MetaxSgpu
from app.devices.metax.sgpu_fit import APP_TAG, ONLINE, QOS_TAG, usage_tags
from app.devices.nvidia import Nvidia

FULL_CORES = 100  # the cores of a device whose cores are a percentage
ALONE_AT_FULL_CORES = (Nvidia, Hygon, Cambricon, Iluvatar, MetaxSgpu)


@dataclass(frozen=True)
class Holder:
    """One pod holding a device: its key, its allocation's entries naming the device (every container, as
    the annotation lists them) and its annotations."""

    pod: str
    entries: tuple[ContainerDevice, ...]
    annotations: Mapping[str, str] = field(default_factory=dict)


def conflicts(device: DeviceInfo, vendor: Vendor | None, holders: Sequence[Holder]) -> list[str]:
    """The rules of `vendor` (the device's; None: unknown, sums only) that `holders` break together on
    `device` (module docstring); [] when none."""
    found: list[str] = []
    if isinstance(vendor, AwsNeuron) and _masks_clash(device, holders):
        found.append("core-mask")
    if len(holders) > 1 and _exclusive(device, vendor, holders):
        found.append("exclusive")
    if isinstance(vendor, KunlunVxpu) and len({e.usedmem for h in holders for e in h.entries}) > 1:
        found.append("vxpu-template")
    if isinstance(vendor, MetaxSgpu):
        found.extend(_metax_sgpu(holders))
    return found


def _masks_clash(device: DeviceInfo, holders: Sequence[Holder]) -> bool:
    """A mask outside the device's cores, or one core in the masks of two pods."""
    taken = 0
    for holder in holders:
        mask = 0
        for entry in holder.entries:
            mask |= entry.usedcores
        if mask & ~device.devcore or mask & taken:
            return True
        taken |= mask
    return False


def _exclusive(device: DeviceInfo, vendor: object, holders: Sequence[Holder]) -> bool:
    if isinstance(vendor, WholeCards):
        return True
    if not isinstance(vendor, ALONE_AT_FULL_CORES) or device.devcore != FULL_CORES or device.mode == MIG_MODE:
        return False
    online = [_app_class(h) == ONLINE for h in holders] if isinstance(vendor, MetaxSgpu) else []
    for index, holder in enumerate(holders):
        if not _takes_all_cores(holder) or (online and online[index]):
            continue
        others = [i for i in range(len(holders)) if i != index]
        if not online or not all(online[i] for i in others):
            return True
    return False


def _takes_all_cores(holder: Holder) -> bool:
    """One of the pod's containers asked all the device's cores (the Fits' rule is per request: two
    containers of 50 % each share the device like two pods would)."""
    return any(entry.usedcores >= FULL_CORES for entry in holder.entries)


def _app_class(holder: Holder) -> str:
    tags = usage_tags(holder.annotations)
    return next((t[len(APP_TAG) :] for t in tags if t.startswith(APP_TAG)), "")


def _metax_sgpu(holders: Sequence[Holder]) -> list[str]:
    found = []
    classes = [_app_class(h) for h in holders]
    if len({bool(c) for c in classes}) > 1:
        found.append("app-class")
    policies: set[str] = set()
    for holder, app in zip(holders, classes, strict=True):
        if app == ONLINE or _takes_all_cores(holder):
            continue
        tags = usage_tags(holder.annotations)
        policies.update(t[len(QOS_TAG) :] for t in tags if t.startswith(QOS_TAG) and t != QOS_TAG)
    if len(policies) > 1:
        found.append("qos")
    return found
