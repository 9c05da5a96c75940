"""The two bounded waits of a bind (app/bind/usecase.py): for this replica's allocation write of the pod, and
for the node locks.

Invariants owned here:
- A bind never overtakes the filter's allocation write: while the write is pending (the ledger row
  `assumed`, app/filter/write.py) it waits, bounded by HAMI_BIND_WRITE_WAIT; still pending then, the bind
  fails (and forgets the reservation, in app/bind/usecase.py).
- Every lock the pod's vendors need is taken, all or none, within HAMI_BIND_LOCK_WAIT: under contention the
  ones taken are given back before waiting, so a bind never sits on one lock while it waits for another;
  everything taken, or maybe taken, is in `held` for the caller to release on failure.
- A bind that finds its pod already bound gives back only the lock values it wrote itself, and of those
  only the ones the bound pod's device plugin no longer needs (`give_back_written`): a lock it re-entered
  is the bound pod's; and a lock naming the pod that it wrote may be the very lock the pod was bound under
  (a second bind of the pod re-entered it, stamped and bound while this one waited), so while the pod
  waits for its Allocate (bind-phase `allocating`) that lock stays, for the device plugin to release.
- The remembered contention (`_contended`) only chooses which request comes first (a blind take or a read
  of the node); what is decided about a lock is always decided on the API's answer.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from cachetools import TTLCache

from app.bind.outcome import LOCK_CONTENDED, NODE_LOOKUP, WRITE_PENDING, BindOutcome, Failed
from app.context import Context
from app.core import nodelock
from app.core.decision import ASSIGNED_NODE
from app.core.nodelock import Holder, classify_holder
from app.core.vendor import LockSpec
from app.k8s.errors import ApiError
from app.k8s.events import PodRef
from app.k8s.nodelock import Held, LockContention, NodeUnreadable, lock_all, release_all
from app.state.ledger import ASSUMED

logger = logging.getLogger(__name__)

LOCK_RETRY_FIRST, LOCK_RETRY_FACTOR, LOCK_RETRY_MAX = 0.025, 1.5, 0.25  # seconds: backoff under contention

# Nodes on which a bind of this process found the lock held by another pod in the last CONTENDED_MEMORY
# seconds: their next binds read the node first rather than try a blind take, which would only be refused
# (a 422 more per bind: under binpack consecutive pods queue on one node's lock until its device plugin's
# Allocate releases it). Disposable and per process, like every worker cache (a lock under gthread).
CONTENDED_MEMORY = 5.0
_contended: TTLCache[str, bool] = TTLCache(maxsize=8192, ttl=CONTENDED_MEMORY)
_contended_lock = threading.Lock()


def take_locks(
    context: Context,
    node: str,
    ref: PodRef,
    specs: Sequence[LockSpec],
    held: list[Held],
    outcome: BindOutcome,
) -> None:
    """Take every node lock the pod's vendors need (`specs`: HAMi's shared `hami.io/mutex.lock`, a vendor's
    own such as Cambricon's), all or none, waiting (with jittered backoff) up to HAMI_BIND_LOCK_WAIT under
    contention.

    The first attempt takes a free lock without reading the node (app.k8s.nodelock `blind`: one JSON patch
    that tests the lock is absent) unless this process found the node's lock held lately; a lock present is
    read and decided on as HAMi does, and so is every retry (the lock was there a moment ago). The node's
    read is also the bind's node lookup (a missing node fails as HAMi's `failed to get node`). A holder is
    usually released within tens of milliseconds (the device plugin's Allocate), so the backoff starts small
    and is capped at 250 ms: binpack places consecutive pods on the same node, and a long doubling backoff
    would turn that into seconds of idle waiting per pod.
    """
    expire = context.settings.nodelock_expire
    deadline = time.monotonic() + context.settings.bind_lock_wait
    delay = LOCK_RETRY_FIRST
    started = time.monotonic()
    with _contended_lock:
        blind = node not in _contended
    while True:
        try:
            acquired = lock_all(
                context.kube, node, ref.namespace, ref.name, specs, expire, context.now, held, blind=blind
            )
            outcome.took_over = acquired.took_over if acquired is not None else ""
            outcome.lock_waited = time.monotonic() - started
            return
        except NodeUnreadable as exc:
            raise Failed(exc.message, NODE_LOOKUP, event=f"failed to get node {node}") from None
        except LockContention as exc:
            blind = False
            with _contended_lock:
                _contended[node] = True
            outcome.lock_contended = True
            if len(held) > 1:  # some were taken: give them back before waiting
                with contextlib.suppress(ApiError):
                    release_all(context.kube, node, ref.namespace, ref.name, held, ref.uid)
                held.clear()
            if time.monotonic() + delay > deadline:
                if context.settings.bind_lock_wait > 0:
                    waited = nodelock.go_duration(timedelta(seconds=context.settings.bind_lock_wait))
                    message = f"timed out after {waited} waiting for node {node} to be unlocked"
                    raise Failed(f"{message}: {nodelock.CONTENTION}", LOCK_CONTENDED) from None
                raise Failed(str(exc), LOCK_CONTENDED) from None
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * LOCK_RETRY_FACTOR, LOCK_RETRY_MAX)


def give_back_written(
    context: Context, node: str, ref: PodRef, held: Sequence[Held], bound: Mapping[str, Any]
) -> None:
    """Release the locks of `held` that this bind wrote (a free lock it took), each only while it still
    holds the value written; a lock it re-entered (written nothing) is kept, and so is a written lock that
    names the pod while `bound` (the read that showed the pod bound to `node`) waits for its Allocate.

    Writing a lock naming the pod does not make it this bind's alone: every other bind of the pod re-enters
    it (HAMi's rule), and one of them may have stamped and bound the pod under it while this one waited.
    Such a pod waits for its Allocate (`Holder.PENDING_ALLOCATION`: bind-phase `allocating`, which every
    bind of ours stamps before its binding) and its device plugin finds it through the lock and releases
    it; given back now, the next pod's bind would take the node before this pod's Allocate. A lock written
    after the binding (from a stale copy, `_written`: the plugin had already set the phase and released the
    binding's lock) finds the pod allocated and is given back, as is one of a pod bound without a
    bind-phase (not by a bind of ours: nobody bound it under this lock). A vendor lock naming nobody is
    never re-entered, so no other bind was made under one written here: given back. Nothing raises. A lock
    left behind names a bound pod: its device plugin releases it, or the next binder takes it over once the
    pod's allocation finished, at the latest twice the lock timeout after it was written
    (app.core.nodelock.decide) — never stuck."""
    needed = classify_holder(bound, node, ASSIGNED_NODE, context.clock()) is Holder.PENDING_ALLOCATION
    spent = [entry for entry in held if entry.written and not (entry.spec.owned and needed)]
    taken = [replace(entry, spec=replace(entry.spec, owned=False)) for entry in spent]
    if not taken:
        return
    try:
        release_all(context.kube, node, ref.namespace, ref.name, taken)
    except Exception:  # e.g. the API unreachable: the lock is taken over as a bound pod's
        logger.exception("could not give back a lock taken for a bound pod", extra={"node": node})


WRITE_POLL_FIRST, WRITE_POLL_MAX = 0.002, 0.05  # seconds between looks at a pending write's row


def await_write(context: Context, ref: PodRef, outcome: BindOutcome) -> None:
    """Wait, bounded by HAMI_BIND_WRITE_WAIT, while this replica's allocation write of the pod is pending
    (its ledger row `assumed`: /filter answered before the write, app/filter/write.py). The row then says how
    it went: `confirmed` (the annotations are on the pod: bind on), or gone (the write failed, or this
    replica never filtered the pod: the pod as the API shows it decides). Still pending at the bound:
    the bind fails (and forgets the reservation); the pod is filtered again."""
    entry = context.ledger.get(ref.uid)
    if entry is None or entry.state != ASSUMED:
        return
    mark = time.monotonic()
    deadline, delay = mark + context.settings.bind_write_wait, WRITE_POLL_FIRST
    while time.monotonic() < deadline:
        time.sleep(delay)
        delay = min(delay * 2, WRITE_POLL_MAX)
        entry = context.ledger.get(ref.uid)
        if entry is None or entry.state != ASSUMED:
            outcome.phases["write_wait"] = time.monotonic() - mark
            return
    waited = nodelock.go_duration(timedelta(seconds=context.settings.bind_write_wait))
    message = f"the allocation of pod {ref.namespace}/{ref.name} was not written within {waited}"
    raise Failed(f"{message}; it will be filtered again", WRITE_PENDING)
