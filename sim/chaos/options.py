"""The chaos storm's command line (`python -m sim chaos --help`) and the report keys it prints as its summary
line: the knobs of sim/chaos/run.py, kept apart from the run itself.
"""

from __future__ import annotations

import argparse
from pathlib import Path

SUMMARY_KEYS = (
    "pods_total",
    "pods_bound",
    "pods_unschedulable",
    "pods_lost",
    "oversubscribed_devices",
    "leaked_locks",
    "cache_rebuild_mismatches",
    "ledger_dropped_rows",
    "faults_injected",
    "leader_failovers",
    "failover_max_s",
    "disruptions_by_kind",
    "forged_calls",
    "forged_accepted",
    "two_leader_windows",
    "two_leader_old_decisions",
    "pods_bound_by_vendor",
    "wall_seconds",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=4, help="Gunicorn workers per replica")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--fault-rate", type=float, default=0.1, help="per request, on every path we use")
    parser.add_argument("--kill-leader", type=int, default=2, help="how often the leader is SIGKILLed")
    parser.add_argument(
        "--long-faults",
        type=int,
        default=1,
        help="rounds of long faults on the workers (sim.chaos.stormfaults)",
    )
    parser.add_argument(
        "--lag", type=float, default=75.0, help="seconds a long fault holds a worker's watch or relist"
    )
    parser.add_argument(
        "--forgeries", type=int, default=300, help="forged /filter and /bind calls (sim.chaos.forger)"
    )
    parser.add_argument("--forge-rate", type=float, default=3.0, help="forged calls per second")
    parser.add_argument("--vendors", default="nvidia", help="node kinds over the nodes, as the demo's")
    parser.add_argument("--two-leaders", type=int, default=0, help="two-leader faults (sim.chaos.twoleaders)")
    parser.add_argument("--two-leader-stall", type=float, default=20.0, help="seconds the worker stalls")
    parser.add_argument("--clock-step", type=float, default=20.0, help="seconds its clock steps back")
    parser.add_argument("--report", type=Path, default=None, help="write the JSON report here")
    parser.add_argument("--nodes", type=int, default=None, help="GPU nodes (default: pods / 28)")
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--arrival-rate", type=float, default=8.0, help="pods per second (Poisson)")
    parser.add_argument("--allocate-latency", type=float, default=0.05, help="seconds per Allocate call")
    parser.add_argument("--recreate", type=int, default=None, help="pods deleted and recreated (2 %%)")
    parser.add_argument(
        "--restart-delay", type=float, default=6.0, help="seconds until a killed replica restarts"
    )
    parser.add_argument("--lease-duration", type=int, default=4)
    parser.add_argument("--renew-deadline", type=int, default=3)
    parser.add_argument("--retry-period", type=int, default=1)
    parser.add_argument(
        "--unschedulable-timeout", type=float, default=5.0, help="see sim.kubescheduler.scheduler"
    )
    parser.add_argument("--max-unschedulable", type=int, default=5, help="see sim.kubescheduler.scheduler")
    parser.add_argument("--max-errors", type=int, default=60, help="errors before the scheduler gives up")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds for every pod to be final")
    parser.add_argument("--quiet", type=float, default=3.0, help="seconds to wait after the faults stop")
    parser.add_argument("--settle", type=float, default=60.0, help="then at most this long for Allocate")
    parser.add_argument("--ledger-wait", type=float, default=30.0, help="seconds for the ledger to converge")
    parser.add_argument("--workdir", default="", help="keep the logs and state here (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir after a passing run")
    parser.add_argument(
        "--control-plane",
        choices=("emulator", "real"),
        default="emulator",
        help="real: process kills and etcd/kube-apiserver restarts instead of API faults (sim.chaos.real)",
    )
