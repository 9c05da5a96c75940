"""The two bounded waits of a bind (app/bind/usecase.py): for this replica's allocation write of the pod, and
for the node locks.

Invariants owned here:
- A bind never overtakes the filter's allocation write: while the write is pending (the ledger row
  `assumed`, app/filter/write.py) it waits, bounded by HAMI_BIND_WRITE_WAIT; still pending then, the bind
  fails (and forgets the reservation, in app/bind/usecase.py).
- Every lock the pod's vendors need is taken, all or none, within HAMI_BIND_LOCK_WAIT: under contention the
  ones taken are given back before waiting, so a bind never sits on one lock while it waits for another;
  everything taken, or maybe taken, is in `held` for the caller to release on failure.
- A bind that finds its pod already bound gives back only the lock values it wrote itself
  (`give_back_written`): a lock it re-entered is the bound pod's, which its device plugin still needs.
- The remembered contention (`_contended`) only chooses which request comes first (a blind take or a read
  of the node); what is decided about a lock is always decided on the API's answer.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

from cachetools import TTLCache

from app.bind.outcome import LOCK_CONTENDED, NODE_LOOKUP, WRITE_PENDING, BindOutcome, Failed
from app.context import Context
from app.core import nodelock
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


def give_back_written(context: Context, node: str, ref: PodRef, held: Sequence[Held]) -> None:
    """Release the locks of `held` that this bind wrote (a free lock it took), each only while it still
    holds the value written; a lock it re-entered (written nothing) is kept. Nothing raises: a lock left
    behind names a bound pod, which the next binder takes over (app.core.nodelock.classify_holder)."""
    taken = [replace(entry, spec=replace(entry.spec, owned=False)) for entry in held if entry.written]
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
