"""Devices derived from node capacity instead of a register annotation (HAMi's Cambricon, Moore Threads,
Kunlunxin XPU, Metax GPU, Enflame GCU, AWS Neuron: vendors §1.2).

The device plugin advertises a total of virtual cores (and of memory units) as extended resources; HAMi
makes identical devices `<node>-<word>-<i>` out of them: one per `cores_per_device` cores (a partial one
counts: `i` runs while `i * cores_per_device < total`), each with an equal share of the memory. Such a
vendor has no handshake and is always healthy; a node carries it when the core capacity is present and not
0 (a plugin with no devices), and a core capacity that is not an integer makes the node unusable.
"""

from __future__ import annotations

from datetime import datetime

from app.core import codec, health
from app.core.health import Health, Reported
from app.core.model import DeviceInfo
from app.core.score import i32
from app.core.vendor import Discovery, NodeView, Reads
from app.devices.common.base import NamedResources
from app.devices.common.nodes import capacity_int64


class CapacityDevices(NamedResources):
    """Mixin for capacity-derived vendors: the devices come from the section's core and memory resources."""

    __slots__ = ()

    @property
    def core_resource(self) -> str:
        return self.config.resource_core_name

    @property
    def memory_resource(self) -> str:
        return self.config.resource_memory_name

    @property
    def handshake_annotation(self) -> str:
        return ""

    @property
    def source(self) -> str:
        return f"capacity {self.core_resource}"

    @property
    def reads(self) -> Reads:
        return Reads(capacity=(self.core_resource, self.memory_resource))

    def registered(self, node: NodeView) -> bool:
        value = node.capacity.get(self.core_resource)
        return value is not None and value not in ("0", 0)

    def health(self, node: NodeView, reported: Reported, now: datetime) -> Health:
        return health.ALWAYS_HEALTHY

    def derive(
        self, node: NodeView, *, cores_per_device: int, unit_mib: int, word: str, count: int, devcore: int
    ) -> Discovery:
        """HAMi's `GetNodeDevices` of a capacity-derived vendor: `Devmem = int32(memory x unit x
        cores_per_device / cores)` MiB per device, type and vendor = the vendor key."""
        cores = capacity_int64(node, self.core_resource) or 0
        if cores <= 0:
            raise codec.CodecError(f"device not found {self.core_resource}")
        memory = capacity_int64(node, self.memory_resource) or 0
        devmem = i32(memory * unit_mib * cores_per_device // cores)
        devices = tuple(
            DeviceInfo(f"{node.name}-{word}-{i}", i, count, devmem, devcore, self.key, 0, "", True, self.key)
            for i in range((cores + cores_per_device - 1) // cores_per_device)
        )
        return Discovery(devices)
