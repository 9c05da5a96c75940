"""The chaos storm's two-leader fault: for a window, the deposed leader and the new one both decide.

Leader election is not fencing (ARCHITECTURE.md): a replica decides while its status rows say it leads and
its Lease has not lapsed *by its own clock*, and nothing stops a replica that missed its own demotion. On
one machine with one clock the window is nearly empty — the old leader stops at its last renew + the
lease duration, the standby starts no earlier — so the storm makes it wide, as a real node can:

1. the Ready replica's registration worker is stalled (SIGSTOP to its process group: a process starved of
   CPU, a frozen cgroup, a long GC pause). It renews nothing, watches nothing: its ledger freezes, and its
   status rows keep saying "leader, lease until T";
2. at the same moment that replica's wall clock steps back by `step` seconds (sim.cluster.skewclock: an NTP
step,
   a VM resumed with a stale clock), so its Gunicorn, which keeps serving, believes T is still ahead and
   its worker's heartbeat fresh: it stays Ready and keeps deciding on its frozen ledger;
3. the standby sees the Lease unrenewed, takes it after the lease duration, rebuilds its ledger and becomes
   Ready too. Both answer `/readyz` 200; the Service (sim.kubescheduler.service) spreads kube-scheduler's
   calls over both, so each decides pods the other does not know about — overlapping decisions, as two leaders
   make them around a failover, only for seconds instead of milliseconds;
4. after `stall` seconds the clock steps forward again and the worker continues: it finds the Lease taken,
   steps down, and its replica stops deciding.

Only the data path (the ledger's atomic assume, the bind re-check after the node lock, against the node's
pods as the API shows them) can keep two such leaders from handing one device out twice; the storm's
verdict (sim.chaos.check, vendor-aware: sim.workload.devicerules) judges whether it did.

Each fault holds the replicas' lock for its duration, so no kill, restart or worker restart of the storm acts
on a replica meanwhile. A fault whose window did not come about — no single Ready leader with a standby, the
standby not Ready within the stall, or one of the two leaders deciding nothing in it (the CI storm on a loaded
2-core machine: 2 runs of 3) — is tried again, up to ATTEMPTS times, while pods are still arriving; every
attempt is recorded. Records (`two_leader_faults` in the report): the old and the new leader, how long both
were Ready, and how many placements (`/filter` answers placing a pod) and bindings (`/bind` answers `bound`)
each made meanwhile, from their `/metrics`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import urllib3

from sim.cluster.replicas import Replica, Replicas
from sim.kit.kube import warnings_quiet

logger = logging.getLogger(__name__)

TARGET_WAIT = 120.0  # seconds to wait for one Ready leader with a standby
PROBE_EVERY = 0.25
ATTEMPTS = 3  # tries of one planned fault until a window in which both leaders decided
RETRY_BEFORE = 0.9  # ... while less than this share of the pods was submitted
RETRY_PAUSE = 2.0  # seconds between tries
PLACED = 'hami_scheduler_filter_results_total{result="placed"}'
BOUND = "hami_scheduler_bind_results_total{"


@dataclass(frozen=True)
class TwoLeaderPlan:
    points: tuple[float, ...] = ()  # shares of the submissions at which a fault starts
    stall: float = 20.0  # seconds the leader's worker stays stalled
    step: float = 20.0  # seconds its clock steps back meanwhile


@dataclass
class TwoLeaderRecord:
    at: float  # the point of the plan (share of the pods submitted)
    old_leader: str = ""
    new_leader: str = ""
    at_s: float = 0.0  # since the storm started
    stalled_s: float = 0.0
    clock_step_s: float = 0.0
    both_ready_s: float = 0.0  # time both answered /readyz 200
    old_placed: int = 0  # /filter placements by the old leader during the stall
    old_bound: int = 0  # /bind bindings by the old leader during the stall
    new_placed: int = 0
    new_bound: int = 0
    old_stepped_down_s: float | None = None  # after the stall, until the old leader was no longer Ready
    note: str = ""

    def decided(self) -> bool:
        """A window with two Ready leaders in which both made decisions."""
        return (
            self.both_ready_s > 0
            and self.old_placed + self.old_bound > 0
            and self.new_placed + self.new_bound > 0
        )


def decisions(metrics: str) -> tuple[int, int]:
    """(placements, bindings) counted in a replica's `/metrics` text."""
    placed = bound = 0.0
    for line in metrics.splitlines():
        if line.startswith(PLACED):
            placed += float(line.rsplit(" ", 1)[1])
        elif line.startswith(BOUND) and 'result="bound"' in line:
            bound += float(line.rsplit(" ", 1)[1])
    return int(placed), int(bound)


class TwoLeaders:
    """Runs the plan's two-leader faults in one thread, each when the submissions reach its point."""

    def __init__(
        self, plan: TwoLeaderPlan, replicas: Replicas, progress: Callable[[], float], started: float
    ) -> None:
        """`progress`: the share of the storm's pods submitted so far; `started`: the storm's start
        (monotonic)."""
        self.plan, self.replicas = plan, replicas
        self._progress, self._started = progress, started
        self.records: list[TwoLeaderRecord] = []
        self.stop = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-two-leaders", daemon=True)

    def start(self) -> TwoLeaders:
        if self.plan.points and len(self.replicas.items) > 1:
            self._thread.start()
        else:
            self._done.set()
        return self

    def busy(self) -> bool:
        return not self._done.is_set()

    def close(self) -> None:
        self.stop.set()
        if self._thread.is_alive():
            self._thread.join(self.plan.stall + 30)

    def summary(self) -> dict[str, Any]:
        hit = [r for r in self.records if r.both_ready_s > 0]
        return {
            "two_leader_faults": [asdict(r) for r in self.records],
            "two_leader_windows": len(hit),
            "two_leader_windows_decided": sum(1 for r in hit if r.decided()),
            "two_leader_seconds": round(sum(r.both_ready_s for r in hit), 2),
            "two_leader_old_decisions": sum(r.old_placed + r.old_bound for r in hit),
            "two_leader_new_decisions": sum(r.new_placed + r.new_bound for r in hit),
        }

    def _run(self) -> None:
        try:
            for at in self.plan.points:
                while self._progress() < at:
                    if self.stop.wait(0.2):
                        return
                for attempt in range(ATTEMPTS):
                    record = TwoLeaderRecord(at)
                    self.records.append(record)
                    try:
                        self._one(record)
                    except Exception as exc:  # recorded: the report shows it, the storm goes on
                        logger.exception("two-leader fault failed")
                        record.note = f"{type(exc).__name__}: {exc}"
                    if record.decided() or attempt + 1 == ATTEMPTS or self._progress() >= RETRY_BEFORE:
                        break
                    logger.warning(
                        "two-leader fault at %s: no window with both deciding (%s); again", at, record
                    )
                    if self.stop.wait(RETRY_PAUSE):
                        return
        finally:
            self._done.set()

    def _leader(self) -> Replica | None:
        """The one Ready replica, once every other one stands by to take over."""
        deadline = time.monotonic() + TARGET_WAIT
        while time.monotonic() < deadline and not self.stop.is_set():
            ready = self.replicas.ready_ones()
            others = [r for r in self.replicas.items if r not in ready]
            if len(ready) == 1 and all(self.replicas.standing_by(r) for r in others):
                return ready[0]
            self.stop.wait(PROBE_EVERY)
        return None

    def _decisions(self) -> dict[str, tuple[int, int]]:
        counts = {}
        for replica in self.replicas.items:
            try:
                with warnings_quiet():
                    answer = self.replicas.http.request(
                        "GET", f"{replica.url}/metrics", timeout=urllib3.Timeout(total=5.0)
                    )
            except urllib3.exceptions.HTTPError:
                continue
            if answer.status == 200:
                counts[replica.name] = decisions(answer.data.decode(errors="replace"))
        return counts

    def _one(self, record: TwoLeaderRecord) -> None:
        with self.replicas.lock:  # no kill or restart of a replica while it runs
            old = self._leader()
            if old is None:
                record.note = "no single Ready leader with a standby"
                return
            before = self._decisions()
            record.old_leader, record.at_s = old.name, round(time.monotonic() - self._started, 2)
            stalled = time.monotonic()
            self.replicas.step_clock(old, self.plan.step)
            self.replicas.pause_worker(old)
            try:
                record.clock_step_s = self.plan.step
                self._watch(old, record, stalled)
                after = self._decisions()
            finally:
                self.replicas.step_clock(old, 0.0)
                self.replicas.resume_worker(old)
                record.stalled_s = round(time.monotonic() - stalled, 2)
            self._count(record, before, after)
            resumed, deadline = time.monotonic(), time.monotonic() + 30.0
            while time.monotonic() < deadline and not self.stop.is_set():
                if old not in self.replicas.ready_ones():
                    record.old_stepped_down_s = round(time.monotonic() - resumed, 2)
                    break
                self.stop.wait(PROBE_EVERY)

    def _watch(self, old: Replica, record: TwoLeaderRecord, stalled: float) -> None:
        """Probe readiness until the stall ends: how long both were Ready, and who the new leader is."""
        last = time.monotonic()
        while time.monotonic() - stalled < self.plan.stall and not self.stop.is_set():
            ready = self.replicas.ready_ones()
            now = time.monotonic()
            new = [r for r in ready if r is not old]
            if new:
                record.new_leader = new[0].name
                if old in ready:
                    record.both_ready_s = round(record.both_ready_s + now - last, 2)
            last = now
            self.stop.wait(PROBE_EVERY)
        if not record.new_leader:
            record.note = "the standby never became Ready during the stall"

    def _count(
        self, record: TwoLeaderRecord, before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]
    ) -> None:
        def delta(name: str) -> tuple[int, int]:
            if name not in before or name not in after:
                return 0, 0
            return after[name][0] - before[name][0], after[name][1] - before[name][1]

        record.old_placed, record.old_bound = delta(record.old_leader)
        if record.new_leader:
            record.new_placed, record.new_bound = delta(record.new_leader)
