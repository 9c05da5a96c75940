"""Applying the ledger rules (workers/reconcile.py) to the shared ledger: the registration worker's one
`Reconciler`, fed by the pod informer (rule 2), the work loop's sweep (rule 3), rebuilds and audits (rules 4
and 5).

Invariants owned here:

- One lock orders live events, sweeps and rebuilds: a rebuild holds back live events while its list and the
  replacement run, then they apply in order; the ledger connection is shared with the pod informer's
  thread, so the tombstone prune takes the lock too.
- The sweep asks the API outside the lock (live events go on), at most `CONFIRM_BUDGET` seconds of GETs per
  sweep; an answer that does not come proves nothing (the row stays). An answer applies only to the row it
  was asked about: rows written meanwhile are skipped, and the removal itself re-checks each row's
  (state, updated_at) in its transaction (`Ledger.remove_unchanged`).
- A bound row's allocation is never rewritten (rule 6): such a change is counted (`on_rewrite`), logged and
  dropped; a row equal to what the ledger has (`same`) is not written again.
- Only the sweep clears a pod's scheduler-owned annotations (workers/phantoms.py says which pods and keys),
  and only for a row it removed whose pod's `vgpu-time`/`bind-time` is older than the TTL: younger ones are
  what a rebuild would count (another replica's fresh filter). A failed clear leaves the row removed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from app.state.ledger import ASSUMED, BOUND, CONFIRMED, Ledger, RowState
from workers.informers import Change
from workers.phantoms import Phantom, phantom
from workers.reconcile import (
    Drift,
    Rebuilt,
    Rules,
    Verdict,
    compare,
    confirmed,
    describe,
    inflight_since,
    keep_current,
    live_verdict,
    rebuild,
    rewritten,
    same,
    suspects,
)

logger = logging.getLogger(__name__)

Fetch = Callable[[str, str], Mapping[str, Any] | None]  # GET a pod by namespace/name; None on 404
CONFIRM_BUDGET = 3.0  # seconds of confirming GETs per sweep; the rest waits for the next sweep


class Reconciler:
    """Applies the rules to the shared ledger. One lock orders live events, sweeps and rebuilds."""

    def __init__(
        self,
        ledger: Ledger,
        rules: Rules,
        clock: Callable[[], float],
        on_problem: Callable[[], None] = lambda: None,
        on_rewrite: Callable[[], None] = lambda: None,
        release: Callable[[Phantom], None] = lambda _: None,
    ) -> None:
        self.ledger = ledger
        self._release = release  # removes an expired reservation's annotations from its pod (phantoms.py)
        self.rules = rules
        self._clock = clock
        self._on_problem = on_problem
        self._on_rewrite = on_rewrite
        self._lock = threading.Lock()

    def _apply(
        self,
        verdicts: Iterable[Verdict],
        described: Mapping[str, str],
        read: Mapping[str, RowState] | None = None,
    ) -> set[str]:
        """Upsert and remove as the verdicts say (the caller holds the lock), never following a rewrite of a
        bound pod's allocation (rule 6); with `read` (the sweep) a row is removed only if it is still the
        row read. Returns the uids removed."""
        upserts, removals = [], []
        for verdict in verdicts:
            if verdict.problem:
                self._on_problem()
                logger.warning(
                    "pod allocation annotation is corrupt; it holds nothing",
                    extra={"pod": described.get(verdict.uid, "?"), "error": verdict.problem},
                )
            if verdict.remove:
                removals.append(verdict.uid)
                continue
            if verdict.entry is None:
                continue
            current = self.ledger.get(verdict.uid)
            if rewritten(current, verdict.entry):
                assert current is not None
                self._on_rewrite()
                logger.error(
                    "a bound pod's allocation changed on the API; the ledger keeps what it was bound with",
                    extra={
                        "pod": f"{current.namespace}/{current.name}",
                        "node": current.node,
                        "allocation": current.allocation,
                        "changed_to": f"{verdict.entry.node} {verdict.entry.allocation}",
                    },
                )
                continue
            if not same(verdict.entry, current):
                upserts.append(verdict.entry)
        if upserts:
            self.ledger.upsert(upserts)
        if not removals:
            return set()
        if read is None:  # a pending pod deleted: kube-scheduler sees no event that frees its devices
            self.ledger.remove(removals, free=("pending pod deleted", self._clock()))
            return set(removals)
        freeing = ("expired reservation swept", self._clock())
        return set(self.ledger.remove_unchanged((read[uid] for uid in removals), free=freeing))

    def handle(self, changes: Sequence[Change]) -> None:
        """The pod informer's handler (rule 2); the last event of a pod in the batch wins."""
        with self._lock:
            now = self._clock()
            final: dict[str, Verdict] = {}
            described: dict[str, str] = {}
            for change in changes:
                verdict = live_verdict(change, self.rules, now)
                if verdict.uid:
                    final[verdict.uid] = verdict
                    described[verdict.uid] = describe(change.obj)
            self._apply(final.values(), described)

    def _problems(self, rebuilt: Rebuilt) -> None:
        for pod, why in rebuilt.problems:
            self._on_problem()
            logger.warning(
                "pod allocation annotation is corrupt; it holds nothing", extra={"pod": pod, "error": why}
            )

    def rebuild(self, list_pods: Callable[[], list[dict[str, Any]]], *, only_on_drift: bool = False) -> Drift:
        """Rule 4 from a fresh list; with `only_on_drift` (the audit) replace only when rule 5 fails."""
        with self._lock:
            listed_at = self._clock()
            fresh = list_pods()
            now = self._clock()
            rebuilt = rebuild(fresh, self.rules, now)
            drift = compare(rebuilt.entries, self.ledger.all_entries())
            if drift or not only_on_drift:
                self._problems(rebuilt)
                keep = keep_current(rebuilt, self.rules, now, listed_at)
                self.ledger.replace_all(rebuilt.entries, keep=keep)
            return drift

    def prune(self) -> None:
        """Forget old tombstones (the ledger connection is shared with the pod informer's thread)."""
        with self._lock:
            self.ledger.prune_tombstones()

    def sweep(
        self,
        lookup: Callable[[str], Mapping[str, Any] | None],
        fetch: Fetch,
        budget: float = CONFIRM_BUDGET,
    ) -> dict[str, int]:
        """Rule 3: find the suspects, ask the API about each (outside the lock: live events go on), then
        apply the answers to the rows that did not change meanwhile. Returns the row count per state."""
        with self._lock:
            doubtful = suspects(self.ledger.row_states(), lookup, self.rules, self._clock())
        answers: dict[str, tuple[RowState, Mapping[str, Any] | None]] = {}
        deadline = time.monotonic() + budget
        for row in doubtful:
            if time.monotonic() > deadline:
                logger.info("ledger sweep ran out of time; the rest waits", extra={"left": len(doubtful)})
                break
            try:
                answers[row.uid] = (row, fetch(row.namespace, row.name))
            except Exception as exc:  # no answer proves nothing: the row stays until the next sweep
                logger.info("could not confirm a reservation", extra={"uid": row.uid, "error": str(exc)})
        with self._lock:
            now = self._clock()
            verdicts = []
            for uid, (row, pod) in answers.items():
                current = self.ledger.get(uid)
                if current is None or (current.state, current.updated_at) != (row.state, row.updated_at):
                    continue  # written meanwhile (a live event, a bind): the answer is about an older row
                verdicts.append(confirmed(row, pod, self.rules, now))
            described = {uid: f"{row.namespace}/{row.name}" for uid, (row, _) in answers.items()}
            removed = self._apply(verdicts, described, {uid: row for uid, (row, _) in answers.items()})
            if removed:
                logger.info("removed stale reservations", extra={"count": len(removed)})
            rows = self.ledger.row_states()
        for uid in sorted(removed):
            pod = answers[uid][1]
            since = inflight_since(pod) if pod is not None else None
            if since is None or now - since <= self.rules.ttl_for(pod):
                continue  # annotations a rebuild would count: another replica's fresh filter, or not ours
            found = phantom(pod, uid, self.rules.vendors)
            if found is None:
                continue
            try:
                self._release(found)
            except Exception as exc:  # the row is gone either way; the pod keeps stale keys, counted nowhere
                logger.info(
                    "could not clear an expired reservation's annotations",
                    extra={"uid": uid, "error": str(exc)},
                )
        counts = {ASSUMED: 0, CONFIRMED: 0, BOUND: 0}
        for state in (row.state for row in rows):
            counts[state] = counts.get(state, 0) + 1
        return counts
