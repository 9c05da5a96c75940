"""The service's filter decision: exactly what `app.core.decision.decide` returns, without evaluating every
candidate fully.

`decide` evaluates all candidates, sorts the fitting ones stably by node score under the node policy and
takes the last. Equivalently, visit candidates in "winner order" — node score descending under binpack
(ascending under spread), ties broken by the later position in NodeNames — and the first one that fits is
the winner; its verdict comes from the same `evaluate_node` on the same usage, so node, devices and
annotations are identical. What makes that cheap:

- The node score uses only the pre-pod usage (§4.5), so it is cached per node (`NodeTable`) and
  recomputed only for nodes whose usage or snapshot record changed.
- Winner order comes from numpy over a per-request score array, in chunks: the best 64 candidates by
  partition (`best`), then the next 256, 1,024, ... only while none fits (`ranked_chunks`). The
  NodeNames -> row mapping is reused while kube-scheduler keeps sending the same list.
- Before evaluating a node fully, the screening (`Screen`, vectorised over the candidates) rejects nodes
  that cannot fit, with a test that never rejects a node `evaluate_node` would accept
  (`app.core.prefilter`); in a busy cluster it is what skips the full nodes that binpack ranks first.
  Its verdicts are remembered per pod shape and node state (`app.state.mayfit`): nodes known not to fit
  are left out of the ranking altogether, and only rows that changed since are screened again.
- When a requested vendor scores nodes from the allocation (Ascend's network topology), the winner cannot
  be known before every node that may fit is evaluated: then they all are, and ranked as `decide` ranks.
- The rows a decision sees otherwise than the table — the pod's own previous reservation subtracted, the
  held slots that block it added (docs/held-reservations.md) — are a handful: their columns and scores are
  copied and adjusted per request, and they are evaluated and screened apart, never remembered. A pod
  where no hold blocks anything pays nothing for holds.
- When nothing fits, `FailedNodes` must hold every candidate's reason: the screening states most of them
  exactly (vectorised over all nodes); the rest are evaluated, and every evaluated failure is memoised by
  (pod signature, node state stamp) because batch pods share shapes and kube-scheduler retries them.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from cachetools import LRUCache

from app.core.decision import rank, unregistered_reason
from app.core.fit import NodeVerdict, PodContext, evaluate_node
from app.core.holds import Asker, held_use
from app.core.model import DeviceUse, NodeUse
from app.core.policy import node_score_sign
from app.core.usage import sum_uses
from app.core.vendor import Vendor
from app.devices.batch import Bools, Ints
from app.state.columns import NodeTable, with_rows_usage
from app.state.mayfit import MayFit, Verdicts
from app.state.screen import Screen, shape
from app.state.snapshot import Snapshot
from app.state.usage import UsageView

Floats = npt.NDArray[np.float64]
MEMO_SIGNATURES = 16  # pod shapes whose per-node failure reasons are remembered
FIRST_SCREEN = 64  # best-ranked nodes screened before the rest


@dataclass(frozen=True, slots=True)
class Choice:
    winner: NodeVerdict | None
    failed: Mapping[str, str]  # every candidate's reason when nothing fits; empty when there is a winner
    ranked_ahead: int = 0  # candidates ranked ahead of the winner (none of them fits)
    use: NodeUse = field(
        default_factory=dict
    )  # the winner's usage the decision saw (blocking slots included)
    seen: tuple[int, int] | None = None  # the winner's other rows it summed (`UsageView.rows_stamp`)
    holds: int = -1  # the holds' version whose blocking slots it added (`UsageView.holds_version`)
    no_holds: bool = False  # there was none at that version


def signature(ctx: PodContext, vendors: Sequence[Vendor]) -> Hashable:
    """Everything `evaluate_node` reads from the pod: equal signatures, equal verdicts on a node."""
    return (
        tuple(tuple(sorted(container.items())) for container in ctx.requests.containers),
        ctx.requests.init_count,
        tuple(sorted(ctx.annotations.items())),
        ctx.gpu_policy,
        ctx.numa_bind,
        ctx.weights,
        ctx.namespace,
        tuple(sorted(ctx.quota.get(ctx.namespace, {}).items())),
        tuple(vendors),
    )


def without_own(use: NodeUse, own: Mapping[str, DeviceUse]) -> dict[str, DeviceUse]:
    """A node's usage minus this pod's previous reservation (HAMi releases it before deciding again)."""
    result = dict(use)
    for device, taken in own.items():
        current = result.get(device)
        if current is not None:
            result[device] = current.minus(taken)
    return result


class FastPath:
    """One per worker process; `choose` is safe to call from several threads (one decision at a time)."""

    def __init__(self, first_screen: int = FIRST_SCREEN) -> None:
        self.first_screen = first_screen
        self._lock = threading.Lock()
        self._table = NodeTable()
        self._memo: LRUCache[Hashable, dict[int, str]] = LRUCache(MEMO_SIGNATURES)
        self._names: list[str] = []
        self._rows: Ints = np.zeros(0, np.int64)
        self._rows_for: Snapshot | None = None
        self._shapes = MayFit()
        self._shapes_for: tuple[Vendor, ...] = ()

    def choose(
        self,
        ctx: PodContext,
        candidates: Sequence[str],
        snapshot: Snapshot,
        usage: UsageView,
        vendors: Sequence[Vendor],
        exclude_uid: str = "",
        asker: Asker | None = None,
        now: float = 0.0,
    ) -> Choice:
        """The winner among `candidates` (NodeNames order), or every candidate's failure reason.

        `exclude_uid`'s own reservation does not count against it (a re-filtered pod); the live holds that
        block `asker` at `now` count as usage on their nodes (docs/held-reservations.md rule 2): the answer
        is `decide`'s on the rows plus those slots.
        """
        with usage.frozen(), self._lock:
            table = self._table
            table.sync(snapshot, usage)
            own = usage.entries.get(exclude_uid) if exclude_uid else None
            adjusted: dict[int, NodeUse] = {}
            if own is not None and own.node in table.index:
                adjusted[table.index[own.node]] = without_own(usage.nodes.get(own.node, {}), own.uses)
            if asker is not None and usage.holds:
                for node, held in held_use(usage.holds, asker, now).items():
                    row = table.index.get(node)
                    if row is not None:
                        adjusted[row] = sum_uses((adjusted.get(row, usage.nodes.get(node, {})), held))
            return _Decision(self, ctx, candidates, snapshot, usage, vendors, adjusted, exclude_uid).run()

    def unfit(
        self,
        ctx: PodContext,
        candidates: Sequence[str],
        snapshot: Snapshot,
        usage: UsageView,
        vendors: Sequence[Vendor],
        spare: str = "",
    ) -> frozenset[str]:
        """The candidates the screening says cannot fit `ctx` on the view's usage (a necessary condition:
        more usage only makes it harder), for the gang planner (app/filter/gang.py); `spare`, the node of a
        reservation the caller will not count, is never among them."""
        with usage.frozen(), self._lock:
            self._table.sync(snapshot, usage)
            table = self._table
            assert table.columns is not None
            names = [n for n in candidates if n != spare and n in table.index]
            if not names:
                return frozenset()
            rows = np.fromiter((table.index[n] for n in names), np.int64, len(names))
            by_key = {v.key: v for v in vendors}
            may_fit = Screen(table.columns.take(rows), ctx, by_key, table.max_devices).may_fit
            return frozenset(n for n, fits in zip(names, may_fit.tolist(), strict=True) if not fits)

    def warm(self, snapshot: Snapshot, usage: UsageView) -> None:
        """Build the per-node state now rather than in the first decision."""
        with usage.frozen(), self._lock:
            self._table.sync(snapshot, usage)

    def rows(self, candidates: Sequence[str]) -> Ints:
        """Table row per candidate (-1: not in the snapshot); reused while the list stays the same."""
        table = self._table
        if self._rows_for is not table.snapshot or candidates != self._names:
            index = table.index
            self._rows = np.fromiter((index.get(n, -1) for n in candidates), np.int64, len(candidates))
            self._names, self._rows_for = list(candidates), table.snapshot
        return self._rows

    def verdicts(self, ctx: PodContext, vendors: Sequence[Vendor], by_key: Mapping[str, Vendor]) -> Verdicts:
        """The remembered screening verdicts of the pod's shape (all forgotten when the vendors change)."""
        if len(vendors) != len(self._shapes_for) or any(
            a is not b for a, b in zip(vendors, self._shapes_for, strict=False)
        ):
            self._shapes.clear()
            self._shapes_for = tuple(vendors)
        return self._shapes.verdicts(shape(ctx, by_key), len(self._table.names))

    def memo(self, key: Hashable) -> dict[int, str]:
        """Failure reasons by node state stamp for one pod signature (stale stamps are dropped wholesale
        once there are more entries than nodes, so memory stays bounded by signatures x nodes). A new one
        is only kept once a reason is remembered in it (`keep`): most decisions remember none."""
        found = self._memo.get(key)
        if found is None or len(found) > len(self._table.names):
            return {}
        return found

    def keep(self, key: Hashable, memo: dict[int, str]) -> None:
        self._memo[key] = memo

    @property
    def table(self) -> NodeTable:
        return self._table


def winner_order(keys: Floats, positions: Ints) -> Ints:
    """Indices sorting by key descending, then position descending: the order in which `decide`'s stable
    sort, read from its end, would name the winner."""
    return np.lexsort((positions, keys))[::-1]


def best(keys: Floats, positions: Ints, k: int) -> Ints:
    """The first `k` indices in winner order, without sorting everything (`positions` is increasing)."""
    if k >= len(keys):
        return winner_order(keys, positions)
    top = np.argpartition(keys, len(keys) - k)[len(keys) - k :]  # the k largest keys, ties cut arbitrarily
    threshold = keys[top].min()
    above = np.flatnonzero(keys > threshold)
    ties = np.flatnonzero(keys == threshold)  # among equal keys the later positions come first
    chosen = np.concatenate([above, ties[len(ties) - (k - len(above)) :]])
    return chosen[winner_order(keys[chosen], positions[chosen])]


def ranked_chunks(keys: Floats, positions: Ints, first: int) -> Iterator[Ints]:
    """Every index in winner order, in chunks of `first`, then four times more each time: the winner is
    usually near the top (the fullest nodes under binpack may not fit), and nothing is sorted or screened
    beyond the chunk where it is found."""
    remaining = np.arange(len(keys))
    size = first
    while len(remaining):
        chunk = remaining[best(keys[remaining], positions[remaining], size)]
        yield chunk
        keep = np.zeros(len(keys), bool)
        keep[remaining] = True
        keep[chunk] = False
        remaining = np.flatnonzero(keep)
        size *= 4


class _Decision:
    """One call of `FastPath.choose` (under its lock)."""

    def __init__(
        self,
        fast: FastPath,
        ctx: PodContext,
        candidates: Sequence[str],
        snapshot: Snapshot,
        usage: UsageView,
        vendors: Sequence[Vendor],
        adjusted: Mapping[int, NodeUse],
        uid: str,
    ) -> None:
        self.ctx, self.candidates, self.snapshot, self.usage = ctx, candidates, snapshot, usage
        self.uid = uid
        self.first_screen = fast.first_screen
        self.table = table = fast.table
        self.by_key = {v.key: v for v in vendors}
        self.rows = fast.rows(candidates)
        self.fast, self.signature = fast, signature(ctx, vendors)
        self.memo = fast.memo(self.signature)
        self.verdicts = fast.verdicts(ctx, vendors, self.by_key)
        columns, self.score = table.columns, table.score
        assert columns is not None
        # Rows seen otherwise than the table holds them: the pod's own reservation subtracted, the slots
        # that block it added. They are evaluated, scored and screened apart, and never remembered.
        self.adjusted = adjusted
        self.adjusted_rows = np.array(sorted(adjusted), np.int64)
        if adjusted:
            columns, scores = with_rows_usage(table, adjusted)
            self.score = self.score.copy()
            for row, score in scores.items():
                self.score[row] = score
        self.columns = columns
        self._full: Screen | None = None

    def _use(self, row: int) -> NodeUse:
        adjusted = self.adjusted.get(row)
        return adjusted if adjusted is not None else self.usage.nodes.get(self.table.names[row], {})

    def _chosen(self, winner: NodeVerdict, row: int, ranked_ahead: int) -> Choice:
        seen = self.usage.rows_stamp(winner.node, self.uid)
        usage = self.usage
        return Choice(winner, {}, ranked_ahead, self._use(row), seen, usage.holds_version, not usage.holds)

    def _evaluate(self, row: int) -> NodeVerdict | str:
        """The full verdict, or the remembered failure reason of this node state."""
        stamp = -1 if row in self.adjusted else int(self.table.stamp[row])
        reason = self.memo.get(stamp)
        if reason is not None:
            return reason
        working = None if stamp < 0 else self.table.working(row)
        verdict = evaluate_node(self.table.nodes[row], self._use(row), self.ctx, self.by_key, working)
        if verdict.fits or stamp < 0:
            return verdict if verdict.fits else verdict.reason
        if not self.memo:
            self.fast.keep(self.signature, self.memo)
        self.memo[stamp] = reason = sys.intern(verdict.reason)  # nodes share a handful of texts
        return reason

    def run(self) -> Choice:
        requested = {key for container in self.ctx.requests.containers for key in container}
        if any(key in self.by_key and self.by_key[key].scores_nodes for key in requested):
            return self._run_all()
        positions = np.flatnonzero(self.rows >= 0)
        rows = self.rows[positions]
        keys = self.score[rows] * node_score_sign(self.ctx.node_policy)
        unfit = self.verdicts.known_unfit(rows, self.table.stamp)
        if self.adjusted:
            unfit &= ~np.isin(rows, self.adjusted_rows)  # seen otherwise than the table: screened apart
        live = np.flatnonzero(~unfit)
        for chunk in ranked_chunks(keys[live], positions[live], self.first_screen):
            ranked = live[chunk]
            chunk_rows = rows[ranked]
            for index in np.flatnonzero(self._may_fit(chunk_rows)).tolist():
                row = int(chunk_rows[index])
                outcome = self._evaluate(row)
                if isinstance(outcome, NodeVerdict):
                    at = ranked[index]
                    ahead = (keys > keys[at]) | ((keys == keys[at]) & (positions > positions[at]))
                    return self._chosen(outcome, row, int(np.count_nonzero(ahead)))
        return Choice(None, self._failed())

    def _run_all(self) -> Choice:
        """A vendor adds to the node score from the allocation itself (HAMi `ScoreNode`), so the winner
        order is only known once every node that may fit has been evaluated: rank them as `decide` does."""
        may_fit = self._full_screen().may_fit
        fits = []
        for row in self.rows.tolist():
            if row >= 0 and may_fit[row]:
                outcome = self._evaluate(row)
                if isinstance(outcome, NodeVerdict):
                    fits.append(outcome)
        if not fits:
            return Choice(None, self._failed())
        winner = rank(fits, self.ctx.node_policy)[-1]
        return self._chosen(winner, self.table.index[winner.node], 0)

    def _may_fit(self, rows: Ints) -> Bools:
        """Screening's verdict on `rows` (table rows), from the shape's remembered verdicts where the row
        has not changed since; the rows seen otherwise (`adjusted`) are screened apart."""
        table = self.table
        columns = table.columns
        assert columns is not None

        def screen(which: Ints | None) -> Bools:
            if which is not None:
                return Screen(columns.take(which), self.ctx, self.by_key, table.max_devices).may_fit
            full = Screen(columns, self.ctx, self.by_key, table.max_devices)
            if not self.adjusted:
                self._full = full  # the same columns: FailedNodes may reuse it
            return full.may_fit

        may_fit = self.verdicts.refresh(rows, table.stamp, screen)
        if self.adjusted:
            apart = np.isin(rows, self.adjusted_rows)
            if apart.any():
                which = self.adjusted_rows
                mine = Screen(self.columns.take(which), self.ctx, self.by_key, table.max_devices).may_fit
                may_fit[apart] = mine[np.searchsorted(which, rows[apart])]
        return may_fit

    def _full_screen(self) -> Screen:
        if self._full is None:
            self._full = Screen(self.columns, self.ctx, self.by_key, self.table.max_devices)
        return self._full

    def _failed(self) -> dict[str, str]:
        """Every candidate's reason, in NodeNames order, as `decide` reports them."""
        texts, known = self._full_screen().reasons()
        valid = self.rows >= 0
        reasons = np.full(len(self.rows), None, object)
        reasons[valid] = texts[self.rows[valid]]
        missing = ~valid
        missing[valid] = ~known[self.rows[valid]]
        for index in np.flatnonzero(missing).tolist():
            row = int(self.rows[index])
            if row < 0:
                reasons[index] = unregistered_reason(self.snapshot.broken.get(self.candidates[index]))
                continue
            outcome = self._evaluate(row)
            assert not isinstance(outcome, NodeVerdict), "a node fits although no winner was found"
            reasons[index] = outcome
        return dict(zip(self.candidates, reasons.tolist(), strict=True))
