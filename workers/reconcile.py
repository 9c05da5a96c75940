"""Keeping the reservation ledger equal to what the API's pods say (ARCHITECTURE.md invariant 3).

The team's rules: what the ledger should hold is decided exactly here, by pure functions of pods, rows and
the clock (the chaos verdict and the tests rebuild with them too); `Reconciler` (workers/reconciler.py)
applies them to the shared ledger.

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
   no answer -> kept. At most `CONFIRM_BUDGET` seconds of GETs per sweep (workers/reconciler.py). An
   answer applies only to the row asked about: a row whose (state, updated_at) changed meanwhile (checked
   again in the removing transaction, `Ledger.remove_unchanged`) waits for the next sweep. Every rewrite
   by a decision dates the row anew — the bind's re-check too, which restarts the in-flight TTL as its
   `bind-time` does in rule 1 — so a bind landing more than a TTL after its filter is never swept between
   its re-check and its binding (issue 19). Hence the bound (docs/gangs.md): a reservation kube-scheduler
   did not bind is released at most HAMI_INFLIGHT_TTL + one sweep period (`SWEEP_EVERY`, workers/worker.py)
   after its last write; a gang member's (a pod naming a PodGroup) after HAMI_GANG_TTL instead
   (`Rules.ttl_for`): kube-scheduler's pod group cycle binds a quorum at once or abandons it.
4. Rebuild (on becoming leader, at start without election, and when the periodic audit finds drift): the
   ledger becomes exactly rule 1 applied to a FRESH list of pods (not the watch cache), in one transaction
   that keeps the rows written by our Gunicorn workers since the list began (a pod filtered and bound
   while the list ran would otherwise be missing from both) and the `assumed`/`confirmed` rows younger
   than the TTL (they win over a rebuilt in-flight row; a rebuilt `bound` row wins over them). Rebuilt
   in-flight rows are `confirmed` (their annotations are on the pod), dated by their
   `vgpu-time`/`bind-time` and marked `rebuilt` (a previous leader's bind may be landing: no filter
   replaces them before reading the pod, docs/ledger-writers.md). Live events are held back (one lock)
   while the list and the replacement run, then applied in order, so nothing that happens during the list
   is lost.
5. Rebuild equals live: `compare` checks a rebuild against the ledger, ignoring in-flight rows (HAMi
   #2812/#2876, Koordinator #1289); tests prove it for random event streams.
6. A bound pod's allocation is immutable for the ledger: the device plugin handed those devices to the
   running containers, so a later change of its `hami.io/vgpu-node` or allocation annotation (refused at
   admission while `protectAnnotationsOnUpdate` is on) is never followed — the `bound` row keeps what the
   pod was bound with, the change is counted (`on_rewrite`) and logged. A rebuild from a fresh list keeps
   such a row too; only a ledger that never saw the pod bound takes its annotations as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from app.core import pods
from app.core.decision import ASSIGNED_NODE, ASSIGNED_TIME
from app.core.gang import group_of
from app.core.nodelock import BIND_TIME
from app.core.pods import PodError
from app.core.vendor import Vendor
from app.state.ledger import BOUND, CONFIRMED, Entry, RowState
from app.state.podentry import entry_for
from app.state.rows import BIND_REBUILT, IN_FLIGHT
from workers.informers import DELETED, Change, by_uid

GONE_GRACE = 10.0  # seconds a row may exist before its pod reaches our informer


@dataclass(frozen=True, slots=True)
class Rules:
    schedulers: frozenset[str]  # ours and the adopted names
    vendors: tuple[Vendor, ...]
    inflight_ttl: float = 60.0
    gang_ttl: float | None = None  # a gang member's in-flight TTL (HAMI_GANG_TTL); None: the in-flight TTL

    def ttl_for(self, pod: Mapping[str, Any] | None) -> float:
        """How long the pod's unbound reservation counts as in flight: a member of a PodGroup's is released
        after the gang TTL (docs/gangs.md), any other after the in-flight TTL."""
        if self.gang_ttl is not None and pod is not None and group_of(pod):
            return self.gang_ttl
        return self.inflight_ttl


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
    """Equal in everything but the time it was written (the pod's facts and the bind mark included)."""
    if a is None or b is None:
        return a is b
    return replace(a, updated_at=0.0) == replace(b, updated_at=0.0)


def describe(pod: Mapping[str, Any]) -> str:
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
                if since is None or now - since > rules.ttl_for(pod):
                    continue
                entry = entry_for(pod, rules.vendors, rules.schedulers, CONFIRMED, since)
                entry = replace(entry, bind=BIND_REBUILT) if entry is not None else None
        except ValueError as exc:  # CodecError, PodError or any other malformed value
            problems.append((describe(pod), str(exc)))
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
        elif row.state in IN_FLIGHT and not is_bound(pod) and now - row.updated_at > rules.ttl_for(pod):
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
    if row.state in IN_FLIGHT and now - row.updated_at > rules.ttl_for(pod):
        return Verdict(row.uid, remove=True)
    return Verdict(row.uid)
