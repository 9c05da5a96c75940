"""Holding a Lease ourselves (HAMI_LEADER_ELECT_MODE=acquire) with `kubernetes.leaderelection`.

The client's LeaderElection is made fit for a long-running process here:
- its LeaseLock talks to the default client configuration; ours is swapped in, with request timeouts
  (a hung renew must not outlive the renew deadline);
- an exception in a renew (connection refused, an unparsable answer) would end its thread; it counts as a
  failed attempt instead;
- it has no stop: every attempt checks ours, so `stop()` ends it within one retry period, and a leader that
  stops cleanly releases the Lease (empty holder, as client-go's ReleaseOnCancel) so a standby takes over
  at its next retry instead of after the lease duration;
- `run()` returns once leadership is lost; we start it again as a candidate;
- `step_down(hold_off)` hands the Lease over on purpose (the node is being drained): the next attempt
  releases it (empty holder) and the candidate stays out for `hold_off` seconds, so a standby on another
  node takes it at its next retry; if none did by then, we stand again.

Its callbacks run in its own threads: they only record the state and call `on_change`. Leadership is
`leading and now < last successful renew + lease duration`, so it lapses on time even if a renew hangs.
`electionconfig.Config` calls sys.exit() on invalid durations; config/settings.py validates them first.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubernetes.leaderelection import electionconfig
from kubernetes.leaderelection.leaderelection import LeaderElection
from kubernetes.leaderelection.leaderelectionrecord import LeaderElectionRecord
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from app.k8s.client import Kube

logger = logging.getLogger(__name__)


class _Stopped(Exception):
    """Raised inside the client's loops to leave them when we stop."""


class _SteppingDown(Exception):
    """Raised inside the client's loops to leave them when we hand the Lease over."""


class _TimedLeases:
    """The three CoordinationV1Api calls LeaseLock makes, on our client, with a request timeout."""

    def __init__(self, api: Any, timeout: float) -> None:
        self._api = api
        self._timeout = timeout

    def read_namespaced_lease(self, name: str, namespace: str) -> Any:
        return self._api.read_namespaced_lease(name, namespace, _request_timeout=self._timeout)

    def create_namespaced_lease(self, namespace: str, body: Any) -> Any:
        return self._api.create_namespaced_lease(namespace, body, _request_timeout=self._timeout)

    def replace_namespaced_lease(self, name: str, namespace: str, body: Any) -> Any:
        return self._api.replace_namespaced_lease(
            name=name, namespace=namespace, body=body, _request_timeout=self._timeout
        )


@dataclass(frozen=True, slots=True)
class LeaseState:
    leading: bool
    expires_at: float  # our last successful renew + lease duration (0 before the first)
    holder: str  # the holder as last observed


@dataclass(frozen=True, slots=True)
class LeaseConfig:
    name: str
    namespace: str
    identity: str
    lease_duration: float
    renew_deadline: float
    retry_period: float


class _Election(LeaderElection):
    def __init__(self, config: Any, owner: LeaseElector) -> None:
        super().__init__(config)
        self._owner = owner

    def try_acquire_or_renew(self) -> bool:
        owner = self._owner
        if owner.stopping.is_set():
            raise _Stopped
        if owner.stepping_down.is_set():
            raise _SteppingDown
        started = owner.clock()
        try:
            succeeded = bool(super().try_acquire_or_renew())
        except Exception as exc:
            logger.warning("lease attempt failed", extra={"error": f"{type(exc).__name__}: {exc}"})
            succeeded = False
        record = self.observed_record
        owner.observed(succeeded, started, str(getattr(record, "holder_identity", None) or ""))
        return succeeded


class LeaseElector:
    def __init__(
        self,
        kube: Kube,
        config: LeaseConfig,
        on_change: Callable[[], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.clock = clock
        self.stopping = threading.Event()
        self.stepping_down = threading.Event()
        self._hold_off = 0.0
        self._kube = kube
        self._on_change = on_change
        self._lock = threading.Lock()
        self._leading = False
        self._renewed_at = 0.0
        self._holder = ""
        self._thread = threading.Thread(target=self._run, name="lease-elector", daemon=True)

    def state(self) -> LeaseState:
        with self._lock:
            duration = math.ceil(self.config.lease_duration)
            expires = self._renewed_at + duration if self._renewed_at else 0.0
            return LeaseState(self._leading, expires, self._holder)

    def observed(self, succeeded: bool, started: float, holder: str) -> None:
        with self._lock:
            if succeeded:
                self._renewed_at = started
                self._holder = self.config.identity
            else:
                self._holder = holder

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float) -> None:
        self.stopping.set()
        self._thread.join(timeout)

    def step_down(self, hold_off: float) -> None:
        """Release the Lease at the next attempt and stand again only after `hold_off` seconds."""
        self._hold_off = hold_off
        self.stepping_down.set()

    def _set_leading(self, leading: bool) -> None:
        with self._lock:
            changed = self._leading != leading
            self._leading = leading
        if changed:
            logger.info(
                "lease " + ("acquired" if leading else "lost"), extra={"identity": self.config.identity}
            )
            self._on_change()

    def _lock_object(self) -> LeaseLock:
        c = self.config
        lock = LeaseLock(c.name, c.namespace, c.identity)
        timed = _TimedLeases(self._kube.coordination, max(1.0, c.renew_deadline / 2))
        lock.api_instance = timed  # type: ignore[assignment]
        return lock

    def _run(self) -> None:
        c = self.config
        lock = self._lock_object()
        while not self.stopping.is_set():
            config = electionconfig.Config(
                lock,
                lease_duration=math.ceil(c.lease_duration),
                renew_deadline=c.renew_deadline,
                retry_period=c.retry_period,
                onstarted_leading=lambda: self._set_leading(True),
                onstopped_leading=lambda: self._set_leading(False),
            )
            try:
                _Election(config, self).run()
            except _Stopped:
                break
            except _SteppingDown:
                self._release(lock)
                self._set_leading(False)
                logger.info("stepped down", extra={"identity": c.identity, "hold_off": self._hold_off})
                self.stopping.wait(self._hold_off)
                self.stepping_down.clear()
                continue
            except Exception:
                logger.exception("leader election failed; standing again")
                self._set_leading(False)
                self.stopping.wait(c.retry_period)
        if self.state().leading:
            self._release(lock)
        self._set_leading(False)

    def _release(self, lock: LeaseLock) -> None:
        """Give the Lease up (holder empty) if we still hold it, so a standby need not wait it out."""
        try:
            found, record = lock.get(self.config.name, self.config.namespace)
            if not found or record.holder_identity != self.config.identity:
                return
            now = str(datetime.fromtimestamp(self.clock()))
            lock.update(self.config.name, self.config.namespace, LeaderElectionRecord("", "1", now, now))
            logger.info("lease released", extra={"identity": self.config.identity})
        except Exception as exc:
            logger.warning("releasing the lease failed", extra={"error": str(exc)})
