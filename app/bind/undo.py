"""What a bind leaves behind when it does not succeed (app/bind/usecase.py): a failure releases our node
locks (only ours, every one) and forgets the reservation of the pod being bound (only its, only in flight,
only unmarked or marked by this very bind: docs/ledger-writers.md); a bind that cannot tell whether the
pod was bound keeps both and marks the row `unknown`, so no filter replaces it before reading the pod.
Nothing here raises: the answer to kube-scheduler must still be an Error.
"""

from __future__ import annotations

import logging

from app.context import Context
from app.k8s.errors import ApiError
from app.k8s.events import PodRef
from app.k8s.nodelock import Held, release_all

logger = logging.getLogger(__name__)


def unknown(context: Context, ref: PodRef, token: str) -> None:
    """The binding may have happened: the row this bind marked is kept, marked `unknown` (a filter reads
    the pod before replacing it; the pod's next event or the sweep settles it). Nothing raises: a mark
    left running is judged the same way once the in-flight TTL passed (app/filter/rowguard.py)."""
    try:
        context.ledger.bind_unknown(ref.uid, token)
    except Exception:
        logger.exception(
            "could not mark the bind's outcome unknown", extra={"pod": f"{ref.namespace}/{ref.name}"}
        )


def compensate(context: Context, ref: PodRef, node: str, held: list[Held], token: str) -> None:
    """Release our locks (only ours, every one) and forget the in-flight reservation of the pod being bound
    (only its, and only unmarked or marked by this bind); each step is attempted even if one fails,
    whatever it fails with, and nothing raises."""
    if held:
        # If even a release fails, the next binder takes that lock over once this unbound holder's bind
        # attempt is stale (app.core.nodelock.classify_holder) or, for a vendor lock, once it expires.
        try:
            release_all(context.kube, node, ref.namespace, ref.name, held, ref.uid)
        except ApiError:
            pass
        except Exception:  # the answer must still be an Error; the stale rule takes over
            logger.exception("could not release the node locks", extra={"pod": f"{ref.namespace}/{ref.name}"})
    try:
        context.ledger.forget_in_flight(ref.uid, ref.namespace, ref.name, token)
    except Exception:  # e.g. SQLite busy: the in-flight TTL sweep removes the row later
        logger.exception("could not forget the reservation", extra={"pod": f"{ref.namespace}/{ref.name}"})
