"""Small builders for the core tests: devices, nodes, pods and one-call decisions.

Kept in a uniquely named module (the test folders have no `__init__.py`, so pytest puts each folder on
`sys.path` and module basenames must not clash).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from app.core.decision import Decision, Policies, decide, pod_context
from app.core.fit import PodContext
from app.core.model import DeviceInfo, DeviceUse, MigProfile, NodeDevices, QuotaView
from app.core.vendor import Vendor
from app.devices.nvidia import Nvidia, NvidiaConfig

V100 = "NVIDIA-Tesla V100-PCIE-32GB"
NVIDIA = Nvidia()
VENDORS: tuple[Vendor, ...] = (NVIDIA,)


def gpu(
    uuid: str,
    index: int = 0,
    *,
    count: int = 10,
    mem: int = 32768,
    core: int = 100,
    type: str = V100,
    numa: int = 0,
    mode: str = "hami-core",
    health: bool = True,
    pair: Mapping[str, int] | None = None,
    mig_profiles: tuple[MigProfile, ...] = (),
) -> DeviceInfo:
    return DeviceInfo(
        id=uuid,
        index=index,
        count=count,
        devmem=mem,
        devcore=core,
        type=type,
        numa=numa,
        mode=mode,
        health=health,
        vendor="NVIDIA",
        mig_profiles=mig_profiles,
        pair_scores=dict(pair or {}),
    )


def node(name: str, *devices: DeviceInfo, cordoned: Sequence[str] = ()) -> NodeDevices:
    return NodeDevices(name, tuple(devices), frozenset(cordoned))


def ctr(
    name: str = "c",
    gpu: Any = None,
    mem: Any = None,
    pct: Any = None,
    cores: Any = None,
    *,
    section: str = "limits",
) -> dict[str, Any]:
    """A container asking for `gpu` GPUs (None: no GPU resources at all)."""
    values = {
        "nvidia.com/gpu": gpu,
        "nvidia.com/gpumem": mem,
        "nvidia.com/gpumem-percentage": pct,
        "nvidia.com/gpucores": cores,
    }
    resources = {k: v for k, v in values.items() if v is not None}
    return {"name": name, "resources": {section: resources} if resources else {}}


def pod(
    *containers: dict[str, Any],
    init: Sequence[dict[str, Any]] = (),
    annotations: Mapping[str, str] | None = None,
    name: str = "p",
    namespace: str = "default",
    uid: str = "uid-p",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers)}
    if init:
        spec["initContainers"] = list(init)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "annotations": dict(annotations or {}),
        },
        "spec": spec,
    }


def context(
    the_pod: Mapping[str, Any],
    *,
    gpu_policy: str = "spread",
    node_policy: str = "binpack",
    quota: QuotaView | None = None,
    vendors: Sequence[Vendor] = VENDORS,
) -> PodContext:
    return pod_context(the_pod, vendors, Policies(gpu=gpu_policy, node=node_policy), quota or {})


def run(
    the_pod: Mapping[str, Any],
    nodes: Sequence[NodeDevices],
    usage: Mapping[str, Mapping[str, DeviceUse]] | None = None,
    *,
    gpu_policy: str = "spread",
    node_policy: str = "binpack",
    quota: QuotaView | None = None,
    config: NvidiaConfig | None = None,
) -> Decision:
    vendors: tuple[Vendor, ...] = (Nvidia(config),) if config else VENDORS
    ctx = context(the_pod, gpu_policy=gpu_policy, node_policy=node_policy, quota=quota, vendors=vendors)
    by_name = {n.name: n for n in nodes}
    return decide(ctx, [n.name for n in nodes], by_name, usage or {}, vendors)


class ScenarioLike(Protocol):
    """What the hypothesis scenarios of core_strategies and test_mig_fit have in common."""

    @property
    def pod(self) -> Mapping[str, Any]: ...
    @property
    def nodes(self) -> Sequence[NodeDevices]: ...
    @property
    def usage(self) -> Mapping[str, Mapping[str, DeviceUse]]: ...
    @property
    def gpu_policy(self) -> str: ...
    @property
    def node_policy(self) -> str: ...


def run_scenario(scenario: ScenarioLike) -> Decision:
    return run(
        scenario.pod,
        scenario.nodes,
        scenario.usage,
        gpu_policy=scenario.gpu_policy,
        node_policy=scenario.node_policy,
    )
