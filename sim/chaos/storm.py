"""The chaos storm's actions on the running cluster: pods arriving, pods deleted and recreated under the same
name, and the leader's containers killed.

- Arrivals (the caller's thread): each pod of the plan, at its seeded arrival time, goes through
  `/webhook` of its seeded replica (the next one when that replica does not answer: the webhook Service
  selects every live replica) and is created with the patch applied.
- Recreations (a small thread pool): wait until the pod reached its stage — `pending` (at once after
  its creation, usually before it is filtered), `assumed` (filtered: `hami.io/vgpu-node` written, not
  bound; a 3 s delay rule on this pod's binding holds the bind in flight so the window exists), `bound`
  (running on its node) — then delete it, wait until the name is free, and create it again through the
  webhook: a new UID under the old name.
- Kills (one thread, one at a time): when the number of submitted pods reaches a kill point and every
  other replica stands by (its worker's heartbeat is fresh), SIGKILL the containers of the Ready replica,
  and time the failover: from the kill until another replica answers `/readyz` 200. The victim restarts
  once that failover was seen and at least `restart_delay` seconds after the kill: restarted earlier, on
  a loaded machine it could take its own Lease back before the standby was Ready, and no failover would
  have been exercised (the storm then owes none, but a run that means to test one would not).
- Long faults (sim.chaos.stormfaults, one thread): watches of the leader's or the standby's worker held up,
  forced relists, worker restarts, at their points of the submissions.
- Two-leader faults (sim.chaos.twoleaders, one thread): the leader's worker stalled and its clock stepped
  back, so that it keeps deciding next to the standby that took its Lease, at their points of the submissions.

Every read the storm makes goes through the emulator's fault-free hooks (`/_sim/store`); its creates and
deletes use verbs the fault rules leave alone.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

import urllib3

from sim.chaos.plan import Plan, Recreation
from sim.chaos.stormfaults import LongFaults
from sim.chaos.twoleaders import TwoLeaderPlan, TwoLeaders
from sim.cluster.harness import admit
from sim.cluster.replicas import Replica, Replicas
from sim.cluster.stack import DemoFailure
from sim.emulator.testing import EmulatorHandle
from sim.kit import podutil
from sim.kit.kube import Kube, KubeError, pod_path, pool_manager
from sim.workload.mix import DemoPod

logger = logging.getLogger(__name__)
ASSIGNED_NODE = "hami.io/vgpu-node"
HOLD_BINDING = 3.0  # seconds the binding of an `assumed` target is held in flight


@dataclass
class KillRecord:
    after_pods: int
    victim: str = ""
    at_s: float = 0.0  # since the storm started
    failover_s: float | None = None  # until another replica was Ready (None: it never happened)
    new_leader: str = ""
    restarted_after_s: float = 0.0


@dataclass
class RecreationRecord:
    key: str
    stage: str
    seen: str = ""  # the stage the pod was in when deleted ("" = never deleted)
    old_uid: str = ""
    new_uid: str = ""
    note: str = ""


@dataclass
class StormLog:
    started: float = field(default_factory=time.monotonic)
    submitted: int = 0
    denied: dict[str, str] = field(default_factory=dict)
    admissions_retried: int = 0
    kills: list[KillRecord] = field(default_factory=list)
    recreations: list[RecreationRecord] = field(default_factory=list)


def stage_of(pod: dict[str, Any] | None) -> str:
    if pod is None:
        return "gone"
    if podutil.node_name(pod):
        return "bound"
    if podutil.REJECTED in podutil.annotations_of(pod):
        return "rejected"
    return "assumed" if ASSIGNED_NODE in podutil.annotations_of(pod) else "pending"


class Storm:
    def __init__(
        self,
        plan: Plan,
        replicas: Replicas,
        kube: Kube,
        hooks: EmulatorHandle,
        *,
        restart_delay: float,
        failover_timeout: float = 90.0,
        two_leaders: TwoLeaderPlan | None = None,
    ) -> None:
        self.plan = plan
        self.replicas = replicas
        self.kube = kube
        self.hooks = hooks
        self.restart_delay = restart_delay
        self.failover_timeout = failover_timeout
        self.log = StormLog()
        self.stop = threading.Event()
        self.http = pool_manager(8, replicas.pki.server_ca_pem, timeout=30.0)  # the webhook's callers
        self._pods = {p.key: p for p in plan.pods}
        self._recreate = {r.key: r for r in plan.recreations}
        self._pool = ThreadPoolExecutor(4, thread_name_prefix="chaos-recreate")
        self._tasks: list[Future[None]] = []
        self._kill_due = threading.Semaphore(0)
        self._killer = threading.Thread(target=self._kill_loop, name="chaos-killer", daemon=True)
        self.long_faults = LongFaults(
            plan.long_faults, replicas, hooks, lambda: self.log.submitted, len(plan.pods), self.log.started
        )
        self.two_leaders = TwoLeaders(
            two_leaders or TwoLeaderPlan(plan.two_leaders),
            replicas,
            lambda: self.log.submitted / len(plan.pods),
            self.log.started,
        )
        self.error: str = ""  # a background failure that ends the run

    # --- arrivals -------------------------------------------------------------------------------------------

    def run(self) -> None:
        """Submit every pod of the plan (the caller's thread); kills and recreations run meanwhile."""
        self._killer.start()
        self.long_faults.start()
        self.two_leaders.start()
        kills = list(self.plan.kills)
        due = time.monotonic()
        for index, pod in enumerate(self.plan.pods):
            due += self.plan.gaps[index]  # the seeded arrival times; late submissions go back to back
            if self.stop.wait(max(0.0, due - time.monotonic())) or self.error:
                break
            recreation = self._recreate.get(pod.key)
            if recreation is not None and recreation.stage == "assumed":
                self._hold_binding(pod)
            if self._submit(pod, self.plan.admit_via[index]) and recreation is not None:
                self._tasks.append(self._pool.submit(self._recreation, recreation))
            self.log.submitted = index + 1
            while kills and self.log.submitted >= kills[0]:
                kills.pop(0)
                self._kill_due.release()

    def busy(self) -> bool:
        """Kills, recreations or long faults still under way."""
        return (
            len(self.log.kills) < len(self.plan.kills)
            or not all(t.done() for t in self._tasks)
            or self.long_faults.busy()
            or self.two_leaders.busy()
        )

    def close(self) -> None:
        self.stop.set()
        self.long_faults.close()
        self.two_leaders.close()
        self._kill_due.release()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._killer.join(self.failover_timeout)
        self.http.clear()

    def _hold_binding(self, pod: DemoPod) -> None:
        meta = pod.manifest["metadata"]
        self.hooks.add_fault(
            action="delay",
            delay=HOLD_BINDING,
            verb="create",
            resource="pods",
            subresource="binding",
            namespace=meta["namespace"],
            name=meta["name"],
            count=1,
        )

    def _admit(self, pod: DemoPod, first: int) -> dict[str, Any] | None:
        """The pod after the webhook (None: denied); tries every replica in turn until one answers."""
        items = self.replicas.items
        deadline = time.monotonic() + 60.0
        attempt = 0
        while not self.stop.is_set():
            replica = items[(first + attempt) % len(items)]
            try:
                manifest, reason = admit(self.http, replica.url, pod.manifest)
            except (urllib3.exceptions.HTTPError, DemoFailure):
                attempt += 1
                self.log.admissions_retried += 1
                if time.monotonic() > deadline:
                    raise DemoFailure(f"no replica answered the webhook for {pod.key} within 60s") from None
                if attempt % len(items) == 0:
                    self.stop.wait(0.5)
                continue
            if manifest is None:
                self.log.denied[pod.key] = reason
            return manifest
        return None

    def _submit(self, pod: DemoPod, first: int) -> bool:
        manifest = self._admit(pod, first)
        if manifest is None:
            return False
        self.kube.create(pod_path(manifest["metadata"]["namespace"]), manifest)
        return True

    # --- recreations ----------------------------------------------------------------------------------------

    def _read(self, key: str) -> dict[str, Any] | None:
        namespace, _, name = key.partition("/")
        return self.hooks.get("pods", name, namespace)

    def _recreation(self, plan: Recreation) -> None:
        record = RecreationRecord(plan.key, plan.stage)
        self.log.recreations.append(record)
        try:
            self._recreate_one(plan, record)
        except Exception as exc:  # recorded: the report shows it, the run goes on
            logger.exception("recreating %s failed", plan.key)
            record.note = f"{type(exc).__name__}: {exc}"

    def _recreate_one(self, plan: Recreation, record: RecreationRecord) -> None:
        deadline = time.monotonic() + 120.0
        while True:
            pod = self._read(plan.key)
            stage = stage_of(pod)
            if pod is not None and (plan.stage == "pending" or stage in (plan.stage, "bound", "rejected")):
                break
            if self.stop.is_set() or time.monotonic() > deadline:
                record.note = f"never reached {plan.stage} (last seen: {stage})"
                return
            self.stop.wait(0.1)
        if stage == "bound" and plan.stage == "bound":
            self._wait_running(plan.key)
        record.seen, record.old_uid = stage, podutil.uid(pod)
        namespace, name = podutil.namespace(pod), podutil.name(pod)
        try:
            self.kube.delete(pod_path(namespace, name))
        except KubeError as exc:
            if exc.status != 404:
                raise
        while (current := self._read(plan.key)) is not None and podutil.uid(current) == record.old_uid:
            if self.stop.wait(0.1):
                return
        if self._submit(self._pods[plan.key], 0):
            record.new_uid = podutil.uid(self._read(plan.key) or {})

    def _wait_running(self, key: str) -> None:
        """A bound pod is deleted once it runs (or after 30 s): deleting a running pod is the common case."""
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline and not self.stop.is_set():
            pod = self._read(key)
            if pod is None or podutil.phase(pod) != "Pending":
                return
            self.stop.wait(0.1)

    # --- kills ----------------------------------------------------------------------------------------------

    def _kill_loop(self) -> None:
        for after in self.plan.kills:
            self._kill_due.acquire()
            if self.stop.is_set():
                return
            record = KillRecord(after)
            self.log.kills.append(record)
            try:
                self._kill(record)
            except Exception as exc:
                logger.exception("killing the leader failed")
                self.error = f"killing the leader failed: {type(exc).__name__}: {exc}"
                return

    def _leader(self, deadline: float) -> Replica | None:
        """The one Ready replica, once every other one stands by to take over (a kill while the others
        are still restarting could not fail over)."""
        while time.monotonic() < deadline and not self.stop.is_set():
            ready = self.replicas.ready_ones()
            others = [r for r in self.replicas.items if r not in ready]
            if len(ready) == 1 and all(self.replicas.standing_by(r) for r in others):
                return ready[0]
            self.stop.wait(0.1)
        return None

    def _kill(self, record: KillRecord) -> None:
        victim = self._leader(time.monotonic() + self.failover_timeout)
        if victim is None:
            if not self.stop.is_set():
                self.error = f"no single Ready replica to kill within {self.failover_timeout:g}s"
            return
        killed = time.monotonic()
        self.replicas.kill(victim)
        record.victim, record.at_s = victim.name, round(killed - self.log.started, 2)
        restart_at = killed + self.restart_delay
        alone = len(self.replicas.items) == 1  # nobody to fail over to: the victim's own restart is it
        while not self.stop.is_set():
            now = time.monotonic()
            if record.failover_s is None:
                ready = [
                    r
                    for r in self.replicas.ready_ones()
                    if r is not victim or (alone and record.restarted_after_s)
                ]
                if ready:
                    record.failover_s, record.new_leader = round(now - killed, 2), ready[0].name
            seen = record.failover_s is not None or alone
            if not self.replicas.running(victim) and now >= restart_at and seen:
                self.replicas.start(victim)
                record.restarted_after_s = round(now - killed, 2)
            if record.failover_s is not None and self.replicas.running(victim):
                return
            if now - killed > self.failover_timeout:
                self.error = (
                    f"no replica became Ready within {self.failover_timeout:g}s of killing the leader"
                )
                if not self.replicas.running(victim):
                    self.replicas.start(victim)
                return
            self.stop.wait(0.1)

    def summary(self) -> dict[str, Any]:
        kills = self.log.kills
        failovers = [k for k in kills if k.failover_s is not None and k.new_leader != k.victim]
        times = [k.failover_s for k in kills if k.failover_s is not None]
        by_seen: dict[str, int] = {}
        for rec in self.log.recreations:
            if rec.new_uid:
                by_seen[rec.seen] = by_seen.get(rec.seen, 0) + 1
        return {
            "pods_submitted": self.log.submitted,
            "pods_webhook_denied": len(self.log.denied),
            "webhook_denied": dict(self.log.denied),
            "webhook_retries": self.log.admissions_retried,
            "leader_kills": len(kills),
            "leader_failovers": len(failovers),
            "failover_max_s": max(times) if times else None,
            "kills": [asdict(k) for k in kills],
            "pods_recreated": sum(by_seen.values()),
            "recreated_at_stage": dict(sorted(by_seen.items())),
            "recreations": [asdict(r) for r in self.log.recreations],
            **self.long_faults.summary(),
            **self.two_leaders.summary(),
        }
