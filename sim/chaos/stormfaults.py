"""The chaos storm's long faults, aimed at one replica's registration worker (issue 11): what makes a
ledger that trusts its informers hand the same GPU out twice.

Short faults (sim.chaos.plan's rules) cut a watch now and then; the worker's informer re-watches within a
second. These last longer than every grace period of the code — the sweep's `GONE_GRACE` (10 s) plus its
period (10 s), the lock sweep's period (30 s), the filter's sync wait (10 s), the Lease (4 s) — and, at
the long run's 75 s, also the in-flight TTL and the stale-bind age (60 s) and the storm's node-lock expiry
(60 s, `HAMI_NODELOCK_EXPIRE`):

- `watch-delay` (pods or nodes): the worker's open watches of that resource are cut, and the emulator
  holds each re-watch `seconds` before it streams (from the informer's last version, so nothing is lost,
  only late): the informer sees nothing of that resource for that long — a watch that lags.
- `relist` (pods or nodes): the worker's watches end with ERROR 410 Expired, as after a compaction or a
  restart of kube-apiserver's watch cache, so the informer lists again; that list is held `seconds` (a
  slow relist of a large cluster).
- `worker-restart`: the worker's container is SIGKILLed and started again `seconds` later (an OOM kill
  or a failed liveness probe restarts that container alone): its informers start empty, its Gunicorn
  keeps serving; for the leader, the Lease is its own again on restart, or the standby's once it lapsed.

Each is aimed at the `leader` (the Ready replica) or the `standby`, found when the fault starts; the rules
match the worker's User-Agent (`hami-scheduler-worker/<version> (<POD_NAME>)`, app/k8s/client.py), so no
other client is touched. Every fault is recorded with its target, start, duration and effect (watches
cut, rules fired) for the report's `disruptions`.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from sim.cluster.replicas import Replica, Replicas
from sim.emulator.testing import EmulatorHandle

logger = logging.getLogger(__name__)

KINDS = ("watch-delay", "relist", "worker-restart")
RULE_SLACK = 8  # a held-up watch or list rule fires at most this often (one per informer of the resource)
FIRE_WAIT = 45.0  # seconds for the informers to open the held-up requests (their backoff: up to 30 s + 50 %)
TARGET_WAIT = 150.0  # seconds to wait for a leader or standby: a held relist can leave none Ready that long


@dataclass(frozen=True)
class LongFault:
    """One long fault of the plan: `kind` on `resource` at `target`, once `at` x the pods were submitted."""

    kind: str
    at: float
    seconds: float
    target: str = "leader"  # or standby
    resource: str = ""  # pods or nodes (watch-delay, relist)


@dataclass
class Disruption:
    """What one long fault did (the report's `disruptions`)."""

    kind: str
    resource: str
    target: str
    replica: str = ""  # the worker it hit ("" when no replica could be targeted)
    at_s: float = 0.0  # since the storm started
    duration_s: float = 0.0  # how long the watch or list was held, or the worker was down
    watches_cut: int = 0
    requests_held: int = 0  # watch or list requests the rule held up
    back_after_s: float | None = None  # worker-restart: until its heartbeat was fresh again
    note: str = ""


def agent_pattern(replica: Replica) -> str:
    """The User-Agent of `replica`'s registration worker, as a regular expression."""
    return rf"^hami-scheduler-worker/\S+ \({re.escape(replica.name)}\)$"


class LongFaults:
    """Runs the plan's long faults in one thread, each when the storm's submissions reach its point. Lags of
    pods and of nodes overlap; two lags of one resource do not (a held watch is not open yet, so it could
    be neither cut nor expired), and a worker restart waits until every lag is over."""

    def __init__(
        self,
        plan: tuple[LongFault, ...],
        replicas: Replicas,
        hooks: EmulatorHandle,
        submitted: Any,  # () -> pods submitted so far
        total: int,
        started: float,
    ) -> None:
        self.plan = plan
        self.replicas = replicas
        self.hooks = hooks
        self._submitted = submitted
        self._total = total
        self._started = started
        self.records: list[Disruption] = []
        self._until: dict[str, float] = {}  # resource -> monotonic time its running lag ends
        self.stop = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-long-faults", daemon=True)

    def start(self) -> LongFaults:
        if self.plan:
            self._thread.start()
        else:
            self._done.set()
        return self

    def busy(self) -> bool:
        """Faults still to start, or one still lasting."""
        return not self._done.is_set() or time.monotonic() < max(self._until.values(), default=0.0)

    def close(self) -> None:
        self.stop.set()
        if self._thread.is_alive():
            self._thread.join(30)

    def summary(self) -> dict[str, Any]:
        by_kind: dict[str, int] = {}
        for record in self.records:
            if record.replica:
                by_kind[record.kind] = by_kind.get(record.kind, 0) + 1
        return {
            "disruptions": [asdict(r) for r in self.records],
            "disruptions_by_kind": dict(sorted(by_kind.items())),
            "disruption_max_s": max((r.duration_s for r in self.records if r.replica), default=0.0),
        }

    # --- the thread -----------------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            for fault in self.plan:
                while self._submitted() < fault.at * self._total or time.monotonic() < self._after(fault):
                    if self.stop.wait(0.2):
                        return
                record = Disruption(fault.kind, fault.resource, fault.target)
                self.records.append(record)
                try:
                    self._one(fault, record)
                except Exception as exc:  # recorded: the report shows it, the storm goes on
                    logger.exception("long fault %s failed", fault.kind)
                    record.note = f"{type(exc).__name__}: {exc}"
        finally:
            self._done.set()

    def _after(self, fault: LongFault) -> float:
        """When `fault` may start: after the lag of its resource; a worker restart after every lag (its
        fresh informers would end them early)."""
        if fault.resource:
            return self._until.get(fault.resource, 0.0)
        return max(self._until.values(), default=0.0)

    def _target(self, which: str) -> Replica | None:
        """The Ready replica (leader) or a running one that is not Ready (standby), waited for."""
        deadline = time.monotonic() + TARGET_WAIT
        while not self.stop.is_set() and time.monotonic() < deadline:
            ready = self.replicas.ready_ones()
            if which == "leader" and len(ready) == 1:
                return ready[0]
            others = [r for r in self.replicas.items if r not in ready and self.replicas.running(r)]
            if which == "standby" and len(ready) == 1 and others:
                return others[0]
            self.stop.wait(0.25)
        return None

    def _one(self, fault: LongFault, record: Disruption) -> None:
        replica = self._target(fault.target)
        if replica is None:
            record.note = f"no {fault.target} to aim at"
            return
        record.replica = replica.name
        record.at_s = round(time.monotonic() - self._started, 2)
        if fault.kind == "worker-restart":
            self._restart_worker(replica, fault.seconds, record)
            return
        verb = "watch" if fault.kind == "watch-delay" else "list"
        agent = agent_pattern(replica)
        rule = self.hooks.add_fault(
            action="delay",
            delay=fault.seconds,
            verb=verb,
            resource=fault.resource,
            user_agent=agent,
            count=RULE_SLACK,
        )
        ending = "dropped" if fault.kind == "watch-delay" else "expired"
        try:
            record.watches_cut = self.hooks.close_watches(fault.resource, agent, ending)
            deadline = time.monotonic() + FIRE_WAIT
            while time.monotonic() < deadline and not self.stop.is_set():
                record.requests_held = self._fired(rule)
                if record.requests_held >= max(1, record.watches_cut):
                    break
                self.stop.wait(0.1)
        finally:
            self.hooks.remove_fault(rule)  # the requests already held stay held
        record.duration_s = fault.seconds if record.requests_held else 0.0
        if not record.requests_held:
            record.note = f"the worker opened no {verb} of {fault.resource} within {FIRE_WAIT:g}s"
        self._until[fault.resource] = time.monotonic() + fault.seconds

    def _fired(self, rule: int) -> int:
        for found in self.hooks.faults()["rules"]:
            if found["id"] == rule:
                return int(found["fired"])
        return 0

    def _restart_worker(self, replica: Replica, down: float, record: Disruption) -> None:
        killed = time.monotonic()
        if not self.replicas.kill_worker(replica):
            record.note = "the replica was not running"
            record.replica = ""
            return
        self.stop.wait(down)
        self.replicas.start_worker(replica)
        record.duration_s = round(time.monotonic() - killed, 2)
        restarted, deadline = time.time(), time.monotonic() + 60.0
        while time.monotonic() < deadline and not self.stop.is_set():
            if self.replicas.heartbeat(replica) > restarted:
                record.back_after_s = round(time.monotonic() - killed, 2)
                return
            self.stop.wait(0.25)
