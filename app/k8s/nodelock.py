"""HAMi's node lock on the API: a compare-and-swap of `hami.io/mutex.lock` on the node's resourceVersion.

The rules (who may take the lock) are pure, in `app.core.nodelock`; this module does the GETs and the
conditional PATCHes. A 409 means someone changed the node between our GET and PATCH: we re-read and decide
again. A bind first tries the common case without the GET (`blind`): no lock on the node, taken by one JSON
patch that `test`s the lock annotation is absent (`_take_if_free`); present, it reads and decides as above.
A lost answer to a successful PATCH is recognised on the next read (the lock is ours: re-entry).
Retries back off exponentially with jitter (HAMi #2589: fixed intervals make binds stampede). We only ever
delete a lock that is ours.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from app.core import nodelock
from app.core.decision import ASSIGNED_NODE
from app.core.nodelock import LOCK_ANNOTATION, Holder, Verdict
from app.core.vendor import LockSpec
from app.k8s import objects
from app.k8s.client import Kube
from app.k8s.errors import ApiError

logger = logging.getLogger(__name__)


class NodeUnreadable(ApiError):
    """Every read of the node failed (deleted, or the API kept failing)."""


class LockContention(Exception):
    """Another pod holds the node's lock; retryable. The message is HAMi's contention text."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """HAMi's retry.OnError backoff: 5 steps from 100 ms, factor 2, jitter 0.5."""

    steps: int = 5
    first: float = 0.1
    factor: float = 2.0
    jitter: float = 0.5

    def delays(self) -> list[float]:
        return [
            self.first * self.factor**i * (1 + self.jitter * random.random()) for i in range(self.steps - 1)
        ]


@dataclass(frozen=True, slots=True)
class Acquired:
    value: str
    took_over: str = ""  # why an existing lock was replaced, for logs and metrics
    reentered: bool = False


def holder_of(kube: Kube, node: str, value: str, now: datetime) -> Holder:
    """What the API says (one GET) about the pod that `node`'s lock `value` names."""
    lock = nodelock.parse_lock(value)
    try:
        pod = objects.get_pod(kube, lock.namespace, lock.name)
    except ApiError as exc:
        if exc.not_found:
            return Holder.GONE
        raise
    return nodelock.classify_holder(
        pod, node, ASSIGNED_NODE, now.timestamp(), locked_at=lock.time.timestamp()
    )


def lock_node(
    kube: Kube,
    node: str,
    namespace: str,
    name: str,
    expire: timedelta,
    now: Callable[[], datetime],
    backoff: Backoff = Backoff(),
    *,
    annotation: str = LOCK_ANNOTATION,
    owned: bool = True,
    written: list[str] | None = None,
    blind: bool = False,
) -> Acquired:
    """Take `node`'s lock `annotation` for pod `namespace/name`; raises LockContention, NodeUnreadable (the
    node could not be read at all: HAMi's `failed to get node`) or ApiError.

    `owned`: the value names the pod (HAMi's `hami.io/mutex.lock`), else it is a bare RFC3339 time (a
    vendor lock such as Cambricon's, which names nobody and is never re-entered). Every value patched is
    appended to `written` first, so a caller whose patch answer was lost can still release it, and removed
    again when the API refused the patch: `written` holds what this call wrote or may have written, never
    a lock it re-entered (the same pod's lock can carry the same value, to the second).

    `blind`: first try to take a free lock without reading the node (`_take_if_free`); when the lock is
    there (or that attempt fails in any way) read the node and decide as HAMi does."""
    if blind:
        taken = _take_if_free(kube, node, namespace, name, now(), annotation, owned, written)
        if taken is not None:
            return taken
    last: ApiError | None = None
    read = False
    for delay in [*backoff.delays(), None]:
        try:
            current = objects.get_node(kube, node)
            read = True
            value = objects.annotations_of(current).get(annotation)
            moment = now()
            decision = nodelock.decide(value, namespace, name, moment, expire)
            if decision.verdict is Verdict.NEED_HOLDER:
                assert value is not None
                holder = holder_of(kube, node, value, moment)
                decision = nodelock.decide(value, namespace, name, moment, expire, holder)
            if decision.verdict is Verdict.CONTENDED:
                raise LockContention(nodelock.contention_message(node, expire))
            if decision.verdict is Verdict.REENTER:
                assert value is not None
                return Acquired(value, reentered=True)
            if owned:
                new_value = nodelock.format_lock(moment, namespace, name)
            else:
                new_value = nodelock.format_rfc3339(moment)
            if written is not None:
                written.append(new_value)
            try:
                objects.patch_node_annotations(
                    kube, node, {annotation: new_value}, resource_version=objects.resource_version(current)
                )
            except ApiError as exc:
                if exc.refused and written is not None:
                    written.remove(new_value)  # surely not written: a lock re-entered next is not ours
                raise
            if value is not None:
                pod = f"{namespace}/{name}"
                details = {
                    "node": node,
                    "pod": pod,
                    "lock": annotation,
                    "previous": value,
                    "why": decision.why,
                }
                logger.warning("took over a node lock", extra=details)
            return Acquired(new_value, took_over=decision.why if value is not None else "")
        except ApiError as exc:
            last = exc
            if delay is None or exc.not_found:
                break
            time.sleep(delay)
    assert last is not None
    if not read:
        raise NodeUnreadable(last.status, last.reason, f"failed to get node {node}: {last.message}")
    raise ApiError(last.status, last.reason, f"failed to set node lock (node={node}): {last.message}")


def _take_if_free(
    kube: Kube,
    node: str,
    namespace: str,
    name: str,
    moment: datetime,
    annotation: str,
    owned: bool,
    written: list[str] | None,
) -> Acquired | None:
    """The common case in one request: no lock on the node (its last holder's device plugin released it),
    so `nodelock.decide` says ACQUIRE, and the lock is written only if it is still absent — a JSON patch
    whose `test` makes it a compare-and-swap on the lock annotation, as HAMi's resourceVersion CAS is on the
    whole node (a holder's, HAMi's scheduler's or another replica's write in between fails it; their own
    resourceVersion CAS fails on ours). The value is HAMi's, byte for byte. None when the lock is there
    (422), or the attempt failed otherwise (a lost answer: the read that follows finds our value)."""
    value = nodelock.format_lock(moment, namespace, name) if owned else nodelock.format_rfc3339(moment)
    if written is not None:
        written.append(value)
    try:
        objects.add_node_annotation_if_absent(kube, node, annotation, value)
    except ApiError as exc:
        if exc.refused and written is not None:
            written.remove(value)  # surely not written (the lock was there: 422)
        return None
    return Acquired(value)


def _renamed(kube: Kube, namespace: str, name: str, uid: str) -> bool:
    """The name `namespace/name` now belongs to another pod than `uid` (it was deleted and recreated)."""
    try:
        pod = objects.get_pod(kube, namespace, name)
    except ApiError as exc:
        if exc.not_found:
            return False
        raise
    found = objects.metadata_of(pod).get("uid")
    return bool(found) and found != uid


def release_node_lock(
    kube: Kube,
    node: str,
    namespace: str,
    name: str,
    backoff: Backoff = Backoff(),
    *,
    owner_uid: str = "",
    annotation: str = LOCK_ANNOTATION,
    values: tuple[str, ...] | None = None,
) -> bool:
    """Delete `node`'s lock if (and only if) pod `namespace/name` holds it; True if a lock was removed.

    With `owner_uid`, not once the name belongs to another pod: the lock names namespace/name only, and a
    pod recreated under the same name re-enters it (its bind may be under way, or its Allocate pending).
    With `values` (a lock whose value names nobody), only while it still holds one of the values this bind
    wrote: never another pod's lock (HAMi releases Cambricon's whatever it holds, vendors §3.3 #2).
    """
    last: ApiError | None = None
    for delay in [*backoff.delays(), None]:
        try:
            current = objects.get_node(kube, node)
            value = objects.annotations_of(current).get(annotation)
            if value is None:
                return False
            if values is not None:
                if value not in values:
                    return False
            elif not nodelock.is_owned_by(value, namespace, name) or (
                owner_uid and _renamed(kube, namespace, name, owner_uid)
            ):
                return False
            objects.patch_node_annotations(
                kube, node, {annotation: None}, resource_version=objects.resource_version(current)
            )
            return True
        except ApiError as exc:
            last = exc
            if delay is None or exc.not_found:
                break
            time.sleep(delay)
    assert last is not None
    raise last


def release_abandoned_lock(
    kube: Kube, node: str, now: datetime, expire: timedelta, annotation: str = LOCK_ANNOTATION
) -> str:
    """Delete `node`'s lock `annotation` (HAMi's shared one, or a vendor's) if nobody needs it any more
    (`nodelock.abandoned`: any other pod would take it over now); returns why it was deleted, "" when it was
    kept, is gone, or changed meanwhile.

    Everything is read fresh from the API (the node, then the holder pod), and the deletion is conditional
    on the node's resourceVersion, so a lock taken or re-stamped in between is never touched.
    """
    try:
        current = objects.get_node(kube, node)
        value = objects.annotations_of(current).get(annotation)
        if value is None:
            return ""
        decision = nodelock.abandoned(value, now, expire)
        if decision.verdict is Verdict.NEED_HOLDER:
            decision = nodelock.abandoned(value, now, expire, holder_of(kube, node, value, now))
        if decision.verdict is not Verdict.TAKE_OVER:
            return ""
        objects.patch_node_annotations(
            kube, node, {annotation: None}, resource_version=objects.resource_version(current)
        )
    except ApiError as exc:
        if exc.not_found or exc.conflict:
            return ""
        raise
    return decision.why


@dataclass(frozen=True, slots=True)
class Held:
    """A lock a bind took, or may have taken (a patch whose answer was lost): what to release."""

    spec: LockSpec
    written: list[str]


def lock_all(
    kube: Kube,
    node: str,
    namespace: str,
    name: str,
    specs: Sequence[LockSpec],
    expire: timedelta,
    now: Callable[[], datetime],
    held: list[Held],
    backoff: Backoff = Backoff(),
    *,
    blind: bool = False,
) -> Acquired | None:
    """Take every lock of `specs`, in order, appending each to `held` before trying it; the first error
    (contention included) is raised with the locks taken so far still in `held`, for the caller to release
    together (`release_all`: all or nothing, HAMi leaks the partial ones, #2626). Returns the last lock
    taken (None when `specs` is empty); its `took_over` says why an existing lock was replaced, if any."""
    acquired: Acquired | None = None
    for spec in specs:
        entry = Held(spec, [])
        held.append(entry)
        got = lock_node(
            kube,
            node,
            namespace,
            name,
            spec.expire or expire,
            now,
            backoff,
            annotation=spec.annotation,
            owned=spec.owned,
            written=entry.written,
            blind=blind,
        )
        if acquired is None or got.took_over:
            acquired = got
    return acquired


def release_all(
    kube: Kube, node: str, namespace: str, name: str, held: Sequence[Held], owner_uid: str = ""
) -> None:
    """Release every lock in `held` that is still ours, in reverse order; each is attempted even when an
    earlier release fails (the last error is raised once all were tried)."""
    failure: ApiError | None = None
    for entry in reversed(held):
        try:
            if entry.spec.owned:
                release_node_lock(
                    kube, node, namespace, name, owner_uid=owner_uid, annotation=entry.spec.annotation
                )
            elif entry.written:
                release_node_lock(
                    kube, node, namespace, name, annotation=entry.spec.annotation, values=tuple(entry.written)
                )
        except ApiError as exc:
            failure = exc
    if failure is not None:
        raise failure
