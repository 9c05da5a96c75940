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
3. Sweep: absence from the informer is never evidence that a pod is gone — a watch that lags (backoff up
   to 30 s, a slow relist of a large cluster, a delayed stream) would make live reservations vanish and
   the same device be handed out twice. A row the informer cannot vouch for (its pod absent from the
   informer once the row is older than `GONE_GRACE`, or in flight past the TTL while the informer shows
   its pod unbound) is a *suspect*; the sweep asks the API (one GET by namespace/name) and only the
   answer decides: 404 or another UID under the name (gone), terminal -> removed; bound -> the bound row
   (as a live event would make it); unbound and in flight past the TTL -> removed, and the pod's
   scheduler-owned annotations too (workers/phantoms.py: kube-scheduler gave up on it); anything else, or
   no answer -> kept. At most `CONFIRM_BUDGET` seconds of GETs per sweep. An answer applies only to the
   row asked about: a row whose (state, updated_at) changed meanwhile (checked again in the removing
   transaction, `Ledger.remove_unchanged`) waits for the next sweep. Every rewrite by a decision dates the
   row anew — the bind's re-check too, which restarts the in-flight TTL as its `bind-time` does in rule 1 —
   so a bind landing more than a TTL after its filter is never swept between its re-check and its binding
   (issue 19). Hence the bound (docs/gangs.md): a reservation kube-scheduler did not bind is released at
   most HAMI_INFLIGHT_TTL + one sweep period (`SWEEP_EVERY`, workers/worker.py) after its last write.
4. Rebuild (on becoming leader, at start without election, and when the periodic audit finds drift): the
   ledger becomes exactly rule 1 applied to a FRESH list of pods (not the watch cache), in one transaction
   that keeps the rows written by our Gunicorn workers since the list began (a pod filtered and bound
   while the list ran would otherwise be missing from both) and the `assumed`/`confirmed` rows younger
   than the TTL (they win over a rebuilt in-flight row; a rebuilt `bound` row wins over them). Rebuilt
   in-flight rows are `confirmed` (their annotations are on the pod) and dated by their
   `vgpu-time`/`bind-time`. Live events are held back (one lock) while the list and the replacement run,
   then applied in order, so nothing that happens during the list is lost.
5. Rebuild equals live: `compare` checks a rebuild against the ledger, ignoring in-flight rows (HAMi
   #2812/#2876, Koordinator #1289); tests prove it for random event streams.
6. A bound pod's allocation is immutable for the ledger: the device plugin handed those devices to the
   running containers, so a later change of its `hami.io/vgpu-node` or allocation annotation (refused at
   admission while `protectAnnotationsOnUpdate` is on) is never followed — the `bound` row keeps what the
   pod was bound with, the change is counted (`on_rewrite`) and logged. A rebuild from a fresh list keeps
   such a row too; only a ledger that never saw the pod bound takes its annotations as they are.
"""

from __future__ import annotations

import logging
import threading
import time
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
from workers.phantoms import Phantom, phantom

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


def held(entry: Entry) -> tuple[object, ...]:
    """What a bound pod was given, immutable for the ledger (rule 6): its node, its allocation and its MIG
    placements. The rest may change legitimately (init containers' shrink, MIG runtime identity)."""
    slices = sorted(
        (uuid, s.profile, s.placement.start, s.placement.size)
        for uuid, u in entry.uses.items()
        for s in u.mig
    )
    return (entry.node, entry.allocation, tuple(slices))


def rewritten(current: Entry | None, fresh: Entry | None) -> bool:
    """Would `fresh` change what the bound row `current` holds (rule 6)?"""
    return (
        current is not None
        and fresh is not None
        and current.state == BOUND
        and current.uid == fresh.uid
        and held(current) != held(fresh)
    )


def keep_current(rebuilt: Rebuilt, rules: Rules, now: float, listed_at: float) -> Callable[[Entry], bool]:
    """Which current rows survive a rebuild from a list that began at `listed_at` (rule 4): rows written
    since (the list may have missed them), in-flight rows younger than the TTL unless the rebuild has the
    pod bound, and bound rows whose allocation the rebuild would rewrite (rule 6)."""
    fresh = {e.uid: e for e in rebuilt.entries}

    def keep(row: Entry) -> bool:
        found = fresh.get(row.uid)
        if found is not None and found.state == BOUND:
            return rewritten(row, found)
        if listed_at <= row.updated_at <= now:
            return True
        return row.state in IN_FLIGHT and now - row.updated_at <= rules.inflight_ttl

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


def suspects(
    rows: Iterable[RowState], lookup: Callable[[str], Mapping[str, Any] | None], rules: Rules, now: float
) -> list[RowState]:
    """Rule 3, first half: rows the informer cannot vouch for. None is removed on this evidence alone."""
    found = []
    for row in rows:
        pod = lookup(row.uid)
        if pod is None:
            if now - row.updated_at > GONE_GRACE:
                found.append(row)
        elif row.state in IN_FLIGHT and not is_bound(pod) and now - row.updated_at > rules.inflight_ttl:
            found.append(row)
    return found


def confirmed(row: RowState, pod: Mapping[str, Any] | None, rules: Rules, now: float) -> Verdict:
    """Rule 3, second half: what the API's answer for a suspect row's pod (None: 404) does to the row."""
    try:
        if pod is None or pods.uid(pod) != row.uid or pods.is_terminated(pod):
            return Verdict(row.uid, remove=True)
        if is_bound(pod):
            entry = entry_for(pod, rules.vendors, rules.schedulers, BOUND, now)
            return Verdict(row.uid, entry=entry) if entry is not None else Verdict(row.uid, remove=True)
    except ValueError as exc:  # a corrupt allocation holds nothing, as in rule 2
        return Verdict(row.uid, remove=True, problem=str(exc))
    if row.state in IN_FLIGHT and now - row.updated_at > rules.inflight_ttl:
        return Verdict(row.uid, remove=True)
    return Verdict(row.uid)


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
        if read is None:
            self.ledger.remove(removals)
            return set(removals)
        return set(self.ledger.remove_unchanged(read[uid] for uid in removals))

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
                    described[verdict.uid] = _describe(change.obj)
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
            if since is None or now - since <= self.rules.inflight_ttl:
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
