"""The replica's status rows (app/state/status.py) and the loop that keeps them current.

`ReplicaState` is what the threads share: the leadership last evaluated, a term number that grows each time
we become leader, the term whose sync (ledger rebuild + registration pass) completed, the published
generation and when the work loop last made progress. `StatusLoop` is the only writer of the status rows:
every `period` (at most the retry period) and at once when woken, it asks the elector, notices
transitions (becoming leader starts a new term and wakes the work loop; losing it clears `synced` in the
same write) and writes:

    leader            leadership now (follow: holder is us and the Lease is unexpired; acquire: we hold it)
    identity          our identity
    leader_identity   the Lease holder as last seen (ours without election)
    lease_expires_at  follow: renewTime + leaseDurationSeconds; acquire: our last renew + lease duration
                      while leading, else 0; without election 0
    synced            leader, and this term's rebuild and registration pass completed
    heartbeat         when the work loop last made progress (not when this thread ran), so a stuck loop
                      turns the replica unready
    generation        the inventory snapshot generation last published
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from app.state.ledger import Ledger
from workers.election import Elector, Leadership
from workers.metrics import WorkerMetrics

logger = logging.getLogger(__name__)


@dataclass
class ReplicaState:
    leadership: Leadership
    term: int = 0
    synced_term: int = 0
    generation: int = 0
    alive_at: float = 0.0

    @property
    def synced(self) -> bool:
        return self.leadership.leading and self.term > 0 and self.synced_term == self.term


class StatusLoop:
    def __init__(
        self,
        ledger: Ledger,
        elector: Elector,
        identity: str,
        metrics: WorkerMetrics,
        *,
        period: float,
        clock: Callable[[], float],
        on_promoted: Callable[[], None],
    ) -> None:
        self._ledger = ledger
        self._elector = elector
        self._identity = identity
        self._metrics = metrics
        self._period = period
        self._clock = clock
        self._on_promoted = on_promoted
        self._lock = threading.Lock()
        self._state = ReplicaState(Leadership(False), alive_at=clock())
        self._draining = ""
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="status", daemon=True)

    # -- shared state -------------------------------------------------------------------------------------

    def current(self) -> ReplicaState:
        with self._lock:
            return dataclasses.replace(self._state)

    def leading_term(self) -> int:
        """The term we lead in now (re-asking the elector, so a lapse counts at once); 0 when we do not."""
        if not self._elector.leadership(self._clock()).leading:
            return 0
        with self._lock:
            return self._state.term if self._state.leadership.leading else 0

    def mark_synced(self, term: int) -> bool:
        """Record that `term`'s sync completed; False (nothing recorded) when that term is over."""
        with self._lock:
            if term != self._state.term or not self._state.leadership.leading:
                return False
            self._state.synced_term = term
        self.wake()
        return True

    def published(self, generation: int) -> None:
        with self._lock:
            self._state.generation = generation

    def set_draining(self, why: str) -> None:
        """Report not ready with this reason ("" to stop) while still leading (follow-mode hand-over)."""
        with self._lock:
            changed = self._draining != why
            self._draining = why
        if changed:
            self.wake()

    def alive(self) -> None:
        now = self._clock()
        with self._lock:
            self._state.alive_at = now

    # -- the loop -----------------------------------------------------------------------------------------

    def wake(self) -> None:
        self._wake.set()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop the loop and write the last rows: not leader, not synced."""
        self._stop.set()
        self._wake.set()
        self._thread.join(5)
        with self._lock:
            self._state.leadership = Leadership(False, self._state.leadership.holder)
            self._state.synced_term = 0
        try:
            self._write()
        except Exception:
            logger.exception("writing the last status rows failed")

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.evaluate()
            except Exception:
                logger.exception("writing the status rows failed")
            self._wake.wait(self._period)
            self._wake.clear()

    def evaluate(self) -> None:
        leadership = self._elector.leadership(self._clock())
        with self._lock:
            before = self._state.leadership.leading
            promoted = leadership.leading and not before
            if promoted:
                self._state.term += 1
            elif before and not leadership.leading:
                self._state.synced_term = 0
            self._state.leadership = leadership
            term = self._state.term
        if promoted:
            logger.info("became leader", extra={"identity": self._identity, "term": term})
            self._on_promoted()
        elif before and not leadership.leading:
            logger.warning(
                "lost leadership; node writes stopped",
                extra={"identity": self._identity, "holder": leadership.holder},
            )
        self._write()

    def _write(self) -> None:
        state = self.current()
        self._ledger.set_status(
            {
                "leader": state.leadership.leading,
                "identity": self._identity,
                "leader_identity": state.leadership.holder,
                "lease_expires_at": state.leadership.expires_at,
                "synced": state.synced,
                "heartbeat": state.alive_at,
                "generation": state.generation,
                "draining": self._draining if state.leadership.leading else "",
            }
        )
        self._metrics.leader.set(1 if state.leadership.leading else 0)
        self._metrics.synced.set(1 if state.synced else 0)
        self._metrics.snapshot_generation.set(state.generation)
