"""Keeping the reservation ledger equal to what the API's pods say (ARCHITECTURE.md invariant 3).

The team's rules, implemented exactly here:

1. A pod holds devices iff it has `hami.io/vgpu-node` and an allocation annotation, is not Succeeded or
   Failed, its `spec.schedulerName` is ours or adopted (app/core/adoption.py; a forged allocation on a
   foreign pod never counts, HAMi #3041), and EITHER it is bound (`spec.nodeName` set) OR — only during
   a rebuild — it is unbound but its
   `hami.io/vgpu-time` (or `hami.io/bind-time`) is within the in-flight TTL (a bind may be in flight on a
   previous leader). The capacity is `app.core.reservations.reservation_from_pod` (init-container shrink once
   every init container exited 0; terminating pods keep theirs until terminal, #1368).
2. Live (watch events): a bound pod that holds devices is upserted in state `bound`; a deleted or terminal
   pod is removed; a bound pod that holds nothing (no or corrupt allocation — the corrupt one is logged and
   counted) is removed, as a rebuild would not have it. Unbound pods are never added from the API: only
   /filter creates rows for them (`assumed`, then `confirmed`) and /bind turns them `bound`.
3. Sweep: an `assumed`/`confirmed` row whose pod is still unbound after the in-flight TTL is removed (the
   scheduler gave up on it); any row whose pod the informer does not have is removed once it is older than
   `GONE_GRACE` (a deletion missed between two lists; the grace covers informer lag behind /filter).
4. Rebuild (on becoming leader, at start without election, and when the periodic audit finds drift): the
   ledger becomes exactly rule 1 applied to a FRESH list of pods (not the watch cache), in one transaction
   that keeps the `assumed`/`confirmed` rows younger than the TTL written by our Gunicorn workers (they win
   over a rebuilt in-flight row; a rebuilt `bound` row wins over them). Rebuilt in-flight rows are
   `confirmed` (their annotations are on the pod) and dated by their `vgpu-time`/`bind-time`.
   Live events are held back (one lock) while the list and the replacement run, then applied in order,
   so nothing that happens during the list is lost.
5. Rebuild equals live: `compare` checks a rebuild against the ledger, ignoring in-flight rows (HAMi
   #2812/#2876, Koordinator #1289); tests prove it for random event streams.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core import pods
from app.core.decision import ASSIGNED_NODE, ASSIGNED_TIME
from app.core.nodelock import BIND_TIME
from app.core.pods import PodError
from app.core.vendor import Vendor
from app.state.ledger import ASSUMED, BOUND, CONFIRMED, Entry, Ledger, RowState
from app.state.podentry import entry_for
from workers.informers import DELETED, Change, by_uid

logger = logging.getLogger(__name__)

IN_FLIGHT = (ASSUMED, CONFIRMED)
GONE_GRACE = 10.0  # seconds a row may exist before its pod reaches our informer


@dataclass(frozen=True, slots=True)
class Rules:
    schedulers: frozenset[str]  # ours and the adopted names
    vendors: tuple[Vendor, ...]
    inflight_ttl: float = 60.0


def is_bound(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec")
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    return isinstance(node, str) and bool(node)


def inflight_since(pod: Mapping[str, Any]) -> float | None:
    """The latest of `hami.io/vgpu-time` and `hami.io/bind-time` (unix seconds), None when neither parses."""
    annotations = pods.annotations_of(pod)
    stamps = []
    for key in (ASSIGNED_TIME, BIND_TIME):
        value = annotations.get(key, "").strip()
        if value.isascii() and value.isdigit():
            stamps.append(float(value))
    return max(stamps) if stamps else None


def same(a: Entry | None, b: Entry | None) -> bool:
    """Equal in everything but the time it was written."""
    if a is None or b is None:
        return a is b
    return (a.uid, a.namespace, a.name, a.node, a.state, dict(a.uses), dict(a.quota), a.allocation) == (
        b.uid,
        b.namespace,
        b.name,
        b.node,
        b.state,
        dict(b.uses),
        dict(b.quota),
        b.allocation,
    )


def _describe(pod: Mapping[str, Any]) -> str:
    try:
        return f"{pods.namespace(pod)}/{pods.name(pod)}"
    except PodError:
        return "?"


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one pod event does to the ledger: upsert `entry`, remove the row, or nothing."""

    uid: str
    entry: Entry | None = None
    remove: bool = False
    problem: str = ""  # why a bound pod's allocation could not be read


def live_verdict(change: Change, rules: Rules, now: float) -> Verdict:
    pod = change.obj
    try:
        uid = pods.uid(pod)
        if change.type == DELETED or pods.is_terminated(pod):
            return Verdict(uid, remove=True)
        if not is_bound(pod):
            return Verdict(uid)
        entry = entry_for(pod, rules.vendors, rules.schedulers, BOUND, now)
    except ValueError as exc:  # CodecError, PodError or any other malformed value: one pod, never the batch
        return Verdict(by_uid(pod), remove=True, problem=str(exc))
    return Verdict(uid, entry=entry) if entry is not None else Verdict(uid, remove=True)


@dataclass(frozen=True, slots=True)
class Rebuilt:
    entries: tuple[Entry, ...]
    problems: tuple[tuple[str, str], ...] = ()  # (namespace/name, why) of pods skipped as corrupt


def rebuild(all_pods: Iterable[Mapping[str, Any]], rules: Rules, now: float) -> Rebuilt:
    """Rule 1 over a list of pods."""
    entries: list[Entry] = []
    problems: list[tuple[str, str]] = []
    for pod in all_pods:
        try:
            if pods.is_terminated(pod) or not pods.annotations_of(pod).get(ASSIGNED_NODE):
                continue
            if is_bound(pod):
                entry = entry_for(pod, rules.vendors, rules.schedulers, BOUND, now)
            else:
                since = inflight_since(pod)
                if since is None or now - since > rules.inflight_ttl:
                    continue
                entry = entry_for(pod, rules.vendors, rules.schedulers, CONFIRMED, since)
        except ValueError as exc:  # CodecError, PodError or any other malformed value
            problems.append((_describe(pod), str(exc)))
            continue
        if entry is not None:
            entries.append(entry)
    return Rebuilt(tuple(entries), tuple(problems))


def keep_inflight(rebuilt: Rebuilt, rules: Rules, now: float) -> Callable[[Entry], bool]:
    """Which current rows survive a rebuild: in-flight ones younger than the TTL, unless now bound."""
    bound = {e.uid for e in rebuilt.entries if e.state == BOUND}

    def keep(row: Entry) -> bool:
        return row.state in IN_FLIGHT and now - row.updated_at <= rules.inflight_ttl and row.uid not in bound

    return keep


@dataclass(frozen=True, slots=True)
class Drift:
    missing: tuple[str, ...] = ()  # bound in the rebuild, absent from the ledger
    extra: tuple[str, ...] = ()  # bound in the ledger, absent from the rebuild
    changed: tuple[str, ...] = ()  # both, but different

    def __bool__(self) -> bool:
        return bool(self.missing or self.extra or self.changed)


def compare(rebuilt: Iterable[Entry], live: Iterable[Entry]) -> Drift:
    """Rebuild vs ledger on bound rows; a uid in flight in the ledger is not drift (its bind is landing)."""
    live_rows = {e.uid: e for e in live}
    wanted = {e.uid: e for e in rebuilt if e.state == BOUND}
    held = {uid: e for uid, e in live_rows.items() if e.state == BOUND}
    in_flight = {uid for uid, e in live_rows.items() if e.state in IN_FLIGHT}
    return Drift(
        missing=tuple(sorted(wanted.keys() - held.keys() - in_flight)),
        extra=tuple(sorted(held.keys() - wanted.keys())),
        changed=tuple(sorted(u for u in wanted.keys() & held.keys() if not same(wanted[u], held[u]))),
    )


def stale_rows(
    rows: Iterable[Entry | RowState],
    lookup: Callable[[str], Mapping[str, Any] | None],
    rules: Rules,
    now: float,
) -> list[str]:
    """Rule 3: rows the sweep removes."""
    stale = []
    for row in rows:
        pod = lookup(row.uid)
        if pod is None:
            if now - row.updated_at > GONE_GRACE:
                stale.append(row.uid)
        elif row.state in IN_FLIGHT and not is_bound(pod) and now - row.updated_at > rules.inflight_ttl:
            stale.append(row.uid)
    return stale


class Reconciler:
    """Applies the rules to the shared ledger. One lock orders live events, sweeps and rebuilds."""

    def __init__(
        self,
        ledger: Ledger,
        rules: Rules,
        clock: Callable[[], float],
        on_problem: Callable[[], None] = lambda: None,
    ) -> None:
        self.ledger = ledger
        self.rules = rules
        self._clock = clock
        self._on_problem = on_problem
        self._lock = threading.Lock()

    def handle(self, changes: Sequence[Change]) -> None:
        """The pod informer's handler (rule 2); the last event of a pod in the batch wins."""
        with self._lock:
            now = self._clock()
            final: dict[str, Verdict] = {}
            for change in changes:
                verdict = live_verdict(change, self.rules, now)
                if verdict.problem:
                    self._on_problem()
                    logger.warning(
                        "pod allocation annotation is corrupt; it holds nothing",
                        extra={"pod": _describe(change.obj), "error": verdict.problem},
                    )
                if verdict.uid:
                    final[verdict.uid] = verdict
            upserts = [
                v.entry
                for v in final.values()
                if v.entry is not None and not same(v.entry, self.ledger.get(v.uid))
            ]
            if upserts:
                self.ledger.upsert(upserts)
            removals = [v.uid for v in final.values() if v.remove]
            if removals:
                self.ledger.remove(removals)

    def _problems(self, rebuilt: Rebuilt) -> None:
        for pod, why in rebuilt.problems:
            self._on_problem()
            logger.warning(
                "pod allocation annotation is corrupt; it holds nothing", extra={"pod": pod, "error": why}
            )

    def rebuild(self, list_pods: Callable[[], list[dict[str, Any]]], *, only_on_drift: bool = False) -> Drift:
        """Rule 4 from a fresh list; with `only_on_drift` (the audit) replace only when rule 5 fails."""
        with self._lock:
            fresh = list_pods()
            now = self._clock()
            rebuilt = rebuild(fresh, self.rules, now)
            drift = compare(rebuilt.entries, self.ledger.all_entries())
            if drift or not only_on_drift:
                self._problems(rebuilt)
                self.ledger.replace_all(rebuilt.entries, keep=keep_inflight(rebuilt, self.rules, now))
            return drift

    def prune(self) -> None:
        """Forget old tombstones (the ledger connection is shared with the pod informer's thread)."""
        with self._lock:
            self.ledger.prune_tombstones()

    def sweep(self, lookup: Callable[[str], Mapping[str, Any] | None]) -> dict[str, int]:
        """Rule 3; returns the ledger's row count per state after the sweep (for metrics)."""
        with self._lock:
            rows = self.ledger.row_states()  # the rule needs uid, state and age only
            stale = set(stale_rows(rows, lookup, self.rules, self._clock()))
            if stale:
                self.ledger.remove(stale)
                logger.info("removed stale reservations", extra={"count": len(stale)})
        counts = {ASSUMED: 0, CONFIRMED: 0, BOUND: 0}
        for row in rows:
            if row.uid not in stale:
                counts[row.state] = counts.get(row.state, 0) + 1
        return counts
