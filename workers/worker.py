"""The registration worker put together: informers, election, status, the work loop and its timers.

Threads: one per informer (nodes, pods of each counted scheduler name (workers/podwatch.py), resource
quotas, PodGroups where the API serves them (workers/podgroups.py), and the Lease in follow mode), the
elector in acquire mode, the status loop, the metrics server, the renderer of HAMi's gauges
(workers/statemetrics.py), and the work loop (the caller's thread). The work loop does everything that
takes long, in this order of priority:

1. a new term (we just became leader, or started without election): rebuild the ledger from a fresh pod
   list, run a registration pass, mark the term synced — only if it is still the same term — and then
   write the handshakes and role labels that pass called for;
2. a registration pass, every HAMI_REGISTRATION_INTERVAL or shortly after a node or quota change
   (debounced); followers publish their local snapshot too (the stateless webhook on every replica needs
   quota limits) but never write to the API; each pass ends with the DRA check (workers/dra.py);
3. every ten seconds the ledger sweep, every five minutes the tombstone prune, and on the synced leader
   every ten minutes an audit (a rebuild from a fresh list compared with the ledger; applied only on drift);
4. on the synced leader, every HAMI_REGISTRATION_INTERVAL, the capacity annotation (workers/capacity.py):
   written where it changed, removed where HAMI_PUBLISH_CAPACITY is off;
5. every step (about a second), the held reservations' sweep (workers/holdsweep.py) and, on the synced
   leader, the touches that tell kube-scheduler that capacity came back (workers/freedtouch.py).

The leader's API writes (handshakes, role labels, abandoned node locks: workers/leaderwrites.py) each
re-ask the elector first, so losing leadership stops them at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import BinaryIO

from app.core.capacity import CAPACITY_ANNOTATION
from app.core.inventory import node_name
from app.core.vendor import node_locks
from app.k8s import objects
from app.k8s.client import Kube
from app.k8s.errors import ApiError
from app.k8s.events import EventRecorder
from app.k8s.watching import Target
from app.state import gauges
from app.state.holdstore import Judge
from app.state.ledger import Ledger
from app.state.status import HEARTBEAT_MAX_AGE
from config.settings import Settings
from workers import shapes
from workers.capacity import CapacityPublisher
from workers.dra import DraCheck, registered_nodes
from workers.election import AcquireLease, AlwaysLeader, Elector, FollowLease
from workers.freedtouch import FreedTouch
from workers.handover import Handover
from workers.handover import node_shape as handover_node_shape
from workers.holdsweep import HoldSweep
from workers.informers import DELETED, Change, Informer, by_name
from workers.leaderwrites import LeaderWrites
from workers.metrics import HoldEndings, LockAges, MetricsServer, WorkerMetrics
from workers.notices import AdmissionNotices
from workers.phantoms import Phantom, release
from workers.podgroups import GangWatch
from workers.podwatch import PodWatch
from workers.reconcile import Rules
from workers.reconciler import Reconciler
from workers.registration import Pass, Registrar
from workers.statemetrics import StateMetrics
from workers.status import StatusLoop
from workers.timers import Timer, never

logger = logging.getLogger(__name__)

DEBOUNCE = 0.3  # seconds to gather node/quota changes into one pass
SWEEP_EVERY = 10.0
PRUNE_EVERY = 300.0
AUDIT_EVERY = 600.0


class Worker:
    def __init__(self, settings: Settings, kube: Kube, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.metrics = WorkerMetrics()
        self._kube = kube
        self._clock = clock
        self._trigger = threading.Event()
        self._dirty = threading.Event()
        self._stop = threading.Event()
        # First, so an unusable HAMI_WORKER_METRICS_BIND fails before anything else is opened.
        self.server = MetricsServer(
            settings.worker_metrics_bind, self.metrics, self.healthy, self._fresh_gauges
        )
        self._reconcile_ledger = Ledger(settings.state_dir)
        self._status_ledger = Ledger(settings.state_dir)
        vendors = settings.vendors
        self.locks = node_locks(vendors)  # the leader sweeps every one of them; /metrics shows their ages
        # what a node event may change without calling for a registration pass: the locks, our capacity
        self._volatile_keys = frozenset(spec.annotation for spec in self.locks) | {CAPACITY_ANNOTATION}
        self.reconciler = Reconciler(
            self._reconcile_ledger,
            Rules(settings.counted.names, vendors, settings.inflight_ttl, settings.gang_ttl),
            clock,
            on_problem=self.metrics.corrupt_pods.inc,
            on_rewrite=self.metrics.allocation_rewrites.inc,
            release=self._release_phantom,
        )
        self.registrar = Registrar(vendors, settings.state_dir, self.metrics)
        self._reconcile_ledger.use_judge(
            Judge(self.registrar.node_devices, vendors, clock)
        )  # H1 on every write
        self.capacity = CapacityPublisher(kube, settings, clock, self.metrics.capacity_patches)
        self.dra = DraCheck(kube, vendors, self._reconcile_ledger, self.metrics, clock)
        self.state_metrics = StateMetrics(
            settings.state_dir,
            settings.state_metrics_interval,
            lambda: self.registrar.last,
            self.metrics.state_metrics_seconds,
            settings.legacy_metrics,
        )
        restart = self._count_restart
        self.gangs = GangWatch(kube, self._reconcile_ledger, restart, clock)
        self.nodes = Informer(
            kube,
            Target("nodes", label_selector=settings.node_label_selector),
            shapes.node_shape(vendors),
            by_name,
            self._on_nodes,
            on_restart=restart,
        )
        self.pods = PodWatch(
            kube,
            settings.counted.ordered(),
            shapes.pod_shape(vendors),
            self._on_pods,
            on_restart=restart,
        )
        self.notices = AdmissionNotices(
            EventRecorder(kube, settings.scheduler_name, settings.leader.identity),
            vendors,
            settings.scheduler_name,
            leading=lambda: bool(self.status.leading_term()),
            listed=lambda: all(i.synced.is_set() for i in self.pods.informers),
        )
        self.quotas = Informer(
            kube,
            Target("resourcequotas"),
            shapes.quota_shape(vendors),
            by_name,
            self._on_quotas,
            on_restart=restart,
        )
        self.informers = [self.nodes, *self.pods.informers, self.quotas]
        self.metrics.registry.register(LockAges(self.nodes.items, clock, [s.annotation for s in self.locks]))
        self.metrics.registry.register(HoldEndings(self._status_ledger.hold_endings))
        self.hold_sweep = HoldSweep(
            self._reconcile_ledger, self.pods.get, clock, self.metrics, gang_gone=self.gangs.gang_gone
        )
        self.freed = FreedTouch(kube, self._reconcile_ledger, clock, self.metrics)
        self.elector = self._elector()
        self.own_node: Informer | None = None
        self.handover: Handover | None = None
        if settings.node_name and settings.pod_name and settings.pod_namespace:
            self.own_node = Informer(
                kube,
                Target("nodes", field_selector=f"metadata.name={settings.node_name}"),
                handover_node_shape,
                by_name,
                lambda _changes: self._trigger.set(),
                on_restart=restart,
            )
            self.informers.append(self.own_node)
        leader = settings.leader
        self.status = StatusLoop(
            self._status_ledger,
            self.elector,
            leader.identity,
            self.metrics,
            period=min(leader.retry_period, 2.0),
            clock=clock,
            on_promoted=self._trigger.set,
        )
        self.leader_writes = LeaderWrites(kube, settings, self.locks, self.metrics, self.status.alive)
        if self.registrar.last is not None:  # a restart: readers already serve the snapshot on disk
            self.status.published(self.registrar.last.generation)
        if self.own_node is not None:
            self.handover = Handover(
                kube,
                self.elector,
                namespace=settings.pod_namespace,
                pod_name=settings.pod_name,
                node_name=settings.node_name,
                hold_off=leader.lease_duration,
                set_draining=self.status.set_draining,
                on_handover=self.metrics.handovers.inc,
            )

    def _elector(self) -> Elector:
        leader = self.settings.leader
        if not leader.enabled:
            return AlwaysLeader(leader.identity)
        if leader.mode == "acquire":
            return AcquireLease(self._kube, leader, lambda: self.status.wake())
        lease_key = f"{leader.resource_namespace}/{leader.resource_name}"
        informer = Informer(
            self._kube,
            Target(
                "leases", leader.resource_namespace, field_selector=f"metadata.name={leader.resource_name}"
            ),
            shapes.lease_shape,
            by_name,
            lambda _changes: self.status.wake(),
            on_restart=self._count_restart,
        )
        self.informers.append(informer)
        return FollowLease(lambda: informer.get(lease_key), leader.identity)

    # -- informer handlers (informer threads) -------------------------------------------------------------

    def _count_restart(self, resource: str, reason: str) -> None:
        self.metrics.watch_restarts.labels(resource, reason).inc()

    def _on_nodes(self, changes: Sequence[Change]) -> None:
        now = self._clock()
        relevant = False
        for change in changes:
            self.registrar.node_changed(node_name(change.obj), None if change.type == DELETED else now)
            old = change.old
            relevant |= (
                old is None
                or change.type == DELETED
                or shapes.content(old, self._volatile_keys) != shapes.content(change.obj, self._volatile_keys)
            )
        if relevant:
            self._dirty.set()
            self._trigger.set()

    def _on_pods(self, changes: Sequence[Change]) -> None:
        self.reconciler.handle(changes)
        self.notices.handle(changes)  # after the ledger: never raises
        self.gangs.on_pods(changes)  # the PodGroup members (raises: the informer lists again)

    def _on_quotas(self, changes: Sequence[Change]) -> None:
        if changes:
            self._dirty.set()
            self._trigger.set()

    # -- lifecycle ----------------------------------------------------------------------------------------

    def healthy(self) -> bool:
        return self._clock() - self.status.current().alive_at <= HEARTBEAT_MAX_AGE

    def _fresh_gauges(self) -> BinaryIO | None:
        limit = gauges.max_age(self.settings.state_metrics_interval)
        return gauges.open_fresh(self.settings.state_dir, time.time(), limit)  # against the file's mtime

    def stop(self) -> None:
        """Ask the work loop to finish (signal handlers call this)."""
        self._stop.set()
        self._trigger.set()

    def run(self) -> None:
        """Until `stop()`: start everything, wait for the informers' first lists, then the work loop."""
        self.server.start()
        for informer in self.informers:
            informer.start()
        self.status.start()
        self.elector.start()
        self.gangs.discover(time.monotonic())
        try:
            while not all(i.synced.is_set() for i in self.informers):
                self.status.alive()
                if self._stop.wait(0.2):
                    return
            logger.info(
                "informers synced", extra={"nodes": len(self.nodes.keys()), "pods": len(self.pods.keys())}
            )
            self._loop()
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        self.status.stop()  # leader=False, synced=False first: the HTTP side stops deciding at once
        self.elector.stop(timeout=self.settings.leader.retry_period + 5)
        self.gangs.stop()
        for informer in self.informers:
            informer.stop()
        for informer in self.informers:
            informer.join(5)
        self.gangs.join(5)
        self.server.stop()
        self.state_metrics.stop()
        self._reconcile_ledger.close()
        self._status_ledger.close()
        self.capacity.close()
        self.notices.close()

    def _loop(self) -> None:
        now = time.monotonic()
        registration = Timer(self.settings.registration_interval, now, first=0.0)
        sweep = Timer(SWEEP_EVERY, now, first=0.0)
        locks = Timer(self.settings.lock_sweep_interval, now)
        prune = Timer(PRUNE_EVERY, now)
        audit = Timer(AUDIT_EVERY, now)
        capacity = Timer(self.settings.registration_interval, now, first=0.0)
        synced_term = 0
        while not self._stop.is_set():
            self.status.alive()
            term = self.status.leading_term()
            try:
                if term and term != synced_term:
                    synced_term = term if self._sync(term) else synced_term
                    registration.due = time.monotonic() + registration.every
                elif self._dirty.is_set() or registration.fire(time.monotonic()):
                    if self._dirty.is_set():
                        self._stop.wait(DEBOUNCE)
                    self._dirty.clear()
                    self._register(term)
                self._housekeeping(bool(term) and term == synced_term, sweep, prune, audit)
                self.gangs.discover(time.monotonic())
                self.hold_sweep.run()  # every step (~1 s): freed capacity is heard within seconds
                self.freed.step(self._leading(term) if term and term == synced_term else never)
                if self.handover is not None and self.own_node is not None:
                    own = self.own_node.items()  # the one node of the field selector, if it exists
                    self.handover.step(own[0] if own else None, bool(term))
                if term and term == synced_term and locks.fire(time.monotonic()):
                    self._sweep_locks(term)
                if term and term == synced_term and capacity.fire(time.monotonic()):
                    self._publish_capacity(term)
            except Exception:
                logger.exception("work loop step failed; retrying")
                self._stop.wait(min(self.settings.leader.retry_period, 2.0))
            # After the first step (sync or pass), so that its first render — a full load of the ledger —
            # does not slow down the cold registration pass that start-up waits for.
            self.state_metrics.start()
            self._trigger.wait(1.0)
            self._trigger.clear()

    # -- the work -----------------------------------------------------------------------------------------

    def _list_pods(self) -> list[dict[str, object]]:
        return self.pods.list_fresh(on_page=self.status.alive)

    def _fetch_pod(self, namespace: str, name: str) -> dict[str, object] | None:
        """The pod as the API has it now (None: 404), for the ledger sweep's confirmations."""
        self.status.alive()
        try:
            return objects.get_pod(self._kube, namespace, name)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    def _release_phantom(self, found: Phantom) -> None:
        self.status.alive()
        if release(self._kube, found):
            self.metrics.phantoms_released.inc()

    def _sync(self, term: int) -> bool:
        """A new term: rebuild the ledger from a fresh list, publish the inventory, declare synced; then
        the node writes (handshakes, role labels), which do not change what was published."""
        started = time.monotonic()
        self.registrar.reset_bookkeeping()
        try:
            self.reconciler.rebuild(self._list_pods)
        except ApiError as exc:
            logger.warning("ledger rebuild failed; retrying", extra={"error": exc.message})
            self._stop.wait(min(self.settings.leader.retry_period, 2.0))
            return False
        self.metrics.rebuilds.inc()
        if self.status.leading_term() != term:
            return False
        result = self._publish()
        if not self.status.mark_synced(term):
            return False
        logger.info("synced", extra={"term": term, "seconds": round(time.monotonic() - started, 3)})
        self.leader_writes.nodes_and_roles(result.stamps, self._leading(term))
        return True

    def _register(self, term: int) -> None:
        result = self._publish()
        if term:
            self.leader_writes.nodes_and_roles(result.stamps, self._leading(term))

    def _publish(self) -> Pass:
        started = time.perf_counter()
        result = self.registrar.run(
            self.nodes.items(), self.quotas.items(), datetime.fromtimestamp(self._clock(), UTC)
        )
        self.metrics.sweep_seconds.observe(time.perf_counter() - started)
        if result.published is not None:
            self.status.published(result.published.generation)
            self.status.wake()
        self.dra.run(registered_nodes(self.registrar.last))
        return result

    def _leading(self, term: int) -> Callable[[], bool]:
        """Is `term` still ours? Asked again before every leader write (workers/leaderwrites.py)."""
        return lambda: self.status.leading_term() == term

    def _publish_capacity(self, term: int) -> None:
        self.capacity.step(self.registrar.last, self.nodes.items(), self._leading(term))

    def _sweep_locks(self, term: int) -> None:
        moment = datetime.fromtimestamp(self._clock(), UTC)
        self.leader_writes.release_abandoned_locks(self.nodes.items(), moment, self._leading(term))

    def _housekeeping(self, synced_leader: bool, sweep: Timer, prune: Timer, audit: Timer) -> None:
        now = time.monotonic()
        if sweep.fire(now):
            for state, count in self.reconciler.sweep(self.pods.get, self._fetch_pod).items():
                self.metrics.ledger_entries.labels(state).set(count)
        if prune.fire(now):
            self.reconciler.prune()
        if audit.fire(now) and synced_leader:
            drift = self.reconciler.rebuild(self._list_pods, only_on_drift=True)
            if drift:
                self.metrics.ledger_drift.inc()
                logger.warning(
                    "ledger differed from the API; rebuilt",
                    extra={
                        "missing": len(drift.missing),
                        "extra": len(drift.extra),
                        "changed": len(drift.changed),
                    },
                )
