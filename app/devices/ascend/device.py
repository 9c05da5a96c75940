"""One Huawei Ascend chip type (reference vendors §2.1): HAMi's `Devices` backend for one `vnpus.configs[]`
entry, keyed by its common word (e.g. `Ascend910B3`).

Devices come from `hami.io/node-register-<cw>` (JSON, with `custominfo.NetworkID` on 910-series chips) and
the node's `hami-vnpu-core` switch; health is the generic handshake on `hami.io/node-handshake-<cw>`; pods
take the shared node lock. At filter time the chip writes the device lists, `predicate-time` and
`huawei.com/<cw>`, the runtime info the Ascend device plugin reads (UUID and, in hard-split mode, the vNPU
template of each chip).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from app.core import codec
from app.core import reasons as r
from app.core.model import DeviceRequest, DeviceUsage, PodSingleDevice
from app.core.vendor import (
    ALLOCATION,
    INFO,
    AnnotationContext,
    Discovery,
    FitContext,
    FitOutcome,
    NodeView,
    PodKey,
    Reads,
    ResourceNames,
    ScoreContext,
)
from app.devices.ascend import admission
from app.devices.ascend import fit as ascend_fit
from app.devices.ascend.config import Chip, parse_ascend_config
from app.devices.common import requests, template
from app.devices.common.base import device_lists
from app.devices.common.podkeys import hami_lists
from app.devices.common.registered import Keys, Registered, register_devices

PREDICATE_TIME = "predicate-time"
NODE_HAMI_CORE = "hami-vnpu-core"  # node annotation written by the Ascend device plugin
INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Ascend(Registered):
    PLUGIN: ClassVar[str] = "Huawei's Ascend device plugin"
    chip: Chip = field(default_factory=lambda: Chip("Ascend910B3"))
    hami_vnpu_core: bool = False  # vnpus.hamiVnpuCore: soft split supported unless a node says otherwise

    # --- keys (§2.1.1) ------------------------------------------------------------------------------------

    @property
    def keys(self) -> Keys:
        word = self.chip.common_word
        return Keys.per_word(word, f"hami.io/node-register-{word}")

    @property
    def register(self) -> str:
        return self.keys.register

    @property
    def runtime_annotation(self) -> str:
        return f"huawei.com/{self.key}"

    @property
    def resources(self) -> ResourceNames:
        c = self.chip
        return ResourceNames(c.resource_name, c.resource_memory_name, "", c.resource_core_name)

    @property
    def memory_factor(self) -> int:
        return self.chip.memory_factor

    @property
    def reads(self) -> Reads:
        return Reads(node_annotations=(NODE_HAMI_CORE,))

    @property
    def pod_keys(self) -> tuple[PodKey, ...]:
        return (
            *hami_lists(self.to_allocate_annotation, self.allocated_annotation, self.PLUGIN),
            PodKey(self.runtime_annotation, ALLOCATION),  # the chip's vNPU allocation the plugin reads
            PodKey(PREDICATE_TIME, INFO),
        )

    @property
    def scores_nodes(self) -> bool:
        return self.key.startswith("Ascend910")

    @property
    def rules(self) -> template.Rules:
        return template.Rules(self.key, f"hami.io/use-{self.key}-uuid", f"hami.io/no-use-{self.key}-uuid")

    # --- registration (§2.1.2) ----------------------------------------------------------------------------

    def discover(self, node: NodeView) -> Discovery:
        devices = register_devices(node, self.keys, custom=True, empty="no device found on node")
        switch = node.annotations.get(NODE_HAMI_CORE)
        return Discovery(devices, {NODE_HAMI_CORE: switch} if switch is not None else {})

    # --- requests and Fit (§2.1.3, §2.1.5) ----------------------------------------------------------------

    def container_request(self, container: Mapping[str, Any]) -> DeviceRequest | None:
        c = self.chip
        nums = requests.count(container, c.resource_name)
        if nums is None:
            return None
        factor = max(c.memory_factor, 1)
        memory = requests.integer(container, c.resource_memory_name, INT32_MAX // factor, "MiB") or 0
        cores = requests.integer(container, c.resource_core_name, INT32_MAX, "AI cores", rounded=True) or 0
        memory *= factor
        return DeviceRequest(nums, self.key, memory, 100 if memory == 0 else 0, cores)

    def fit(self, devices: Sequence[DeviceUsage], request: DeviceRequest, ctx: FitContext) -> FitOutcome:
        soft = ctx.pod_annotations.get(admission.VNPU_MODE) == admission.HAMI_CORE
        if soft and not ascend_fit.node_supports_hami_core(ctx.node, self.key, self.hami_vnpu_core):
            return FitOutcome(False, (), r.gen_reason({r.MODE_NOT_FIT: 1}, len(devices)))  # §3.1 #7: 1/<n>
        rules = self.rules
        if soft:  # cores are percentages of a chip in hami-core mode
            rules = template.Rules(rules.vendor, rules.use_uuid, rules.nouse_uuid, total_core=lambda _d: 100)
        return ascend_fit.fit(self.key, rules, devices, request, ctx)

    def score_node(self, ctx: ScoreContext) -> float:
        return ascend_fit.score(ctx)

    # --- annotations (§2.1.7) and the webhook (§2.1.4) ----------------------------------------------------

    def pod_annotations(
        self, devices: PodSingleDevice, ctx: AnnotationContext | None = None
    ) -> dict[str, str]:
        result = device_lists(devices, self.to_allocate_annotation, self.allocated_annotation)
        if not result:
            return result
        soft = admission.hami_core(dict(ctx.pod)) if ctx is not None else False
        runtime = []
        for group in devices:
            for device in group:
                entry: dict[str, Any] = {"UUID": device.uuid}
                if not soft:
                    named = admission.trim_memory(self.chip, device.usedmem)[1]
                    if named is not None:
                        entry["temp"] = named.name
                if device.usedmem:
                    entry["memory"] = device.usedmem
                if device.usedcores:
                    entry["core"] = device.usedcores
                runtime.append(entry)
        result[PREDICATE_TIME] = str(ctx.now_unix if ctx is not None else 0)
        result[self.runtime_annotation] = codec.go_json(runtime)
        return result

    def mutate_container(self, container: dict[str, Any], pod: dict[str, Any]) -> bool:
        return admission.mutate_container(self.chip, container, pod)


def ascend_vendors(config: Any) -> tuple[Ascend, ...]:
    """One vendor per configured chip (HAMi: one backend per `vnpus.configs[]` entry)."""
    parsed = parse_ascend_config(config)
    return tuple(Ascend(chip, parsed.hami_vnpu_core) for chip in parsed.chips)
