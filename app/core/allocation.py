"""Who holds what: the cluster's devices with the pods holding each, for the `inspect` command.

The inputs are the model's vendor-neutral types — a node's `NodeDevices` (every vendor's devices, however
they were discovered), each reservation's `DeviceUse` per device UUID — plus what only the Node object
says (cordoned, the node locks). So a vendor added behind `app.core.vendor` shows up here without a change.
Pure: the caller reads the sources (a live cluster, a `kubectl get -o json` dump, a replica's
/debug/state), passes `now`, and renders the result.

Invariant: a device's `used` is the sum of its holders' uses (what the scheduler counts), so the view
shows exactly the allocations the pods' annotations (or the replica's ledger) say; capacity counted by
nobody is never invented, and an allocation on a device the node no longer registers is kept, on a
`missing` row, rather than dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from app.core.model import DeviceInfo, DeviceUse, NodeDevices
from app.core.nodelock import LockParseError, parse_lock


@dataclass(frozen=True, slots=True)
class Holding:
    """A pod's reservation: what it holds on each device of its node."""

    uid: str
    namespace: str
    name: str
    node: str
    uses: Mapping[str, DeviceUse]  # device UUID -> use
    state: str = ""  # bound, reserved (annotated, not bound yet), or the ledger's state
    scheduler: str = ""  # spec.schedulerName, when known


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """One node as the source shows it."""

    name: str
    devices: NodeDevices | None  # None: no usable registration (see `unusable`)
    unusable: str = ""  # why the node's registration cannot be used ("" when it simply has none)
    cordoned: bool = False  # spec.unschedulable
    locks: Mapping[str, str] = field(default_factory=dict)  # lock annotation key -> value
    published: str | None = None  # the leader's hami.io/device-capacity annotation (app/core/capacity.py)


@dataclass(frozen=True, slots=True)
class Share:
    """One holder's part of a device."""

    uid: str
    namespace: str
    name: str
    state: str
    scheduler: str
    use: DeviceUse


@dataclass(frozen=True, slots=True)
class DeviceView:
    node: str
    info: DeviceInfo
    used: DeviceUse
    shares: tuple[Share, ...]
    cordoned: bool = False
    missing: bool = False  # held by pods but not registered by the node (any more)

    @property
    def problems(self) -> tuple[str, ...]:
        found = []
        if self.missing:
            found.append("missing")
        elif not self.info.health:
            found.append("unhealthy")
        if self.cordoned:
            found.append("cordoned")
        if not self.missing and self.over:
            found.append("overcommitted")
        return tuple(found)

    @property
    def over(self) -> bool:
        i, u = self.info, self.used
        return u.slots > i.count or u.mem > i.devmem or u.cores > i.devcore


@dataclass(frozen=True, slots=True)
class LockView:
    key: str
    value: str
    holder: str  # namespace/name, "" for a legacy or unparsable value
    age: float | None  # seconds since it was taken, None when the value does not parse


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    devices: tuple[DeviceView, ...]
    unusable: str = ""
    cordoned: bool = False
    locks: tuple[LockView, ...] = ()
    published: str | None = None  # NodeFacts.published


@dataclass(frozen=True, slots=True)
class Totals:
    devices: int = 0
    slots: int = 0
    slots_used: int = 0
    memory: int = 0
    memory_used: int = 0
    cores: int = 0
    cores_used: int = 0

    def plus(self, device: DeviceView) -> Totals:
        known = not device.missing
        i, u = device.info, device.used
        return Totals(
            self.devices + known,
            self.slots + (i.count if known else 0),
            self.slots_used + u.slots,
            self.memory + (i.devmem if known else 0),
            self.memory_used + u.mem,
            self.cores + (i.devcore if known else 0),
            self.cores_used + u.cores,
        )


@dataclass(frozen=True, slots=True)
class Summary:
    nodes: int
    usable_nodes: int
    cordoned_nodes: int
    locked_nodes: int
    unhealthy_devices: int
    cordoned_devices: int
    pods: int
    totals: Totals
    by_vendor: Mapping[str, Totals]


@dataclass(frozen=True, slots=True)
class ClusterView:
    nodes: tuple[NodeView, ...]
    summary: Summary


def _lock(key: str, value: str, now: datetime) -> LockView:
    try:
        parsed = parse_lock(value)
    except LockParseError:
        return LockView(key, value, "", None)
    holder = "" if parsed.legacy else f"{parsed.namespace}/{parsed.name}"
    return LockView(key, value, holder, max(0.0, (now - parsed.time).total_seconds()))


def _ghost(uuid: str, vendor: str) -> DeviceInfo:
    """A device some pod holds that the node does not register: zero capacity, so it shows as missing."""
    return DeviceInfo(uuid, -1, 0, 0, 0, "", 0, "", False, vendor)


def _device_views(facts: NodeFacts, holdings: Sequence[Holding]) -> tuple[DeviceView, ...]:
    shares: dict[str, list[Share]] = {}
    for h in holdings:
        for uuid, use in h.uses.items():
            if use.slots or use.mem or use.cores or use.mig:
                shares.setdefault(uuid, []).append(
                    Share(h.uid, h.namespace, h.name, h.state, h.scheduler, use)
                )
    registered = facts.devices.devices if facts.devices else ()
    cordoned = facts.devices.cordoned if facts.devices else frozenset()
    views = []
    for info in registered:
        held = tuple(sorted(shares.pop(info.id, ()), key=lambda s: (s.namespace, s.name)))
        used = DeviceUse()
        for share in held:
            used = used.plus(share.use)
        views.append(DeviceView(facts.name, info, used, held, info.id in cordoned))
    for uuid, rest in sorted(shares.items()):
        used = DeviceUse()
        for share in rest:
            used = used.plus(share.use)
        held = tuple(sorted(rest, key=lambda s: (s.namespace, s.name)))
        views.append(DeviceView(facts.name, _ghost(uuid, ""), used, held, missing=True))
    return tuple(views)


def build(nodes: Iterable[NodeFacts], holdings: Iterable[Holding], now: datetime) -> ClusterView:
    """Every node in the order given (a holding on a node not given gets a node of its own), each device
    in registration order, then the devices only pods name."""
    by_node: dict[str, list[Holding]] = {}
    for holding in holdings:
        by_node.setdefault(holding.node, []).append(holding)
    facts = list(nodes)
    known = {f.name for f in facts}
    facts.extend(NodeFacts(name, None, "not in the node list") for name in sorted(by_node.keys() - known))
    views = tuple(
        NodeView(
            f.name,
            _device_views(f, by_node.get(f.name, ())),
            f.unusable,
            f.cordoned,
            tuple(_lock(key, value, now) for key, value in sorted(f.locks.items())),
            f.published,
        )
        for f in facts
    )
    return ClusterView(views, summarize(views))


def summarize(nodes: Sequence[NodeView]) -> Summary:
    totals = Totals()
    by_vendor: dict[str, Totals] = {}
    pods: set[str] = set()
    unhealthy = cordoned = 0
    for node in nodes:
        for device in node.devices:
            totals = totals.plus(device)
            vendor = device.info.vendor or "unknown"
            by_vendor[vendor] = by_vendor.get(vendor, Totals()).plus(device)
            unhealthy += not device.missing and not device.info.health
            cordoned += device.cordoned
            pods.update(s.uid or f"{s.namespace}/{s.name}" for s in device.shares)
    return Summary(
        nodes=len(nodes),
        usable_nodes=sum(1 for n in nodes if n.devices and not n.unusable),
        cordoned_nodes=sum(1 for n in nodes if n.cordoned),
        locked_nodes=sum(1 for n in nodes if n.locks),
        unhealthy_devices=unhealthy,
        cordoned_devices=cordoned,
        pods=len(pods),
        totals=totals,
        by_vendor=dict(sorted(by_vendor.items())),
    )


def only(
    view: ClusterView, *, nodes: Sequence[str] = (), vendor: str = "", namespace: str = ""
) -> ClusterView:
    """The view restricted to some nodes, one vendor's devices (case-insensitive), or the pods of one
    namespace and the devices they hold; the summary is recomputed for what remains."""
    kept = []
    for node in view.nodes:
        if nodes and node.name not in nodes:
            continue
        devices = node.devices
        if vendor:
            devices = tuple(d for d in devices if d.info.vendor.lower() == vendor.lower())
        if namespace:
            devices = tuple(
                replace(d, shares=tuple(s for s in d.shares if s.namespace == namespace))
                for d in devices
                if any(s.namespace == namespace for s in d.shares)
            )
        if (vendor or namespace) and not devices:
            continue
        kept.append(replace(node, devices=devices))
    return ClusterView(tuple(kept), summarize(kept))
