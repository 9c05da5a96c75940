"""`python -m sim chaos --control-plane real`: the chaos storm on the real control plane.

The real kube-apiserver takes no injected faults, so the disruptions are the ones a real cluster has:
the extender leader SIGKILLed (worker, Gunicorn and its kube-scheduler, as a node failure kills the pod) and
restarted after `--restart-delay`, etcd restarted, kube-apiserver restarted (every client's watch breaks;
resuming from a version the new watch cache does not have is 410 Gone, so informers relist). Meanwhile the
demo's pod mix arrives through the real webhook; creations that hit a restarting API server are retried,
as a controller would. Replicas run in acquire mode behind the Service stand-in (sim.cluster.serviceproxy),
each with its own real kube-scheduler, configured from the chart.

The verdict is the emulator storm's (sim.chaos.check): no pod lost (every pod bound and allocated, or
unschedulable per kube-scheduler's condition), no device oversubscribed, no node lock left, the leader's
ledger equal to a rebuild from the API. Exit status as `python -m sim chaos`.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.chaos.check import ledger_check, locks, outcomes, oversubscription, utilisation
from sim.chaos.ledgerwatch import LedgerWatch
from sim.cluster.build import build
from sim.cluster.harness import create_pod
from sim.cluster.realcluster import kill_replica, ready_replicas, replica_suffix
from sim.cluster.spec import ClusterSpec
from sim.cluster.stack import DemoFailure, Stack
from sim.kit import podutil
from sim.kit.kube import Kube, KubeError, atomic_write_json
from sim.workload.mix import DEMO_LABEL, demo_pods

SELECTOR = f"{DEMO_LABEL}=true"
INFLIGHT_TTL = 60.0
CONTAINER_BACKOFF = 10.0  # kubelet's first back-off before restarting an exited container
VERDICT_ZEROS = (
    "pods_lost",
    "oversubscribed_devices",
    "leaked_locks",
    "cache_rebuild_mismatches",
    "ledger_dropped_rows",
)


@dataclass(frozen=True)
class Replica:
    name: str
    state_dir: Path


class ReadyReplicas:
    """The replicas whose /readyz is 200, with their ledgers: what sim.chaos.ledgerwatch samples."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack

    def ready_ones(self) -> list[Replica]:
        folder = self.stack.workdir
        return [
            Replica(f"hami-scheduler-{i}", folder / f"state{replica_suffix(i)}")
            for i in ready_replicas(self.stack)
        ]


def leader(stack: Stack) -> int | None:
    for index, url in enumerate(stack.replica_urls):
        try:
            if stack.http.request("GET", f"{url}/readyz", retries=False, timeout=2.0).status == 200:
                return index
        except Exception:  # a killed replica refuses the connection
            continue
    return None


def create_retrying(stack: Stack, pod: dict[str, Any], timeout: float = 120.0) -> str:
    """Create through admission, retrying while the API server (or the webhook behind it) is away."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return create_pod(stack, pod)
        except KubeError as exc:
            if exc.status == 409:  # an earlier attempt went through
                return ""
            if exc.status not in (0, 429, 500, 502, 503, 504) or time.monotonic() > deadline:
                raise
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.5)


class Disruptor:
    """Runs the disruptions at their pod counts; replica restarts happen later in timer threads.

    It is also the kubelet of the chart's kube-scheduler containers (restartPolicy Always): kube-scheduler
    exits by design when it cannot renew its Lease within renewDeadline ("Leaderelection lost"), which an
    API server restart longer than that causes; a real kubelet starts the container again, so the storm
    does too (after `CONTAINER_BACKOFF`, kubelet's first crash-loop delay), and records it. Without this a
    slow restart on a loaded machine left no kube-scheduler running and the run waited out its timeout."""

    def __init__(self, stack: Stack, args: argparse.Namespace) -> None:
        self.stack = stack
        self.args = args
        self.log: list[dict[str, Any]] = []
        self.timers: list[threading.Timer] = []
        self.failovers: list[float] = []
        self.down: set[str] = set()  # kube-schedulers of killed replicas: their timer restarts them
        self.restarts: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._kubelet = threading.Thread(target=self._restart_exited, name="chaos-kubelet", daemon=True)
        self._kubelet.start()

    def _restart_exited(self) -> None:
        control = self.stack.control_plane
        assert control is not None
        exited_at: dict[str, float] = {}
        while not self._stop.wait(0.5):
            for name, process in control.processes().items():
                if not name.startswith("scheduler") or process.alive():
                    exited_at.pop(name, None)
                    continue
                with self._lock:  # not while its replica is down: the replica's timer restarts it
                    if name in self.down:
                        exited_at.pop(name, None)
                        continue
                    since = exited_at.setdefault(name, time.monotonic())
                    if time.monotonic() - since < CONTAINER_BACKOFF:
                        continue
                    reason = process.log_tail(1).strip()[-160:]
                    self.restarts.append(
                        {
                            "process": name,
                            "pid": process.pid,
                            "exit_code": process.returncode,
                            "reason": reason,
                        }
                    )
                    control.restart(name)
                    exited_at.pop(name, None)

    def plan(self, pods: int) -> dict[int, str]:
        steps = ["kill-leader"] * self.args.kill_leader + ["restart-etcd", "restart-apiserver"]
        return {max(1, round(pods * (i + 1) / (len(steps) + 1))): s for i, s in enumerate(steps)}

    def run(self, action: str) -> None:
        began = time.monotonic()
        control = self.stack.control_plane
        assert control is not None
        if action == "kill-leader":
            index = leader(self.stack)
            if index is None:
                self.log.append({"action": action, "skipped": "no Ready replica"})
                return
            with self._lock:
                self.down.add(f"scheduler{replica_suffix(index)}")
                kill_replica(self.stack, index)
            timer = threading.Timer(self.args.restart_delay, self._restart_replica, args=(index,))
            timer.start()
            self.timers.append(timer)
            self._await_failover(index, began)
        else:
            control.restart("etcd" if action == "restart-etcd" else "kube-apiserver")
        self.log.append({"action": action, "seconds": round(time.monotonic() - began, 2)})

    def _await_failover(self, killed: int, began: float) -> None:
        deadline = began + 60
        while time.monotonic() < deadline:
            now = leader(self.stack)
            if now is not None and now != killed:
                self.failovers.append(round(time.monotonic() - began, 2))
                return
            time.sleep(0.2)

    def _restart_replica(self, index: int) -> None:
        suffix = replica_suffix(index)
        self.stack.restart(f"worker{suffix}")
        self.stack.restart(f"extender{suffix}")
        self.stack.restart(f"service{suffix}")
        assert self.stack.control_plane is not None
        with self._lock:
            self.stack.control_plane.restart(f"scheduler{suffix}")
            self.down.discard(f"scheduler{suffix}")

    def close(self) -> None:
        for timer in self.timers:
            timer.join()
        self._stop.set()
        self._kubelet.join()


def settled(kube: Kube, expected: int) -> bool:
    pods = kube.list("/api/v1/pods", labelSelector=SELECTOR)[1]
    final = [p for p in pods if podutil.node_name(p) or podutil.unschedulable_reason(p) is not None]
    allocating = [p for p in pods if podutil.node_name(p) and podutil.phase(p) == "Pending"]
    locked = [n for n in kube.list("/api/v1/nodes")[1] if "hami.io/mutex.lock" in podutil.annotations_of(n)]
    return len(final) >= expected and not allocating and not locked


def storm(args: argparse.Namespace, stack: Stack) -> dict[str, Any]:
    values = {
        "replicas": args.replicas,
        "leaderElection": {
            "mode": "acquire",
            "leaseDuration": f"{args.lease_duration}s",
            "renewDeadline": f"{args.renew_deadline}s",
            "retryPeriod": f"{args.retry_period}s",
        },
    }
    spec = ClusterSpec(
        control_plane="real", nodes=args.nodes, seed=args.seed, gpus_per_node=args.gpus_per_node, zones=2,
        allocate_latency=args.allocate_latency, workers=args.workers,
        service_env={"HAMI_INFLIGHT_TTL": f"{INFLIGHT_TTL:g}s"}, chart_values=values,
    )  # fmt: skip
    kube = build(spec, stack)
    kube.retries = 5
    print(f"cluster ready (real): {args.nodes} nodes, {args.replicas} replicas; {args.pods} pods", flush=True)
    pods, denied = demo_pods(args.pods, args.seed), {}
    disruptor = Disruptor(stack, args)
    plan = disruptor.plan(len(pods))
    assert stack.control_plane is not None
    watch_kube = Kube.from_kubeconfig(stack.control_plane.kubeconfig, pool_size=2)
    watch = LedgerWatch(
        ReadyReplicas(stack), lambda: watch_kube.list("/api/v1/pods", labelSelector=SELECTOR)[1]
    ).start()
    began = time.monotonic()
    try:
        for index, demo in enumerate(pods):
            if index in plan:
                disruptor.run(plan[index])
            reason = create_retrying(stack, demo.manifest)
            if reason:
                denied[demo.key] = reason
            time.sleep(1.0 / args.arrival_rate)
        expected = len(pods) - len(denied)
        deadline, stable_since, last = time.monotonic() + args.timeout, time.monotonic(), False
        while time.monotonic() < deadline:
            now = settled(kube, expected)
            if now and not last:
                stable_since = time.monotonic()
            if now and time.monotonic() - stable_since >= args.quiet:
                break
            last = now
            time.sleep(0.5)
    finally:
        disruptor.close()
        watch.stop()
        watch_kube.close()
    return {
        **watch.summary(),
        "expected": [d.key for d in pods if d.key not in denied],
        "pods_webhook_denied": len(denied),
        "disruptions": disruptor.log,
        "leader_kills": sum(1 for d in disruptor.log if d["action"] == "kill-leader" and "skipped" not in d),
        "leader_failovers": len(disruptor.failovers),
        "container_restarts": disruptor.restarts,
        "failover_max_s": max(disruptor.failovers, default=None),
        "storm_seconds": round(time.monotonic() - began, 2),
    }


def verdict(args: argparse.Namespace, stack: Stack, ran: dict[str, Any]) -> dict[str, Any]:
    kube = stack.kube
    assert kube is not None
    pods = kube.list("/api/v1/pods", labelSelector=SELECTOR)[1]
    nodes = kube.list("/api/v1/nodes")[1]
    report: dict[str, Any] = outcomes(pods, ran.pop("expected"))
    over = oversubscription(pods, nodes)
    report.update({"oversubscribed_devices": len(over), "oversubscribed": over, **locks(nodes, pods)})
    report.update(utilisation(pods, nodes))
    index = leader(stack)
    if index is None:
        raise DemoFailure("no Ready replica at the end: nobody's ledger to check")
    deadline = time.monotonic() + args.ledger_wait
    while True:
        ours = kube.list("/api/v1/pods", fieldSelector="spec.schedulerName=hami-scheduler")[1]
        state = stack.workdir / f"state{replica_suffix(index)}"
        ledger = ledger_check(state, ours, "hami-scheduler", INFLIGHT_TTL, time.time())
        if not ledger["cache_rebuild_mismatches"] and not ledger["ledger_orphan_rows"]:
            break
        if time.monotonic() > deadline:
            break
        time.sleep(1.0)
    report.update({"ledger_of": f"hami-scheduler-{index}", **ledger, **ran})
    assert stack.control_plane is not None
    report.update({"control_plane": "real", "versions": stack.control_plane.versions()})
    return report


def run(args: argparse.Namespace) -> int:
    began = time.time()
    args.nodes = args.nodes or max(3, args.pods // 20)
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="hami-chaos-real-"))
    workdir.mkdir(parents=True, exist_ok=True)
    stack = Stack(workdir)
    failure, code, report = "", 0, None
    try:
        report = verdict(args, stack, storm(args, stack))
    except (DemoFailure, KubeError, OSError, RuntimeError) as exc:
        failure, code = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", 1
    except KeyboardInterrupt:
        failure, code = "interrupted", 130
    finally:
        stack.stop()
    if report is not None:
        violations = [f"{k}={report[k]}" for k in VERDICT_ZEROS if report.get(k)]
        if report.get("leader_failovers", 0) < args.kill_leader:
            violations.append(f"leader_failovers={report.get('leader_failovers')} < {args.kill_leader}")
        report.update(
            {
                "passed": not violations,
                "violations": violations,
                "wall_seconds": round(time.time() - began, 2),
                "seed": args.seed,
                "child_pids": stack.pids,
                "children_left": stack.survivors(),
                "exit": failure or "completed",
                "workdir": str(workdir),
            }
        )
        if args.report:
            atomic_write_json(args.report, report)
        keys = (
            *("pods_total", "pods_bound", "pods_unschedulable", "pods_lost", "oversubscribed_devices"),
            *("leaked_locks", "cache_rebuild_mismatches", "leader_failovers", "wall_seconds"),
        )
        print("\n" + "  ".join(f"{k}={report.get(k)}" for k in keys))
        if violations and not failure:
            failure, code = "invariants violated: " + ", ".join(violations), 3
    if failure:
        print(f"chaos failed: {failure} (logs in {workdir})", file=sys.stderr)
    elif not args.keep and not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return code
