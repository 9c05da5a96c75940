"""`python -m sim chaos`: the chaos storm — load, API faults, process crashes and leader loss at once, and a
verdict from the API alone: no pod lost, no GPU oversubscribed, no node left locked, the leader's cache
equal to a rebuild from the API.

    python -m sim chaos --seed S --pods N --workers W --replicas R --fault-rate F --kill-leader K
                        --long-faults L --lag SECONDS [--vendors KINDS] [--two-leaders T] --report FILE

Runs, each a child process stopped by PID at the end (also on failure or Ctrl-C): the API emulator (seeded
faults), the simulated GPU nodes, R replicas of the extender (registration worker + Gunicorn with W
workers, acquire-mode election on a 4 s Lease, each with its own state dir) and the simulated kube-scheduler
reaching them through a Service (the Ready replica). Then: fault rules at rate F on, N pods
(sim.workload.mix's mix, about 1.3x what fits) arriving over time through the webhook, some deleted and
recreated under the same name, the leader SIGKILLed K times and restarted, L rounds of long faults on the
workers (watches held up and relists held `--lag` seconds, worker restarts: sim.chaos.stormfaults), T times
two leaders at once (the leader's worker stalled and its clock stepped back while the standby takes over:
sim.chaos.twoleaders) (sim.chaos.storm); wait until every pod is bound or rejected; faults off; a quiet
period; the verdict (sim.chaos.check, each vendor's devices by its rules) and the report (keys in
docs/chaos.md). `--vendors` builds a mixed cluster as the demo does (sim.nodes.vendors: node kinds cycled over
the nodes, the other vendors' pods in the mix, their device-config on the replicas).

Exit status: 0 when the verdict passed, 3 when an invariant was violated (the report says which), 1 when
the infrastructure failed (one line on stderr; the work dir is kept), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import math
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import Any

import orjson
import urllib3

from sim.chaos.forger import Forger
from sim.chaos.ledgerwatch import LedgerWatch
from sim.chaos.observe import Journal, Observer
from sim.chaos.options import SUMMARY_KEYS, add_arguments
from sim.chaos.plan import Plan, make_plan
from sim.chaos.storm import Storm
from sim.chaos.twoleaders import TwoLeaderPlan
from sim.chaos.verdict import INFLIGHT_TTL, SELECTOR, passed, verdict
from sim.cluster.actors import stats_of
from sim.cluster.pki import ChartPki
from sim.cluster.replicas import Election, Replicas
from sim.cluster.spec import ClusterSpec
from sim.cluster.stack import PY, DemoFailure, Stack, flags, start_nodes, vendor_env
from sim.emulator.testing import EmulatorHandle, HookError
from sim.kit import podutil
from sim.kit.command import Command
from sim.kit.kube import Kube, KubeError, atomic_write_json
from sim.nodes.vendors import parse_vendors

NODELOCK_EXPIRE = "30s"  # HAMI_NODELOCK_EXPIRE (default 5 min): shorter than the storm's long faults
NODE_ZONES = 3  # `sim nodes`' default: the storm's seeded cluster
PODS_PER_NODE = 28  # of the mix per 8-GPU node: about 1.3 x what fits at once (docs/chaos.md)


class Interrupted(Exception):
    """SIGTERM or SIGINT."""


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signal.Signals(signum).name)


def check(stack: Stack) -> None:
    """Stack.check over a copy: the storm's killer thread adds and removes processes meanwhile."""
    for name, process in list(stack.processes.items()):
        if not process.alive():
            tail = process.log_tail(5).replace("\n", " | ")
            raise DemoFailure(f"{name} (pid {process.pid}) exited with {process.returncode}: {tail}")


def wait_until(what: str, predicate: Any, timeout: float, stack: Stack, step: float = 0.25) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        check(stack)
        if time.monotonic() > deadline:
            raise DemoFailure(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(step)


def start_storm_cluster(args: argparse.Namespace, stack: Stack, replicas: Replicas) -> EmulatorHandle:
    """Emulator, nodes, every replica (until one is Ready with all nodes), then the scheduler. Not
    `sim.cluster.build.build`: the storm's replicas are live `Replicas` it kills, restarts, stalls and steps
    the clocks of, behind the simulated scheduler's list of extenders, on an emulator with seeded faults
    (docs/harness.md "One way to start a cluster"); the nodes are the builder's (`start_nodes`)."""
    emulator = stack.start(
        "apiserver",
        [PY, "-m", "sim.emulator", *flags(port=0, kubeconfig=stack.kubeconfig, fault_seed=args.seed)],
    )
    wait_until("the API emulator's kubeconfig", stack.kubeconfig.exists, 30, stack, 0.05)
    kube = stack.kube = Kube.from_kubeconfig(stack.kubeconfig, pool_size=8, retries=5)
    hooks = EmulatorHandle(kube.config.server, stack.kubeconfig, None)
    wait_until("the API emulator", lambda: emulator.alive() and _answers(hooks), 30, stack, 0.1)
    nodes = ClusterSpec(
        nodes=args.nodes,
        seed=args.seed,
        gpus_per_node=args.gpus_per_node,
        zones=NODE_ZONES,
        allocate_latency=args.allocate_latency,
        vendors=args.vendors,
    )
    start_nodes(stack, nodes, stack.kubeconfig)
    for replica in replicas.items:
        replicas.start(replica)

    def one_ready() -> bool:
        ready = replicas.ready_ones()
        if len(ready) != 1:
            return False
        answer = replicas.scheduler_http.request("GET", f"{ready[0].extender_url}/debug/state")
        return bool(orjson.loads(answer.data).get("nodes", 0) >= args.nodes)

    wait_until("one Ready replica with every node registered", one_ready, 120, stack)
    pki = replicas.pki
    scheduler_flags = flags(
        kubeconfig=stack.kubeconfig,
        extender=",".join(replicas.extender_urls),
        ca_file=pki.server_ca,
        cert_file=pki.client[0],
        key_file=pki.client[1],
        stats=stack.workdir / "scheduler-stats.json",
        unschedulable_timeout=args.unschedulable_timeout,
        max_unschedulable=args.max_unschedulable,
        max_errors=args.max_errors,
    )
    stack.start("scheduler", [PY, "-m", "sim", "scheduler", *scheduler_flags])
    return hooks


def _answers(hooks: EmulatorHandle) -> bool:
    try:
        hooks.stats()
    except (OSError, HookError):
        return False
    return True


def final(pod: dict[str, Any]) -> bool:
    return bool(podutil.node_name(pod)) or podutil.REJECTED in podutil.annotations_of(pod)


def quiet(hooks: EmulatorHandle) -> bool:
    """No bound pod waits for Allocate and no node is locked."""
    pods = hooks.list("pods", label_selector=SELECTOR)
    if any(podutil.node_name(p) and podutil.phase(p) == "Pending" for p in pods):
        return False
    return not any("hami.io/mutex.lock" in podutil.annotations_of(n) for n in hooks.list("nodes"))


def storm(args: argparse.Namespace, plan: Plan, stack: Stack, replicas: Replicas) -> dict[str, Any]:
    hooks = start_storm_cluster(args, stack, replicas)
    assert stack.kube is not None
    print(
        f"cluster ready: {args.nodes} nodes, {args.replicas} replicas; storm of {args.pods} pods", flush=True
    )
    for rule in plan.faults:
        hooks.add_fault(**rule)
    run = Storm(
        plan,
        replicas,
        stack.kube,
        hooks,
        restart_delay=args.restart_delay,
        two_leaders=TwoLeaderPlan(plan.two_leaders, args.two_leader_stall, args.clock_step),
    )
    observer = Observer(hooks, replicas, SELECTOR).start()
    ledger_watch = LedgerWatch(replicas, lambda: hooks.list("pods", label_selector=SELECTOR)).start()
    forger = Forger(
        replicas, hooks, stack.kube, SELECTOR, seed=args.seed, count=args.forgeries, rate=args.forge_rate
    ).start()
    journal_kube = Kube.from_kubeconfig(stack.kubeconfig, pool_size=4, retries=5)
    journal = Journal(journal_kube, stack.workdir / "journal.jsonl", SELECTOR).start()
    began = time.monotonic()
    try:
        run.run()
        deadline, last_print = time.monotonic() + args.timeout, 0.0
        while True:
            check(stack)
            if run.error:
                raise DemoFailure(run.error)
            pods = hooks.list("pods", label_selector=SELECTOR)
            done = sum(1 for p in pods if final(p))
            if time.monotonic() - last_print > 5:
                print(f"  t={time.monotonic() - began:5.0f}s  final {done}/{len(pods)}", flush=True)
                last_print = time.monotonic()
            if (done >= len(pods) and not run.busy()) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    finally:
        forger.close()
        run.close()
        observer.stop()
        ledger_watch.stop()
        journal.stop()
        journal_kube.close()
    storm_seconds = time.monotonic() - began
    atomic_write_json(stack.workdir / "api-requests.json", hooks.requests())  # the last 10,000, for debugging
    fault_report = hooks.faults()
    hooks.clear_faults()
    time.sleep(args.quiet)
    settle_deadline = time.monotonic() + args.settle
    while not quiet(hooks) and time.monotonic() < settle_deadline:
        check(stack)
        time.sleep(0.5)
    return {
        "hooks": hooks,
        "storm": {**run.summary(), **forger.summary()},
        "observer": {**observer.summary(), **ledger_watch.summary()},
        "faults": fault_report,
        "storm_seconds": round(storm_seconds, 2),
    }


def build_report(args: argparse.Namespace, plan: Plan, replicas: Replicas, stack: Stack) -> dict[str, Any]:
    ran = storm(args, plan, stack, replicas)
    expected = [k for k in plan.keys if k not in ran["storm"]["webhook_denied"]]
    report = verdict(args, expected, replicas, ran["hooks"])
    stack.stop("scheduler", "nodes")
    faults = ran["faults"]
    report.update(
        {
            "faults_injected": faults["faults_injected"],
            "faults_by_action": faults["by_action"],
            "faults_by_rule": [fired(rule) for rule in faults["rules"] if rule["fired"]],
            **ran["storm"],
            **ran["observer"],
            "storm_seconds": ran["storm_seconds"],
            "scheduler": stats_of(stack.workdir / "scheduler-stats.json"),
            "device_plugin": stats_of(stack.workdir / "nodes-stats.json"),
        }
    )
    return report


def fired(rule: dict[str, Any]) -> str:
    """One fault rule as a line: what it matches, what it does, how often it fired."""
    action = rule["action"]
    what = {"error": f"error {rule['status']}", "delay": f"delay {rule['delay']:g}s"}.get(action, action)
    if action == "drop_watch":
        what += f" after {rule['after_events']} events" + (" (graceful)" if rule["graceful"] else "")
    keys = ("verb", "resource", "subresource", "namespace", "name")
    match = " ".join(f"{k}={rule[k]}" for k in keys if rule.get(k))
    return f"{match}: {what} p={rule['probability']:g} fired {rule['fired']}"


def run(args: argparse.Namespace) -> int:
    if args.control_plane == "real":
        if args.two_leaders or args.vendors != "nvidia":  # never silently ignored
            print(
                "sim chaos: --two-leaders and --vendors need the emulator (--control-plane emulator)",
                file=sys.stderr,
            )
            return 2
        from sim.chaos.real import run as run_real

        return run_real(args)
    began = time.time()
    if args.nodes is None:
        args.nodes = max(4, math.ceil(args.pods / PODS_PER_NODE))
    try:
        kinds = parse_vendors(args.vendors)
        plan = make_plan(
            args.seed,
            args.pods,
            kills=args.kill_leader,
            replicas=args.replicas,
            arrival_rate=args.arrival_rate,
            recreate=args.recreate if args.recreate is not None else max(3, round(args.pods * 0.02)),
            fault_rate=args.fault_rate,
            long_faults=args.long_faults,
            lag=args.lag,
            vendors=() if all(kind == ("nvidia",) for kind in kinds) else kinds,
            two_leaders=args.two_leaders,
        )
    except ValueError as exc:
        print(f"sim chaos: {exc}", file=sys.stderr)
        return 2
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="hami-chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    stack = Stack(workdir)
    election = Election(args.lease_duration, args.renew_deadline, args.retry_period)
    env = {
        "HAMI_INFLIGHT_TTL": f"{INFLIGHT_TTL:g}s",
        "HAMI_NODELOCK_EXPIRE": NODELOCK_EXPIRE,
        **vendor_env(args.vendors, workdir),
    }
    pki = ChartPki.create(workdir / "pki")
    replicas = Replicas(stack, args.replicas, args.workers, election, env, pki, clocks=args.two_leaders > 0)
    previous = {s: signal.signal(s, _interrupt) for s in (signal.SIGTERM, signal.SIGINT)}
    failure, code, report = "", 0, None
    try:
        print(f"starting the cluster in {workdir} ...", flush=True)
        report = build_report(args, plan, replicas, stack)
    except DemoFailure as exc:
        failure, code = str(exc), 1
    except (KubeError, HookError, urllib3.exceptions.HTTPError, OSError, TimeoutError, RuntimeError) as exc:
        failure, code = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", 1
    except Interrupted as exc:
        failure, code = f"interrupted ({exc})", 130
    finally:
        for sig in previous:  # a second Ctrl-C must not abort the clean-up
            signal.signal(sig, signal.SIG_IGN)
        stack.stop("scheduler", "nodes")
        stack.stop(*replicas.names())
        stack.stop()
        replicas.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if report is not None:
        violations = passed(report, args)
        report.update(
            {
                "passed": not violations,
                "violations": violations,
                "wall_seconds": round(time.time() - began, 2),
                "seed": args.seed,
                "settings": {
                    k: getattr(args, k)
                    for k in (
                        "pods",
                        "workers",
                        "replicas",
                        "fault_rate",
                        "kill_leader",
                        "nodes",
                        "arrival_rate",
                        "long_faults",
                        "lag",
                        "forgeries",
                        "vendors",
                        "two_leaders",
                    )
                },
                "child_pids": stack.pids,
                "children_left": stack.survivors(),
                "exit": failure or "completed",
                "workdir": str(workdir),
            }
        )
        if args.report:
            atomic_write_json(args.report, report)
        print("\n" + "  ".join(f"{k}={report.get(k)}" for k in SUMMARY_KEYS))
        if violations and not failure:
            failure, code = "invariants violated: " + ", ".join(violations), 3
    if failure:
        print(f"chaos failed: {failure} (logs in {workdir})", file=sys.stderr)
    elif not args.keep and not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return code


COMMAND = Command(add_arguments, run)
