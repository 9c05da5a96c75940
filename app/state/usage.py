"""A process's in-memory view of the ledger: device usage per node and quota usage per namespace.

Refreshed incrementally from the ledger's change log, so a filter call reads usage from memory instead of
summing rows. The view is a hint: the decision it feeds is re-checked against the ledger inside the assume
transaction. Per-node maps are replaced, never mutated, so a reader holding one is never disturbed by a
concurrent refresh (gthread workers run several requests at once).

Each node's rows are also kept by sequence number (`rows_stamp`), so that the assume's re-check can tell from
one indexed count whether the rows committed on the chosen node are still exactly the ones the decision
summed (app/state/ledger.py `node_stamp`): the view holds every row as of its sequence number, so a row
changed since has a newer number and a row removed since lowers the count.

Caches derived from usage (the fast path's per-node scores and device columns) ask `touched_since` which
nodes changed since they last looked, instead of comparing 5,000 nodes on every request.

The held reservations (docs/held-reservations.md) are kept too, whole: reloaded when the ledger's holds
version moved (they are few). They are not part of any node's usage here — who they block depends on the
asker (app/core/holds.py), so the fast path adds them per request.
"""

from __future__ import annotations

import gc
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager

from app.core.holds import Hold
from app.core.model import DeviceUse, NodeUse
from app.state.ledger import Changes, Entry, Ledger

TOUCHED_HISTORY = 256  # refreshes remembered by touched_since


_ZERO = DeviceUse()


def _add(target: dict[str, DeviceUse], uses: Mapping[str, DeviceUse], sign: int) -> None:
    for uuid, use in uses.items():
        current = target.get(uuid, _ZERO)
        updated = current.plus(use) if sign > 0 else current.minus(use)
        if updated == _ZERO:
            target.pop(uuid, None)
        else:
            target[uuid] = updated


class UsageView:
    def __init__(self) -> None:
        self.entries: dict[str, Entry] = {}
        self.nodes: dict[str, Mapping[str, DeviceUse]] = {}
        self.rows: dict[str, Mapping[str, int]] = {}  # node -> uid -> sequence number (-1: not known)
        self.quota: dict[str, dict[str, int]] = {}
        self.seq = 0
        self.epoch = 0
        self.version = (-1, -1)  # ledger data_version at the last refresh
        self.changes = 0  # number of refreshes that changed some node's usage
        self.holds: tuple[Hold, ...] = ()  # every stored slot (readers judge expiry)
        self.holds_version = -1
        self._touched: deque[tuple[int, frozenset[str]]] = deque(maxlen=TOUCHED_HISTORY)
        self._lock = threading.Lock()

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """No refresh happens inside this block (readers that need one consistent view)."""
        with self._lock:
            yield

    def touched_since(self, mark: int) -> frozenset[str] | None:
        """Nodes whose usage changed after change number `mark`; None when that is too long ago to say
        (the caller then rereads every node). Compare `mark` with `changes` first."""
        if mark == self.changes:
            return frozenset()
        if mark < 0 or not self._touched or self._touched[0][0] > mark + 1:
            return None
        recent = []
        for number, names in reversed(self._touched):  # numbered in increasing order: newest first
            if number <= mark:
                break
            recent.append(names)
        return frozenset().union(*recent)

    def node_use(self, node: str) -> NodeUse:
        return self.nodes.get(node, {})

    def rows_stamp(self, node: str, exclude_uid: str = "") -> tuple[int, int] | None:
        """How many rows on `node` other than `exclude_uid`'s the view holds and their newest sequence
        number (0 for none), as `Ledger.node_stamp` counts them; None when some number is not known."""
        seqs = [seq for uid, seq in self.rows.get(node, {}).items() if uid != exclude_uid]
        if any(seq < 0 for seq in seqs):
            return None
        return len(seqs), max(seqs, default=0)

    def quota_used(self, namespace: str, exclude_uid: str = "") -> dict[str, int]:
        used = dict(self.quota.get(namespace, {}))
        entry = self.entries.get(exclude_uid)
        if entry is not None and entry.namespace == namespace:
            for name, amount in entry.quota.items():
                used[name] = used.get(name, 0) - amount
        return used

    def refresh(self, ledger: Ledger) -> set[str]:
        """Apply the ledger's changes since the last refresh; returns the nodes whose usage changed."""
        with self._lock:
            version = ledger.data_version()
            if version == self.version and self.epoch:
                return set()
            changes = ledger.changes_since(self.seq, self.epoch)
            self.version = version
            touched = self._apply(changes)
            if changes.holds != self.holds_version:
                self.set_holds(*ledger.all_holds())
            if changes.full:
                gc.freeze()  # 20,000 long-lived entries: out of full collections (app.state.inventory)
            return touched

    def _apply(self, changes: Changes) -> set[str]:
        touched: dict[str, dict[str, DeviceUse]] = {}
        rows: dict[str, dict[str, int]] = {}

        def node(name: str) -> dict[str, DeviceUse]:
            if name not in touched:
                touched[name] = dict(self.nodes.get(name, {}))
                rows[name] = dict(self.rows.get(name, {}))
            return touched[name]

        if changes.full:
            rows = {name: {} for name in {*self.nodes, *self.rows}}
            touched = {name: {} for name in rows}
            self.entries, self.quota = {}, {}
        for uid in changes.removed:
            self._drop(uid, node, rows)
        seqs = changes.seqs or (-1,) * len(changes.entries)
        for entry, seq in zip(changes.entries, seqs, strict=True):
            self._drop(entry.uid, node, rows)
            self.entries[entry.uid] = entry
            _add(node(entry.node), entry.uses, +1)
            rows[entry.node][entry.uid] = seq
            quota = self.quota.setdefault(entry.namespace, {})
            for name, amount in entry.quota.items():
                quota[name] = quota.get(name, 0) + amount
        for name, uses in touched.items():
            if uses:
                self.nodes[name] = uses
            else:
                self.nodes.pop(name, None)
            if rows.get(name):
                self.rows[name] = rows[name]
            else:
                self.rows.pop(name, None)
        self.seq, self.epoch = changes.seq, changes.epoch
        if touched:
            self.changes += 1
            self._touched.append((self.changes, frozenset(touched)))
        return set(touched)

    def _drop(
        self, uid: str, node: Callable[[str], dict[str, DeviceUse]], rows: dict[str, dict[str, int]]
    ) -> None:
        old = self.entries.pop(uid, None)
        if old is None:
            return
        _add(node(old.node), old.uses, -1)
        del rows[old.node][uid]
        quota = self.quota.get(old.namespace, {})
        for name, amount in old.quota.items():
            quota[name] = quota.get(name, 0) - amount

    def set_holds(self, version: int, holds: Iterable[Hold]) -> None:
        """Take the holds (as `Ledger.all_holds` reads them); tests set them directly."""
        self.holds, self.holds_version = tuple(holds), version

    def load(self, entries: Iterable[Entry]) -> None:
        """Replace the view with `entries` (tests and rebuild comparisons)."""
        with self._lock:
            self._apply(Changes(tuple(entries), (), self.seq, self.epoch, True))
