"""Registration: nodes' device annotations -> the inventory snapshot the Gunicorn workers decide on.

A pass (every HAMI_REGISTRATION_INTERVAL, on node/quota changes after a short debounce — HAMi waits for its
15 s tick on node updates, quirk #22 — and when this replica becomes leader) looks at every selected node:

- nodes that carry no vendor's devices are not GPU nodes: left out, not stamped (HAMi stamps the
  handshake on every selected node, quirk #20), and a node whose annotation was deleted drops out at once
  (HAMi keeps its stale devices, quirks #23/#24);
- per vendor the node carries (`Vendor.registered`: its register annotation, or its capacity for vendors
  whose devices are derived from it), the vendor's health rule (`Vendor.health`: the handshake of
  `app.core.health`, with NVIDIA's bookkeeping, or "always", or "capacity > 0"); the leader
  writes `Requesting_<now>` where it is due (the caller applies `Pass.stamps`), a follower only reads. An
  unhealthy node is left out with its reason; a device with `health:false` stays in (Fit skips it);
  HAMi's NodeCleanUp (which deletes the handshake of an unhealthy node and makes it flap, quirk #21) is not
  reproduced: the node simply stays out until its health returns;
- decode (`app.core.inventory.decode_node`, cached per node by annotation content, handshakes excluded):
  a corrupt annotation excludes that node alone, with the reason, logged once per change and counted;
- a node object seen in the last pass — the very object: the node informer stores a new dict for every
  event and never changes a stored one — is not looked at again: its view (`node_view`) and its decode
  are the ones of that pass. Only its health is judged again (it depends on the clock). At 1,000 nodes
  the view and the decode cache's key were ~40 % of a pass (issue 20); a node that changed is a new
  object, gets a new view, and its decode is looked up by content as before;
- zone/region from topology.kubernetes.io labels; quota limits from the ResourceQuotas.

`next_snapshot` publishes only when something changed: a new generation, and per-node `rev` = the
generation in which that node's content last changed (readers reuse unchanged nodes; a rev is never reused
for different content, even across a worker restart, because the last snapshot on disk is the baseline).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from app.core import health
from app.core.capacity import CAPACITY_ANNOTATION
from app.core.inventory import NodeUnregistered, decode_node, node_name, node_view
from app.core.model import NodeDevices
from app.core.quota import quota_limits
from app.core.vendor import NodeView, Vendor
from app.state import snapshot
from app.state.snapshot import NodeRecord, Snapshot, SnapshotError
from workers.metrics import WorkerMetrics
from workers.shapes import REGION_LABEL, ZONE_LABEL

logger = logging.getLogger(__name__)


def _same(a: NodeRecord, b: NodeRecord) -> bool:
    return (a.devices is b.devices or a.devices == b.devices) and (a.zone, a.region) == (b.zone, b.region)


def next_snapshot(
    previous: Snapshot | None,
    nodes: Mapping[str, NodeRecord],
    broken: Mapping[str, str],
    quotas: Mapping[str, Mapping[str, int]],
    written_at: float,
) -> Snapshot | None:
    """The snapshot to publish, or None when nothing differs from `previous`. `nodes` revs are ignored."""
    before = previous.nodes if previous is not None else {}
    unchanged = [name for name, record in nodes.items() if name in before and _same(before[name], record)]
    if (
        previous is not None
        and len(unchanged) == len(nodes) == len(before)
        and dict(broken) == dict(previous.broken)
        and {ns: dict(v) for ns, v in quotas.items()}
        == {ns: dict(v) for ns, v in previous.quota_limits.items()}
    ):
        return None
    generation = (previous.generation if previous is not None else 0) + 1
    kept = set(unchanged)
    records = {
        name: before[name] if name in kept else dataclasses.replace(record, rev=generation)
        for name, record in nodes.items()
    }
    return Snapshot(generation, records, dict(broken), {ns: dict(v) for ns, v in quotas.items()}, written_at)


_Key = tuple[tuple[Any, ...], ...]  # what a node's decode read of it: annotations, labels, capacity, vendors


@dataclass(frozen=True, slots=True)
class Stamp:
    node: str
    annotation: str
    value: str


@dataclass(frozen=True, slots=True)
class Pass:
    published: Snapshot | None  # None: nothing changed, nothing written
    stamps: tuple[Stamp, ...]
    registered: int
    unhealthy: int
    corrupt: int


class Registrar:
    """Keeps what survives between passes: the NVIDIA bookkeeping, the decode cache, the last snapshot."""

    def __init__(self, vendors: tuple[Vendor, ...], state_dir: Path, metrics: WorkerMetrics) -> None:
        self._vendors = vendors
        self._state_dir = state_dir
        self._metrics = metrics
        self._book: dict[tuple[str, str], health.Reported] = {}
        # per node: the object last decoded, what the decode read of it (the key below), the result; and
        # the object last viewed with its view. Both hold the object, so that `is` compares the very one.
        self._decoded: dict[str, tuple[Mapping[str, Any], _Key, NodeDevices | str]] = {}
        self._views: dict[str, tuple[Mapping[str, Any], NodeView]] = {}
        # decode_node never reads a handshake, which changes on every stamp and device-plugin report: not in
        # the cache key, or every handshake round re-decodes every node (~0.7 s per pass at 5,000 nodes)
        self._handshakes = frozenset(v.handshake_annotation for v in vendors if v.handshake_annotation)
        self._handshakes |= {CAPACITY_ANNOTATION}  # ours, rewritten as usage moves; no vendor reads it
        self._reasons: dict[str, str] = {}
        self._seen: dict[str, float] = {}
        self._seen_lock = threading.Lock()
        self._exported: set[str] = set()
        try:
            self.last: Snapshot | None = snapshot.read(state_dir)
        except (SnapshotError, KeyError, TypeError, ValueError, IndexError):
            self.last = None

    def node_devices(self, name: str) -> NodeDevices | None:
        """The node's devices as the last published inventory has them (the ledger keeps H1 with them)."""
        record = self.last.nodes.get(name) if self.last is not None else None
        return record.devices if record is not None else None

    def node_changed(self, name: str, at: float | None) -> None:
        """The node informer saw the node change (`at`) or go (None)."""
        with self._seen_lock:
            if at is None:
                self._seen.pop(name, None)
            else:
                self._seen[name] = at

    def reset_bookkeeping(self) -> None:
        """A new term starts from what the API says, like a fresh HAMi leader."""
        self._book.clear()

    def _decode(self, node: Mapping[str, Any], view: NodeView, vendors: list[Vendor]) -> NodeDevices | str:
        """Decode (cached by what discovery reads: annotations but handshakes, labels and capacity)."""
        cached = self._decoded.get(view.name)
        names = tuple(v.key for v in vendors)
        if cached is not None and cached[0] is node and cached[1][-1] == names:
            return cached[2]
        key: _Key = (
            tuple(sorted(kv for kv in view.annotations.items() if kv[0] not in self._handshakes)),
            tuple(sorted(view.labels.items())),
            tuple(sorted((k, str(v)) for k, v in view.capacity.items())),
            names,
        )
        if cached is not None and cached[1] == key:
            self._decoded[view.name] = (node, key, cached[2])
            return cached[2]
        try:
            result: NodeDevices | str = decode_node(node, vendors)
        except NodeUnregistered as exc:
            result = str(exc)
        self._decoded[view.name] = (node, key, result)
        return result

    def _view(self, node: Mapping[str, Any]) -> NodeView:
        kept = self._views.get(node_name(node))
        if kept is not None and kept[0] is node:
            return kept[1]
        view = node_view(node)
        self._views[view.name] = (node, view)
        return view

    def _health(self, view: NodeView, now: datetime, stamps: list[Stamp]) -> tuple[list[Vendor], str]:
        """The vendors registered on the node that are healthy, and why the others are not."""
        name = view.name
        healthy, reasons = [], []
        for vendor in self._vendors:
            if not vendor.registered(view):
                continue
            verdict = vendor.health(view, self._book.get((name, vendor.key), health.Reported()), now)
            self._book[(name, vendor.key)] = verdict.reported
            if verdict.stamp is not None and vendor.handshake_annotation:
                stamps.append(Stamp(name, vendor.handshake_annotation, verdict.stamp))
            if verdict.healthy:
                healthy.append(vendor)
            else:
                reasons.append(f"{vendor.key}: {verdict.reason}")
        return healthy, "; ".join(reasons)

    def run(
        self, nodes: Iterable[Mapping[str, Any]], quotas: Iterable[Mapping[str, Any]], now: datetime
    ) -> Pass:
        """One pass; writes the snapshot file when it changed."""
        records: dict[str, NodeRecord] = {}
        broken: dict[str, str] = {}
        stamps: list[Stamp] = []
        unhealthy = corrupt = 0
        present: set[str] = set()
        for node in nodes:
            view = self._view(node)
            name = view.name
            present.add(name)
            healthy, why = self._health(view, now, stamps)
            if why and not healthy:
                broken[name] = f"unhealthy: {why}"
                unhealthy += 1
                continue
            if not healthy:
                continue  # no vendor registered: not a GPU node
            decoded = self._decode(node, view, healthy)
            if isinstance(decoded, str):
                broken[name] = decoded
                corrupt += 1
                continue
            records[name] = NodeRecord(
                decoded, 0, view.labels.get(ZONE_LABEL, ""), view.labels.get(REGION_LABEL, "")
            )
        self._forget_absent(present)
        self._log_reasons(broken)
        limits = quota_limits(quotas, self._vendors)
        published = next_snapshot(self.last, records, broken, limits, now.timestamp())
        if published is not None:
            snapshot.write(self._state_dir, published)
            self.last = published
        self._export(now.timestamp(), present, len(records), unhealthy, corrupt)
        return Pass(published, tuple(stamps), len(records), unhealthy, corrupt)

    def _forget_absent(self, present: set[str]) -> None:
        """HAMi's NodeDeleted: bookkeeping of nodes that are gone (or no longer selected) is dropped."""
        for key in [k for k in self._book if k[0] not in present]:
            del self._book[key]
        for name in [n for n in self._decoded if n not in present]:
            del self._decoded[name]
        for name in [n for n in self._views if n not in present]:
            del self._views[name]

    def _log_reasons(self, broken: Mapping[str, str]) -> None:
        for name, reason in broken.items():
            if self._reasons.get(name) != reason:
                logger.warning("node left out of the inventory", extra={"node": name, "reason": reason})
        for name in self._reasons.keys() - broken.keys():
            logger.info("node usable again or gone", extra={"node": name})
        self._reasons = dict(broken)

    def _export(self, now: float, present: set[str], registered: int, unhealthy: int, corrupt: int) -> None:
        m = self._metrics
        m.nodes_registered.set(registered)
        m.nodes_unhealthy.set(unhealthy)
        m.nodes_corrupt.set(corrupt)
        with self._seen_lock:
            seen = dict(self._seen)
        exported = {name for name in seen if name in present}
        for name in exported:
            m.node_report_age.labels(name).set(max(0.0, now - seen[name]))
        for name in self._exported - exported:  # bounded by the node count: departed nodes go
            m.node_report_age.remove(name)
        self._exported = exported
