"""Devices derived from node capacity instead of a register annotation (HAMi's Cambricon, Moore Threads,
Kunlunxin XPU, Metax GPU, Enflame GCU, AWS Neuron: vendors §1.2).

The device plugin advertises a total of virtual cores (and of memory units) as extended resources; HAMi
makes identical devices `<node>-<word>-<i>` out of them: one per `cores_per_device` cores (a partial one
counts: `i` runs while `i * cores_per_device < total`), each with an equal share of the memory. Such a
vendor has no handshake and is always healthy; a node carries it when the core capacity is present and not
0 (a plugin with no devices), and a core capacity that is not an integer makes the node unusable.

`CapacityDevices` reads the section's core and memory names (Cambricon, Moore Threads); `WholeCards` is the
same for vendors whose plugin advertises whole cards under the count name, each card with fixed memory and
cores (Metax GPU, Kunlunxin XPU, Enflame GCU: `cores_per_device` 1, no memory resource, no quota).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from app.core import codec, health
from app.core.health import Health, Reported
from app.core.model import DeviceInfo, DeviceRequest
from app.core.score import i32
from app.core.vendor import Discovery, LockSpec, NodeView, Reads, ResourceNames
from app.devices.common import requests
from app.devices.common.base import NamedResources, VendorDefaults
from app.devices.common.nodes import capacity_int64


class _Capacity(VendorDefaults):
    """What every capacity-derived vendor shares, given the core (or card) and memory resource names."""

    __slots__ = ()

    @property
    def core_resource(self) -> str:
        raise NotImplementedError

    @property
    def memory_resource(self) -> str:
        raise NotImplementedError

    @property
    def handshake_annotation(self) -> str:
        return ""

    @property
    def source(self) -> str:
        return f"capacity {self.core_resource}"

    @property
    def reads(self) -> Reads:
        return Reads(capacity=tuple(name for name in (self.core_resource, self.memory_resource) if name))

    def registered(self, node: NodeView) -> bool:
        value = node.capacity.get(self.core_resource)
        return value is not None and value not in ("0", 0)

    def health(self, node: NodeView, reported: Reported, now: datetime) -> Health:
        return health.ALWAYS_HEALTHY

    def derive(
        self,
        node: NodeView,
        *,
        cores_per_device: int,
        unit_mib: int,
        word: str,
        count: int,
        devcore: int,
        devmem: int | None = None,
    ) -> Discovery:
        """HAMi's `GetNodeDevices` of a capacity-derived vendor: `Devmem = int32(memory x unit x
        cores_per_device / cores)` MiB per device (or the fixed `devmem`), type and vendor = the key."""
        cores = capacity_int64(node, self.core_resource) or 0
        if cores <= 0:
            raise codec.CodecError(f"device not found {self.core_resource}")
        if devmem is None:
            memory = capacity_int64(node, self.memory_resource) or 0
            devmem = i32(memory * unit_mib * cores_per_device // cores)
        devices = tuple(
            DeviceInfo(f"{node.name}-{word}-{i}", i, count, devmem, devcore, self.key, 0, "", True, self.key)
            for i in range((cores + cores_per_device - 1) // cores_per_device)
        )
        return Discovery(devices)


class CapacityDevices(_Capacity, NamedResources):
    """Mixin for capacity-derived vendors: the devices come from the section's core and memory resources."""

    __slots__ = ()

    @property
    def core_resource(self) -> str:
        return self.config.resource_core_name

    @property
    def memory_resource(self) -> str:
        return self.config.resource_memory_name


class WholeCards(_Capacity):
    """Mixin for vendors whose plugin advertises whole cards under `count_resource`: one device per unit,
    asked for by that name alone (HAMi tracks no quota for them, vendors §1.6), no node lock of their own."""

    __slots__ = ()

    @property
    def count_resource(self) -> str:
        raise NotImplementedError

    @property
    def core_resource(self) -> str:
        return self.count_resource

    @property
    def memory_resource(self) -> str:
        return ""

    @property
    def resources(self) -> ResourceNames:
        return ResourceNames(self.count_resource)

    @property
    def memory_factor(self) -> int:
        return 0

    @property
    def lock(self) -> LockSpec | None:
        return None

    def whole(self, container: Mapping[str, Any], *, memreq: int, coresreq: int) -> DeviceRequest | None:
        """HAMi's request of whole cards: `{n, <key>, memreq, 100%, coresreq}` (limits, else requests)."""
        nums = requests.count(container, self.count_resource)
        return None if nums is None else DeviceRequest(nums, self.key, memreq, 100, coresreq)

    def mutate_container(self, container: dict[str, Any], pod: dict[str, Any]) -> bool:
        """No mutation; the container is this vendor's when `limits` names the count resource."""
        return requests.lookup(container, self.count_resource, limits_only=True) is not None

    def cards(self, node: NodeView, *, word: str, count: int, devmem: int, devcore: int) -> Discovery:
        """`<node>-<word>-<i>` for each card the count capacity names, with fixed memory and cores."""
        return self.derive(
            node, cores_per_device=1, unit_mib=0, word=word, count=count, devcore=devcore, devmem=devmem
        )
