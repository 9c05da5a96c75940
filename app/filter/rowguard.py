"""Which of a pod's own ledger rows a /filter may replace or forget (issue 28 finding 2,
docs/ledger-writers.md).

A filter replaces the pod's row (`Ledger.assume`) and, when nothing fits, forgets it. That is right for a
decision nobody acted on, and wrong for a pod that is bound or may be: kube-scheduler filters a stale copy
of a pod whose bind it gave up on (its answer lost or late) while our bind went on, and the copy does not
show `spec.nodeName`. Replacing the row would hand the running pod's devices out again. So, per row
(app/state/rows.py, the bind mark):

- none, or in flight with no bind mark: the filter may replace it (no bind has acted on it);
- `bound`: refused at once (a pod never becomes unbound; no read needed);
- marked by a running bind younger than the in-flight TTL: refused at once, "retry later" (the bind is
  landing or failing right now; either way the next filter knows);
- anything else that may be bound (`unknown`, `rebuilt`, a running mark past the TTL — a bind that died
  with its process): the pod is read once (one GET, only in these rare cases) and the filter goes on only
  if the API shows it unbound, not being deleted and, for a `rebuilt` row, with no bind stamp younger
  than the TTL (a previous leader's bind may be landing); it then replaces exactly that version of the
  row (`Ledger.assume`'s `verified`), and a row changed since is refused by the ledger (`Protected`).

Refusals are `Error` answers (kube-scheduler retries; a bound pod leaves its queue), never FailedNodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.core.nodelock import BIND_PHASE, BIND_TIME, PHASE_ALLOCATING
from app.core.pods import annotations_of
from app.state.rows import BIND_REBUILT, BIND_RUNNING, BOUND, NO_BIND, RowState


@dataclass(frozen=True, slots=True)
class Guard:
    """What a filter does about the pod's current row: go on, refuse with `error`, or read the pod first."""

    error: str = ""
    read: bool = False


GO_ON = Guard()


def judge(row: RowState | None, now: float, ttl: float) -> Guard:
    """The rule for the pod's row as read before deciding (module docstring)."""
    if row is None or (row.state != BOUND and row.bind == NO_BIND):
        return GO_ON
    who = f"pod {row.namespace}/{row.name}"
    if row.state == BOUND:
        return Guard(f"hami-scheduler: {who} is already bound to node {row.node}")
    if row.bind.startswith(BIND_RUNNING) and now - row.updated_at <= ttl:
        return Guard(f"hami-scheduler: a bind of {who} to node {row.node} is in progress; retry later")
    return Guard(read=True)


def after_read(row: RowState, pod: Mapping[str, Any], now: float, ttl: float) -> str:
    """Once the pod was read (and found unbound, ours and not being deleted): the Error text when a bind
    may still land on a `rebuilt` row, else "" (the filter replaces that version of the row)."""
    if row.bind != BIND_REBUILT:
        return ""
    annotations = annotations_of(pod)
    stamp = annotations.get(BIND_TIME, "").strip()
    stamped = stamp.isascii() and stamp.isdigit() and now - float(stamp) <= ttl
    if annotations.get(BIND_PHASE) == PHASE_ALLOCATING and stamped:
        return f"hami-scheduler: a bind of pod {row.namespace}/{row.name} may be landing; retry later"
    return ""
