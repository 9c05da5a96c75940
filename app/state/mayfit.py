"""Screening verdicts remembered per pod shape and node state: the fast path screens only what changed.

Screening (`app.state.screen`) judges a node from that node's own table row and from the pod's shape
(`screen.shape`: its requests, GPU policy and the selection annotations the vendors read), so a verdict
stays true for as long as the row does. `NodeTable.stamp` changes whenever a row's usage or node record
changes and never repeats, so a verdict is reused exactly while the row's stamp is the one it was computed
at. Pods of a batch share shapes and between two decisions only a few rows change (the previous pod's node,
other workers' reservations, a registration update), so a decision screens only those rows among the
candidates it ranks, instead of the best-ranked chunk and then every node again.

Invariants:
- a verdict is read only where `stamp[row]` equals the table's stamp of the row now; anything else is
  screened again before it is used (`MayFit.refresh`), so a ledger change or a new snapshot generation
  invalidates exactly the rows it touched, and a table rebuild all of them;
- verdicts are computed from the table's own columns only; a decision that sees a row differently (a
  re-filtered pod's own reservation subtracted, held slots that block the pod added) screens that row
  apart and never stores it;
- memory is bounded: `SHAPES` shapes (least recently used dropped), one bool and one stamp per row each.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable

import numpy as np

from app.devices.batch import Bools, Ints

SHAPES = 128  # pod shapes remembered (9 bytes per node each: ~6 MB at 5,000 nodes)
Screener = Callable[[Ints | None], Bools]  # may_fit of the given table rows (None: of every row)


class Verdicts:
    """Screening's `may_fit` of one pod shape per table row, and the row stamp each was computed at (0:
    never; table stamps start at 1)."""

    __slots__ = ("may_fit", "stamp")

    def __init__(self, rows: int) -> None:
        self.may_fit: Bools = np.zeros(rows, bool)
        self.stamp: Ints = np.zeros(rows, np.int64)

    def known_unfit(self, rows: Ints, stamp: Ints) -> Bools:
        """Per entry of `rows`: screening said no, and the row has not changed since."""
        result: Bools = (self.stamp[rows] == stamp[rows]) & ~self.may_fit[rows]
        return result

    def refresh(self, rows: Ints, stamp: Ints, screen: Screener) -> Bools:
        """`may_fit` of `rows` (table rows, repeats allowed), screening those whose verdict is stale: only
        them, or every row when that is most of the table (one screen over the whole table is cheaper than
        a partial one that large)."""
        stale = rows[self.stamp[rows] != stamp[rows]]
        if len(stale):
            stale = np.unique(stale)
            if len(stale) * 4 < len(self.stamp):
                self.may_fit[stale] = screen(stale)
                self.stamp[stale] = stamp[stale]
            else:
                self.may_fit[:] = screen(None)
                self.stamp[:] = stamp
        result: Bools = self.may_fit[rows]
        return result


class MayFit:
    """The verdicts of the last `SHAPES` pod shapes. Not thread-safe: the fast path's lock guards it."""

    def __init__(self, shapes: int = SHAPES) -> None:
        self._shapes = shapes
        self._verdicts: OrderedDict[Hashable, Verdicts] = OrderedDict()

    def verdicts(self, shape: Hashable, rows: int) -> Verdicts:
        """The verdicts of `shape` for a table of `rows` rows (new ones when the table changed size)."""
        found = self._verdicts.get(shape)
        if found is None or len(found.stamp) != rows:
            found = self._verdicts[shape] = Verdicts(rows)
            if len(self._verdicts) > self._shapes:
                self._verdicts.popitem(last=False)
        self._verdicts.move_to_end(shape)
        return found

    def clear(self) -> None:
        self._verdicts.clear()
