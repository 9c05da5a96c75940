"""The chaos storm's verdict at its end (sim.chaos.run): what it reads, and which conditions it must meet.

`verdict` reads the storm's pods and the nodes through the emulator's fault-free hooks and the Ready
replica's ledger file, and judges them with sim.chaos.check's rules: every pod bound and allocated or
cleanly unschedulable, no device oversubscribed by the sums or by its vendor's sharing rules
(sim.workload.devicerules), no node lock left, the leader's ledger equal to a rebuild from the API with the
vendors the replicas run with (`--vendors`: the same device-config). `passed` lists the violated conditions:
the zeros (VERDICT_ZEROS) and what the storm owes to count as having run — faults injected, forged calls sent,
a failover per leader kill, two Ready leaders per two-leader fault.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from typing import Any

from app.devices import build_vendors
from sim.chaos.check import ledger_check, locks, outcomes, oversubscription, utilisation
from sim.cluster.replicas import Replicas
from sim.cluster.stack import DemoFailure, device_config
from sim.emulator.testing import EmulatorHandle
from sim.kit import podutil
from sim.workload.mix import DEMO_LABEL
from sim.workload.report import vendors_of

SELECTOR = f"{DEMO_LABEL}=true"
SCHEDULER = "hami-scheduler"
INFLIGHT_TTL = 60.0
VERDICT_ZEROS = (
    "pods_lost",
    "oversubscribed_devices",
    "oversubscribed_max_during_run",
    "leaked_locks",
    "cache_rebuild_mismatches",
    "ledger_dropped_rows",
    "forged_accepted",
)


def verdict(
    args: argparse.Namespace, expected: list[str], replicas: Replicas, hooks: EmulatorHandle
) -> dict[str, Any]:
    pods = hooks.list("pods", label_selector=SELECTOR)
    nodes = hooks.list("nodes")
    report: dict[str, Any] = outcomes(pods, expected)
    over = oversubscription(pods, nodes)
    report.update({"oversubscribed_devices": len(over), "oversubscribed": over, **locks(nodes, pods)})
    report.update(utilisation(pods, nodes))
    by_vendor = Counter(key for p in pods if podutil.node_name(p) for key in vendors_of(p))
    report["pods_bound_by_vendor"] = dict(sorted(by_vendor.items()))
    vendors = build_vendors(*device_config(args.vendors))
    leader = next(iter(replicas.ready_ones()), None)
    if leader is None:
        raise DemoFailure("no Ready replica at the end: nobody's ledger to check")
    deadline = time.monotonic() + args.ledger_wait
    while True:
        ours = hooks.list("pods", field_selector=f"spec.schedulerName={SCHEDULER}")
        ledger = ledger_check(leader.state_dir, ours, SCHEDULER, INFLIGHT_TTL, time.time(), vendors)
        clean = not ledger["cache_rebuild_mismatches"] and not ledger["ledger_orphan_rows"]
        if clean or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    report.update({"ledger_of": leader.name, **ledger})
    return report


def passed(report: dict[str, Any], args: argparse.Namespace) -> list[str]:
    """The violated acceptance conditions (empty: the storm passed)."""
    failures = [f"{key}={report[key]}" for key in VERDICT_ZEROS if report.get(key)]
    if args.fault_rate > 0 and not report.get("faults_injected"):
        failures.append("faults_injected=0")
    if args.forgeries > 0 and not report.get("forged_calls"):
        failures.append("forged_calls=0")
    # the victim restarts only once another replica took over (sim.chaos.storm): each kill owes a failover
    owed = args.kill_leader if args.replicas > 1 else 0
    if report.get("leader_failovers", 0) < owed:
        failures.append(f"leader_failovers={report.get('leader_failovers')} < {owed}")
    if report.get("two_leader_windows", 0) < args.two_leaders:  # each fault owes two Ready leaders
        failures.append(f"two_leader_windows={report.get('two_leader_windows', 0)} < {args.two_leaders}")
    if report.get("ledger_orphan_rows"):
        failures.append(f"ledger_orphan_rows={len(report['ledger_orphan_rows'])}")
    return failures
