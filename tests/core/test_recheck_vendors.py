"""The bind-time re-check asks each device's vendor (issue 19, finding 2): AWS Neuron core bitmasks never
overlap and stay ORed in usage, Kunlunxin vXPU keeps one template size per device, Metax sGPU its app
classes and QoS, the template vendors their exclusive and exhausted-compute rules; and, for every vendor
family, two decisions made without each other (two leaders, each with the other's pod absent from its
ledger) pass the re-check together only if the vendor's Fit accepts the later one next to the earlier:
offered only its devices, with the earlier pod's usage on them, it takes them, with core bits and MIG
slices no other pod holds. (Each mutation that drops one vendor's rule fails its family here.)"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from core_builders import context, pod
from core_strategies import mig_scenarios
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from vendor_strategies import FAMILIES, VENDORS, mixed_scenarios

from app.core.decision import decide
from app.core.mig import overlaps
from app.core.model import ContainerDevice, DeviceInfo, DeviceUse, NodeDevices, PodDevices
from app.core.policy import MUTEX, policy_contains
from app.core.recheck import misfit
from app.core.reservations import vendor_tags
from app.core.usage import allocation_uses, sum_uses, working_devices
from app.core.vendor import Vendor, core_masks
from app.devices.awsneuron import AwsNeuron
from app.devices.kunlun import KunlunVxpu
from app.devices.metax import MetaxSgpu
from app.devices.nvidia import Nvidia

NEURON, VXPU, SGPU, NVIDIA = AwsNeuron(), KunlunVxpu(), MetaxSgpu(), Nvidia()
REGISTRY: tuple[Vendor, ...] = (NEURON, VXPU, SGPU, NVIDIA)
MASKS = core_masks(REGISTRY)


def _device(uuid: str, vendor: str, count: int, mem: int, core: int, **custom: Any) -> DeviceInfo:
    return DeviceInfo(uuid, 0, count, mem, core, vendor, 0, "", True, vendor, custom=custom)


NODE = NodeDevices(
    "n1",
    (
        _device("n1-AWSNeuron-0", "AWSNeuron", 2, 0, 3, AWSNodeType="trn1.32xlarge"),
        _device("n1-xpu-0", "XPU", 4, 98304, 100),
        _device("n1-sgpu-0", "Metax-SGPU", 8, 65536, 100),
        _device("n1-GPU-0", "NVIDIA", 10, 32768, 100),
    ),
)


def _neuron_core(mask: int) -> dict[str, DeviceUse]:
    """One pod holding the Neuron cores `mask` (as a rebuild or the filter records it)."""
    devices: PodDevices = {"AWSNeuron": ((ContainerDevice("n1-AWSNeuron-0", "AWSNeuron", 0, mask),),)}
    return allocation_uses(devices, 0, masks=MASKS)


def _tagged(slots: int, mem: int, cores: int, *notes: tuple[str, str]) -> DeviceUse:
    return DeviceUse(slots, mem, cores, tags=tuple(sorted(SGPU.usage_tags(dict(notes)))))


ONLINE = ("metax-tech.com/sgpu-app-class", "online")
OFFLINE = ("metax-tech.com/sgpu-app-class", "offline")
BEST_EFFORT = ("metax-tech.com/sgpu-qos-policy", "best-effort")
FIXED = ("metax-tech.com/sgpu-qos-policy", "fixed-share")

CASES = [
    # AWS Neuron: two leaders each gave core 0 (mask 1); summed (2 <= 3) the capacity check passed
    ("neuron-same-core", _neuron_core(1), _neuron_core(1), "core 0 of n1-AWSNeuron-0 is held by another pod"),
    ("neuron-other-core", _neuron_core(1), _neuron_core(2), ""),
    (
        "neuron-whole-device",
        _neuron_core(2),
        _neuron_core(3),
        "core 1 of n1-AWSNeuron-0 is held by another pod",
    ),
    # Kunlunxin vXPU: one template size per device (FitVXPU), though 24576 + 49152 <= 98304
    (
        "vxpu-other-template",
        {"n1-xpu-0": DeviceUse(1, 24576, 25)},
        {"n1-xpu-0": DeviceUse(1, 49152, 50)},
        "n1-xpu-0 holds vXPUs of 24576 MiB, where this pod's take 49152 MiB",
    ),
    ("vxpu-same-template", {"n1-xpu-0": DeviceUse(1, 24576, 25)}, {"n1-xpu-0": DeviceUse(2, 49152, 50)}, ""),
    # Metax sGPU: app classes and QoS, read from the others' usage tags
    (
        "sgpu-offline-next-to-online",
        {"n1-sgpu-0": _tagged(1, 1024, 0, ONLINE)},
        {"n1-sgpu-0": _tagged(1, 1024, 10, OFFLINE, BEST_EFFORT)},
        "n1-sgpu-0 runs 1 online and 0 offline tasks, where this pod's class is 'offline'",
    ),
    (
        "sgpu-other-qos",
        {"n1-sgpu-0": _tagged(1, 1024, 10, FIXED)},
        {"n1-sgpu-0": _tagged(1, 1024, 10, BEST_EFFORT)},
        "n1-sgpu-0 runs tasks of another QoS policy than this pod's 'best-effort'",
    ),
    (
        "sgpu-exclusive",
        {"n1-sgpu-0": _tagged(1, 1024, 0, BEST_EFFORT)},
        {"n1-sgpu-0": _tagged(1, 1024, 100, BEST_EFFORT)},
        "n1-sgpu-0 is shared by another pod, where this pod's task takes it whole",
    ),
    (
        "sgpu-same-qos",
        {"n1-sgpu-0": _tagged(1, 1024, 10, FIXED)},
        {"n1-sgpu-0": _tagged(1, 1024, 10, FIXED)},
        "",
    ),
    # the template's rules (NVIDIA): a whole-card task alone, no 0-core task on an exhausted card
    (
        "nvidia-exclusive",
        {"n1-GPU-0": DeviceUse(1, 1000, 0)},
        {"n1-GPU-0": DeviceUse(1, 1000, 100)},
        "n1-GPU-0 is shared by another pod, where this pod's task takes it whole",
    ),
    (
        "nvidia-exhausted",
        {"n1-GPU-0": DeviceUse(2, 1000, 100)},
        {"n1-GPU-0": DeviceUse(1, 1000, 0)},
        "n1-GPU-0 has every core taken by other pods, where this pod's task takes none",
    ),
    ("nvidia-room", {"n1-GPU-0": DeviceUse(2, 1000, 60)}, {"n1-GPU-0": DeviceUse(1, 1000, 40)}, ""),
]


@pytest.mark.parametrize(("others", "own", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_vendor_judges_its_devices(
    others: dict[str, DeviceUse], own: dict[str, DeviceUse], expected: str
) -> None:
    assert misfit(NODE, others, own, REGISTRY) == expected


def test_neuron_usage_ors_the_masks_so_a_core_given_twice_stays_taken() -> None:
    both = sum_uses([_neuron_core(1), _neuron_core(1)])
    assert both["n1-AWSNeuron-0"].cores == 1  # summed it was 2: core 1 taken, core 0 free
    device = next(d for d in working_devices(NODE, both) if d.id == "n1-AWSNeuron-0")
    assert device.usedcores == 1 and device.used == 2
    # one of the two leaves: core 0 is still held by the other
    assert (
        both["n1-AWSNeuron-0"].minus(_neuron_core(1)["n1-AWSNeuron-0"]) == _neuron_core(1)["n1-AWSNeuron-0"]
    )


# --- every vendor: two decisions that did not see each other --------------------------------------------

EXAMPLES = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def _decide(scenario: Any, the_pod: dict[str, Any], node: NodeDevices, usage: dict[str, DeviceUse]) -> Any:
    ctx = context(the_pod, gpu_policy=scenario.gpu_policy, node_policy=scenario.node_policy, vendors=VENDORS)
    winner = decide(ctx, [node.name], {node.name: node}, {node.name: usage}, VENDORS).winner
    if winner is None or winner.devices is None:
        return None, ctx
    return winner.devices, ctx


def _uses(devices: PodDevices, ctx: Any) -> dict[str, DeviceUse]:
    return allocation_uses(
        devices, ctx.requests.init_count, vendor_tags(ctx.annotations, VENDORS), core_masks(VENDORS)
    )


@pytest.mark.parametrize("family", FAMILIES)
@EXAMPLES
@given(data=st.data())
def test_two_leaders_pass_the_recheck_together_only_if_fit_accepts_them_together(
    family: str, data: st.DataObject
) -> None:
    scenario = data.draw(mixed_scenarios(max_nodes=1, among=(family,)))
    other = data.draw(mixed_scenarios(max_nodes=1, among=(family,))).pod
    _two_leaders(scenario, other)


@EXAMPLES
@given(data=st.data())
def test_two_leaders_of_mig_slices_pass_the_recheck_together_only_if_fit_accepts_them_together(
    data: st.DataObject,
) -> None:
    scenario = data.draw(mig_scenarios())
    one = dataclasses.replace(scenario, nodes=scenario.nodes[:1])
    _two_leaders(one, data.draw(mig_scenarios()).pod)


def _two_leaders(scenario: Any, other: dict[str, Any]) -> None:
    """A decides with `other`, B with the scenario's pod (its first container asking anything), each on the
    scenario's first node and usage, neither seeing the other."""
    if policy_contains(scenario.gpu_policy, MUTEX):  # the pod's policy is the filter's: never re-checked
        scenario = dataclasses.replace(scenario, gpu_policy="spread")
    node = scenario.nodes[0]
    base = scenario.usage.get(node.name, {})
    first = pod(
        *other["spec"]["containers"],
        init=other["spec"].get("initContainers", []),
        annotations=other["metadata"]["annotations"],
        name="first",
        uid="uid-first",
    )
    # B: one container (several containers of one pod on one device are judged by their sum, and a Fit
    # replayed on B's devices alone could order them otherwise: docs/compatibility.md)
    asking = [c for c in scenario.pod["spec"]["containers"] if c["resources"]][:1]
    assume(asking)
    second = pod(
        *asking, annotations=scenario.pod["metadata"]["annotations"], name="second", uid="uid-second"
    )
    a, a_ctx = _decide(scenario, first, node, base)
    b, b_ctx = _decide(scenario, second, node, base)
    assume(a is not None and b is not None)
    a_uses, b_uses = _uses(a, a_ctx), _uses(b, b_ctx)
    others = sum_uses([base, a_uses])
    if misfit(node, others, b_uses, VENDORS):
        return
    # B passed next to A: B's Fit, given A and offered only B's devices, takes them ...
    mine = dataclasses.replace(node, devices=tuple(d for d in node.devices if d.id in b_uses))
    again, _ = _decide(scenario, second, mine, {k: v for k, v in others.items() if k in b_uses})
    alone, _ = _decide(scenario, second, mine, {k: v for k, v in base.items() if k in b_uses})
    if alone is not None:  # (on B's devices alone B's Fit may need others to choose from: topology)
        assert again is not None, (a_uses, b_uses)
    # ... with B's own core bits and MIG slices, which no other holder has
    for uuid, use in b_uses.items():
        taken = others.get(uuid, DeviceUse())
        assert not (use.masks and use.cores & taken.cores), (uuid, use, taken)
        assert not any(overlaps(m.placement, t.placement) for m in use.mig for t in taken.mig), (
            uuid,
            use,
            taken,
        )
