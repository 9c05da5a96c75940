"""What HAMi's vendors with a register annotation share (vendors §1.1-1.2, §1.4-1.5): the device plugin
writes the devices into one node annotation (`hami.io/node-dcu-register`, `hami.io/node-<cw>-register`, ...)
and, for most, refreshes a handshake annotation; Filter writes the allocation under a to-allocate and an
allocated key, and the bind takes HAMi's shared node lock (`hami.io/mutex.lock`).

A vendor inherits `Registered` and returns its `RegisterKeys` from `keys` (per instance: Ascend and
Iluvatar build theirs from the chip's common word). The health default is HAMi's generic handshake on the
count resource; vendors without a handshake (AMD, Metax sGPU) override it. Discovery stays the vendor's
(the formats differ), with `register_devices` for the common decode.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, ClassVar, Protocol

from app.core import codec, health
from app.core.health import Health, Reported
from app.core.model import DeviceInfo
from app.core.vendor import SHARED_LOCK, LockSpec, NodeView, PodKey, ResourceNames
from app.devices.common.base import VendorDefaults
from app.devices.common.nodes import allocatable_count
from app.devices.common.podkeys import hami_lists


class RegisterKeys(Protocol):
    @property
    def vendor(self) -> str: ...

    @property
    def register(self) -> str: ...

    @property
    def handshake(self) -> str: ...  # "" when the plugin has none

    @property
    def to_allocate(self) -> str: ...

    @property
    def allocated(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Keys:
    vendor: str
    register: str
    handshake: str
    to_allocate: str
    allocated: str

    @classmethod
    def per_word(cls, word: str, register: str) -> Keys:
        """The keys HAMi derives from a common word (Ascend, Iluvatar): `hami.io/node-handshake-<cw>`,
        `hami.io/<cw>-devices-to-allocate`, `hami.io/<cw>-devices-allocated`."""
        return cls(
            word,
            register,
            f"hami.io/node-handshake-{word}",
            f"hami.io/{word}-devices-to-allocate",
            f"hami.io/{word}-devices-allocated",
        )


def register_devices(
    node: NodeView, keys: RegisterKeys, *, legacy: bool = False, custom: bool = False, empty: str = ""
) -> tuple[DeviceInfo, ...]:
    """HAMi `GetNodeDevices`: the register annotation in the JSON (or legacy colon) format; a register that
    lists no device raises `empty` (`no gpu found on node` unless the vendor says otherwise)."""
    text = node.annotations[keys.register]
    if legacy:
        devices = codec.decode_register_legacy(text, keys.vendor)
    else:
        devices = codec.decode_register_json(text, keys.vendor, custom=custom)
    if not devices:
        raise codec.CodecError(empty or "no gpu found on node")
    return tuple(devices)


class Registered(VendorDefaults):
    __slots__ = ()
    PLUGIN: ClassVar[str] = ""  # the device plugin that works through the to-allocate list (docs)

    @property
    def keys(self) -> RegisterKeys:
        raise NotImplementedError

    if TYPE_CHECKING:  # the vendor's own (NamedResources or its property); no default here

        @property
        def resources(self) -> ResourceNames: ...

    @property
    def key(self) -> str:
        return self.keys.vendor

    @property
    def allocated_annotation(self) -> str:
        return self.keys.allocated

    @property
    def to_allocate_annotation(self) -> str:
        return self.keys.to_allocate

    @property
    def handshake_annotation(self) -> str:
        return self.keys.handshake

    @property
    def source(self) -> str:
        return self.keys.register

    @property
    def lock(self) -> LockSpec:
        return SHARED_LOCK

    @property
    def pod_keys(self) -> tuple[PodKey, ...]:
        return hami_lists(self.keys.to_allocate, self.keys.allocated, self.PLUGIN)

    def registered(self, node: NodeView) -> bool:
        return self.keys.register in node.annotations

    def health(self, node: NodeView, reported: Reported, now: datetime) -> Health:
        """HAMi's generic handshake (§1.10) on the count resource's allocatable."""
        count = self.resources.count
        value = node.annotations.get(self.keys.handshake)
        return health.handshake_only(value, allocatable_count(node, count), now, count)
