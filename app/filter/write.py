"""The deferred allocation write: /filter answers once the reservation is ASSUMEd; this writes it (issue 20).

Why it exists: kube-scheduler runs one scheduling cycle at a time and /filter sits inside it, so every API
round trip in /filter is paid by every pod in the cluster, serially. Where the caller is authenticated
kube-scheduler (the scheduler listener requires its client certificate, HAMI_TLS_CLIENT_CA_FILE), the pod
in the ExtenderArgs is kube-scheduler's own copy: /filter decides on it without reading the pod, ASSUMEs
the reservation in the shared ledger, hands the allocation PATCH to this writer and answers. The PATCH
(HAMi's annotations, still written before the Binding, as HAMi orders them) runs at once on a small thread
pool of the same process, preconditioned on the pod's UID and on the resourceVersion of kube-scheduler's
copy: a pod that changed since — bound by an earlier bind whose answer was lost, say, while kube-scheduler
filters its stale copy again — gets nothing written (409), and the bind fails.

Invariants owned here:
- The write's outcome is recorded in the ledger, on the row it was written for (same UID, still `assumed`,
  same allocation): success moves it to `confirmed`; any failure FORGETs it. A row that was replaced
  meanwhile (the pod filtered again) is never touched. /bind — on any worker or thread — waits, bounded, for
  the row to leave `assumed` before it takes the node lock (app/bind/usecase.py): `confirmed` goes on (with
  the pod as the PATCH answered it, kept beside the row for that bind: it reads no pod), a
  forgotten row fails the bind (the pod carries no allocation for the node), and a write still pending
  after HAMI_BIND_WRITE_WAIT fails the bind and forgets the reservation.
- At most one write per pod is in flight in a replica: /filter uses the deferred path only when the pod
  has no `assumed` row (a previous write pending); otherwise it reads the pod and writes synchronously with
  the resourceVersion precondition, as in the outside-extender mode.
- Every vendor key the write does not set is deleted by it (a merge patch deleting an absent key is a no-op):
  kube-scheduler's copy of a re-filtered pod may not show the keys of the earlier decision yet.
- A gang member's write is held in the ledger until its quorum is reserved and then sent by the worker that
  completes it (app/filter/gang.py, `encoded`); a held write is not in flight: a re-filter replaces it.
  Sent later than its decision, such a write that finds the pod changed (kube-scheduler's own status
  write, typically) reads the pod once and writes on its current version if it is still the same pod,
  unbound and not being deleted (`Write.reread`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import orjson

from app.core import pods
from app.core.decision import ASSIGNED_NODE
from app.k8s import objects
from app.k8s.client import Kube
from app.k8s.errors import ApiError
from app.k8s.events import NORMAL, WARNING, EventRecorder, PodRef
from app.state.ledger import Ledger

logger = logging.getLogger(__name__)

FILTERING_SUCCEED, FILTERING_FAILED = "FilteringSucceed", "FilteringFailed"
THREADS = 4


@dataclass(frozen=True, slots=True)
class Write:
    """One allocation PATCH: the annotations (None deletes a key) for the reservation `allocation` of the
    pod `ref` on `node`, and the success event's text."""

    ref: PodRef
    node: str
    annotations: Mapping[str, str | None]
    allocation: str
    event: str
    resource_version: str  # of kube-scheduler's copy: a pod changed since (bound, say) gets nothing
    # a gang member's write held until its quorum was reserved (app/filter/gang.py): on a 409 the pod is
    # read once and written if it is still the same pod, ours, unbound and not being deleted (kube-scheduler
    # may have written its status meanwhile)
    reread: bool = False


def encoded(write: Write) -> bytes:
    """The write as JSON, for a write held in the ledger until its gang's quorum is reserved
    (app/filter/gang.py)."""
    ref = write.ref
    return orjson.dumps(
        {
            "ref": [ref.namespace, ref.name, ref.uid],
            "node": write.node,
            "annotations": dict(write.annotations),
            "allocation": write.allocation,
            "event": write.event,
            "resourceVersion": write.resource_version,
        }
    )


def decoded(raw: bytes) -> Write:
    """`encoded`'s inverse (raises ValueError, KeyError or TypeError on anything else)."""
    data = orjson.loads(raw)
    namespace, name, uid = data["ref"]
    return Write(
        PodRef(str(namespace), str(name), str(uid)),
        str(data["node"]),
        {str(k): None if v is None else str(v) for k, v in data["annotations"].items()},
        str(data["allocation"]),
        str(data["event"]),
        str(data["resourceVersion"]),
        reread=True,
    )


class AllocationWriter:
    """A per-process pool of threads sending deferred allocation writes (started lazily, after fork)."""

    def __init__(
        self,
        kube: Kube,
        ledger: Ledger,
        events: EventRecorder,
        events_enabled: bool = True,
        threads: int = THREADS,
        observe: Callable[[str, float], None] | None = None,
    ) -> None:
        self._kube, self._ledger, self._events = kube, ledger, events
        self._events_enabled, self._threads = events_enabled, threads
        self._observe = observe
        self._pool: ThreadPoolExecutor | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def submit(self, write: Write) -> None:
        with self._lock:
            if self._pool is None or self._pid != os.getpid():
                self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="allocation-write")
                self._pid = os.getpid()
            pool = self._pool
        pool.submit(self._run, write)

    def close(self, timeout: float = 5.0) -> None:
        """Send what is queued (waiting up to `timeout`) and stop the threads."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            done = threading.Thread(target=pool.shutdown, kwargs={"wait": True}, daemon=True)
            done.start()
            done.join(timeout)

    def _run(self, write: Write) -> None:
        try:
            self.perform(write)
        except Exception:  # the row stays `assumed`: the bind's bounded wait and the TTL sweep clear it
            logger.exception(
                "allocation write crashed", extra={"pod": f"{write.ref.namespace}/{write.ref.name}"}
            )

    def perform(self, write: Write) -> bool:
        """Send one write and record its outcome in the ledger; True when it was written."""
        ref, started = write.ref, time.perf_counter()
        try:
            answer = self._patch(write, write.resource_version)
        except ApiError as exc:
            again = self._again(write) if write.reread and exc.conflict else None
            if again is not None:
                return self._written(write, again, started)
            self._ledger.resolve_write(ref.uid, write.allocation, written=False)
            self._account("failed", started)
            if self._events_enabled:
                self._events.record(ref, WARNING, FILTERING_FAILED, exc.message)
            return False
        return self._written(write, answer, started)

    def _patch(self, write: Write, version: str) -> dict[str, Any]:
        ref = write.ref
        return objects.patch_pod_metadata(
            self._kube,
            ref.namespace,
            ref.name,
            write.annotations,
            {ASSIGNED_NODE: write.node},
            uid=ref.uid,
            resource_version=version,
        )

    def _again(self, write: Write) -> dict[str, Any] | None:
        """A held gang write refused for an older resourceVersion: the pod as it is now, written (on that
        version) if it is still the same pod, unbound and not being deleted; None otherwise."""
        ref = write.ref
        try:
            pod = objects.get_pod(self._kube, ref.namespace, ref.name)
            spec = pods.spec(pod)
            if (
                pods.uid(pod) != ref.uid
                or spec.get("nodeName")
                or pods.metadata(pod).get("deletionTimestamp")
            ):
                return None
            return self._patch(write, objects.resource_version(pod))
        except (ApiError, pods.PodError):
            return None

    def _written(self, write: Write, answer: dict[str, Any], started: float) -> bool:
        ref = write.ref
        confirmed = self._ledger.resolve_write(ref.uid, write.allocation, written=True, pod=answer)
        self._account("written" if confirmed else "stale", started)
        if self._events_enabled and confirmed:
            self._events.record(ref, NORMAL, FILTERING_SUCCEED, write.event)
        return True

    def _account(self, outcome: str, started: float) -> None:
        """`outcome`: written, failed, or stale (written, but the row was replaced or forgotten meanwhile)."""
        if self._observe is not None:
            self._observe(outcome, time.perf_counter() - started)
