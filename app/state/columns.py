"""A worker's per-node derived state for the fast path: device columns and node scores, kept in step with
the inventory snapshot and the usage view.

Everything here is derived and disposable. A new snapshot (only when nodes change) rewrites the rows of
the nodes whose record changed, and rebuilds everything only when nodes were added, removed or reordered
(about 0.3 s at 5,000 nodes, like a worker's start-up); a usage refresh recomputes only the rows of the
nodes it touched. The node score is HAMi's `ComputeDefaultScore` on the pre-pod usage (§4.5), which
depends on nothing about the pod, so it is computed once per node state instead of once per pod and node.
Each row also carries a stamp that changes whenever its state does, so results derived from a row can be
memoised by stamp. The working devices (`working_devices`) the score was computed from are kept for the
rows set most recently, by stamp (`working`): under binpack the winner is often the node the previous pod
went to, whose row the decision has just recomputed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
from cachetools import LRUCache

from app.core.mig import MIG_MODE
from app.core.model import DeviceInfo, DeviceUsage, DeviceUse, NodeDevices, NodeUse
from app.core.score import node_score
from app.core.usage import working_devices
from app.devices.batch import Bools, DeviceColumns, Ints
from app.state.snapshot import Snapshot
from app.state.usage import UsageView

_NO_USE = DeviceUse()
_Cell = tuple[bool, str, bool, bool, str, str, int, int, int, str]
_PADDING: _Cell = (False, "", False, False, "", "", 0, 0, 0, "")  # the cell of a slot the node does not have
RECENT_ROWS = 32  # rows whose working devices are kept


def _cell(node: NodeDevices, d: DeviceInfo) -> _Cell:
    return (
        True,
        d.id,
        d.health,
        d.id in node.cordoned,
        d.type,
        d.mode,
        d.count,
        d.devmem,
        d.devcore,
        d.vendor,
    )


def _mig(device: DeviceInfo, taken: DeviceUse) -> bool:
    """The cell the array checks cannot judge (`DeviceColumns.mig`)."""
    return device.mode == MIG_MODE or bool(taken.mig)


def _code(table: dict[str, int], value: str) -> int:
    """The code of `value` in `table` (codes are insertion order), adding it when new."""
    return table.setdefault(value, len(table))


class NodeTable:
    """Rows in snapshot order. Not thread-safe: the fast path holds its lock around every use."""

    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None
        self.names: list[str] = []
        self.nodes: list[NodeDevices] = []
        self.index: dict[str, int] = {}
        self.columns: DeviceColumns | None = None
        self.score = np.zeros(0)
        self.stamp: Ints = np.zeros(0, np.int64)
        self.max_devices = 0
        self._usage_mark = -1
        self._next_stamp = 1
        self._working: LRUCache[int, list[DeviceUsage]] = LRUCache(RECENT_ROWS)

    def sync(self, snapshot: Snapshot, usage: UsageView) -> None:
        """Bring every row up to date with `snapshot` and `usage` (held frozen by the caller)."""
        changed: set[int] | None = set()
        if snapshot is not self.snapshot:
            changed = self._update_nodes(snapshot)
        touched = usage.touched_since(self._usage_mark)
        if changed is None or touched is None:
            rows: Iterable[int] = range(len(self.names))
        else:
            rows = changed.union(self.index[n] for n in touched if n in self.index)
        for row in rows:
            self.set_usage(row, usage.nodes.get(self.names[row], {}))
        self._usage_mark = usage.changes

    def set_usage(self, row: int, use: NodeUse) -> None:
        """Apply `use` (the node's existing reservations) to the row: usage columns, score and stamp."""
        columns = self.columns
        assert columns is not None
        node = self.nodes[row]
        for slot, device in enumerate(node.devices):
            taken = use.get(device.id, _NO_USE)
            columns.used[row, slot] = taken.slots
            columns.usedmem[row, slot] = taken.mem
            columns.usedcores[row, slot] = taken.cores
            columns.mig[row, slot] = _mig(device, taken)
        padding = slice(len(node.devices), None)
        columns.used[row, padding] = columns.usedmem[row, padding] = columns.usedcores[row, padding] = 0
        columns.mig[row, padding] = False
        working = working_devices(node, use)
        self.score[row] = node_score(working)
        self.stamp[row] = self._next_stamp
        self._working[self._next_stamp] = working
        self._next_stamp += 1

    def working(self, row: int) -> list[DeviceUsage] | None:
        """`working_devices` of the row as it is now, when it was set recently (read only: shared)."""
        return self._working.get(int(self.stamp[row]))

    def _update_nodes(self, snapshot: Snapshot) -> set[int] | None:
        """Adopt `snapshot`: the rows whose node record changed, or None after a full rebuild (nodes added,
        removed or reordered, or a node with more devices than the table has columns)."""
        nodes = [record.devices for record in snapshot.nodes.values()]
        columns = self.columns
        if columns is None or list(snapshot.nodes) != self.names:
            self._rebuild(snapshot)
            return None
        changed = {row for row, node in enumerate(nodes) if node is not self.nodes[row]}
        if any(len(nodes[row].devices) > self.max_devices for row in changed):
            self._rebuild(snapshot)
            return None
        types = {t: code for code, t in enumerate(columns.types)}
        modes = {m: code for code, m in enumerate(columns.modes)}
        vendors = {v: code for code, v in enumerate(columns.vendors)}
        assert columns.vendor_code is not None
        for row in changed:
            self.nodes[row] = node = nodes[row]
            cells = [_cell(node, d) for d in node.devices]
            cells += [_PADDING] * (self.max_devices - len(node.devices))
            for slot, (
                present,
                uuid,
                health,
                cordoned,
                type_,
                mode,
                count,
                devmem,
                devcore,
                vendor,
            ) in enumerate(cells):
                columns.present[row, slot], columns.ids[row, slot] = present, uuid
                columns.health[row, slot], columns.cordoned[row, slot] = health, cordoned
                columns.type_code[row, slot] = _code(types, type_)
                columns.mode_code[row, slot] = _code(modes, mode)
                columns.vendor_code[row, slot] = _code(vendors, vendor)
                columns.count[row, slot], columns.totalmem[row, slot] = count, devmem
                columns.totalcore[row, slot] = devcore
        self.columns = dataclasses.replace(
            columns, types=tuple(types), modes=tuple(modes), vendors=tuple(vendors)
        )
        self.snapshot = snapshot
        return changed

    def _rebuild(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.names = list(snapshot.nodes)
        self.nodes = [record.devices for record in snapshot.nodes.values()]
        self.index = {name: row for row, name in enumerate(self.names)}
        width = max((len(n.devices) for n in self.nodes), default=0)
        shape = (len(self.nodes), width)
        cells: list[_Cell] = []
        for node in self.nodes:
            cells += [_cell(node, d) for d in node.devices]
            cells += [_PADDING] * (width - len(node.devices))
        present, ids, health, cordoned, types, modes, count, devmem, devcore, vendors = (
            zip(*cells, strict=True) if cells else ((),) * 10
        )
        type_table: dict[str, int] = {}
        mode_table: dict[str, int] = {}
        vendor_table: dict[str, int] = {}

        def ints(values: Sequence[int]) -> Ints:
            return np.array(values, np.int64).reshape(shape)

        def bools(values: Sequence[bool]) -> Bools:
            return np.array(values, bool).reshape(shape)

        self.columns = DeviceColumns(
            present=bools(present),
            health=bools(health),
            cordoned=bools(cordoned),
            type_code=ints([_code(type_table, t) for t in types]),
            mode_code=ints([_code(mode_table, m) for m in modes]),
            count=ints(count),
            totalmem=ints(devmem),
            totalcore=ints(devcore),
            used=np.zeros(shape, np.int64),
            usedmem=np.zeros(shape, np.int64),
            usedcores=np.zeros(shape, np.int64),
            mig=np.zeros(shape, bool),
            types=tuple(type_table),
            modes=tuple(mode_table),
            ids=np.array(ids, object).reshape(shape),
            vendor_code=ints([_code(vendor_table, v) for v in vendors]),
            vendors=tuple(vendor_table),
        )
        self.max_devices = width
        self.score = np.zeros(len(self.nodes))
        self.stamp = np.zeros(len(self.nodes), np.int64)


def with_rows_usage(
    table: NodeTable, uses: Mapping[int, Mapping[str, DeviceUse]]
) -> tuple[DeviceColumns, dict[int, float]]:
    """Columns and scores as if each row of `uses` had that usage, leaving the table itself untouched (a
    pod whose own previous reservation must not count against it, holds that block it: the fast path)."""
    columns = table.columns
    assert columns is not None
    used, usedmem, usedcores = columns.used.copy(), columns.usedmem.copy(), columns.usedcores.copy()
    mig = columns.mig.copy()
    scores = {}
    for row, use in uses.items():
        node = table.nodes[row]
        for slot, device in enumerate(node.devices):
            taken = use.get(device.id, _NO_USE)
            used[row, slot], usedmem[row, slot], usedcores[row, slot] = taken.slots, taken.mem, taken.cores
            mig[row, slot] = _mig(device, taken)
        scores[row] = node_score(working_devices(node, use))
    copy = DeviceColumns(
        columns.present,
        columns.health,
        columns.cordoned,
        columns.type_code,
        columns.mode_code,
        columns.count,
        columns.totalmem,
        columns.totalcore,
        used,
        usedmem,
        usedcores,
        mig,
        columns.types,
        columns.modes,
        columns.ids,
        columns.rows,
        columns.vendor_code,
        columns.vendors,
    )
    return copy, scores
