"""`python -m bench`: the scheduler_perf-style end-to-end benchmark of the whole service (issue 7).

    python -m bench --nodes 5000 --gpus-per-node 8 --running-pods 20000 --pods 2000 --workers 2 --report F
    python -m bench --quick --report bench-report.json          # `make bench`: 500 and 1,000 nodes, < 3 min
    python -m bench --control-plane real --nodes 1000 --pods 300 --report F   # the real kube-scheduler

`--control-plane real` (bench/real.py) runs the real kube-scheduler three times over one cluster and pod
stream: through our extender and webhook, without any extender, and through a no-op extender (the floor);
it reports both throughputs, `extender_throughput_ratio`, kube-scheduler's and our latencies, the CPU
per scheduled pod of each process and kube-apiserver's requests per scheduled pod by verb and resource.
`--arrival-rate R` is its latency mode: each run's pods created at R per second while kube-scheduler
runs. With `--extender-url` it measures an extender it did not start (any HAMi-compatible one,
bench/real_external.py): only the control plane, the nodes and the driver are ours.
The rest of this docstring is about the emulator (the default).

Every size is a fresh cluster of real processes (bench/e2e.py): the API emulator, the simulated device
plugin, the registration worker and Gunicorn, driven the way kube-scheduler drives an extender
(bench/driver.py). The run measures the growth sizes (500 and 1,000 nodes, the same pods to schedule, the
same running pods per node) and then the requested size; the report's headline keys are the largest
size's, `growth` has every size. The in-process micro benchmark of the filter decision alone is
`python -m bench.filter_micro`; `--profile` wraps every request of the service in pyinstrument
(bench/gunicorn_profile.py) — a profiled run's figures are not results.

Exit status: 0 the run completed and the correctness checks passed (targets are reported, not enforced);
1 the infrastructure failed (a process died, a timeout; the work dir is kept); 3 a correctness check failed
(an oversubscribed device, a measured pod not bound); 130 interrupted. Every child process is stopped by PID
at the end, also on failure and Ctrl-C; the report lists them (`child_pids`) and any survivor
(`children_left`).
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

import urllib3

from bench import arrival, procs, real, real_summary, summary
from bench.e2e import run_size
from bench.seed import Scenario
from bench.startup import Options
from sim.cluster.spec import ExternalExtender
from sim.cluster.stack import DemoFailure, Stack
from sim.kit.kube import KubeError, atomic_write_json

GROWTH_SIZES = (500, 1000)
QUICK = {"nodes": 1000, "pods": 300, "running_per_node": 4}


class Interrupted(Exception):
    """SIGTERM or SIGINT."""


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signal.Signals(signum).name)


def guarded(work: Callable[[], None], stacks: list[Stack]) -> tuple[str, int]:
    """Run `work`; its failure as (one line, exit status) — ("", 0) when it completed. Every stack in
    `stacks` (which `work` may append to) is stopped at the end; a second Ctrl-C cannot abort that."""
    previous = {s: signal.signal(s, _interrupt) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        work()
    except (DemoFailure, KubeError, urllib3.exceptions.HTTPError, RuntimeError, OSError, TimeoutError) as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", 1
    except Interrupted as exc:
        return f"interrupted ({exc})", 130
    finally:
        for sig in previous:
            signal.signal(sig, signal.SIG_IGN)
        for stack in stacks:
            stack.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return "", 0


def say(line: str) -> None:
    print(line, flush=True)


def scenarios(args: argparse.Namespace) -> list[Scenario]:
    """The growth sizes below the requested one (same pods, same running pods per node), then the size."""
    if args.quick:
        nodes, pods = QUICK["nodes"], QUICK["pods"]
        running = nodes * QUICK["running_per_node"]
    else:
        nodes, pods, running = args.nodes, args.pods or 2000, args.running_pods
    main = Scenario(nodes, args.gpus_per_node, running, pods, args.seed)
    per_node = running / nodes
    smaller = [] if args.no_growth else [n for n in GROWTH_SIZES if n < nodes]
    return [replace(main, nodes=n, running=round(per_node * n)) for n in smaller] + [main]


def profiles(stacks: list[Stack]) -> dict[str, Any]:
    """The profile files the service's workers wrote, and the median /filter call's profile text."""
    files = sorted(str(f) for s in stacks for f in (s.workdir / "profile").glob("*.txt"))
    median = sorted((stacks[-1].workdir / "profile").glob("*-filter-median.txt")) if stacks else []
    return {"files": files, "filter_median": median[0].read_text() if median else ""}


def record(
    report: dict[str, Any],
    stacks: list[Stack],
    args: argparse.Namespace,
    root: Path,
    began: float,
    failure: str,
) -> None:
    """The keys every report has (the machine, the child processes and survivors, the outcome); written."""
    if args.profile:
        report["profile"] = profiles(stacks)
    report["machine"] = procs.machine()
    report["wall_seconds"] = round(time.time() - began, 1)
    report["child_pids"] = {s.workdir.name: s.pids for s in stacks}
    report["children_left"] = [pid for s in stacks for pid in s.survivors()]
    report["exit"] = failure or "completed"
    report["workdir"] = str(root)
    if args.report:
        atomic_write_json(args.report, report)


def finish(report: dict[str, Any], failure: str, root: Path, args: argparse.Namespace) -> None:
    say(f"wall time {report['wall_seconds']}s")
    if failure:
        print(f"bench: {failure} (logs in {root})", file=sys.stderr)
    elif not args.keep and not args.workdir:
        shutil.rmtree(root, ignore_errors=True)


def run(args: argparse.Namespace) -> int:
    if args.control_plane == "real":
        return run_real(args)
    began = time.time()
    root = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="hami-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    options = Options(
        workers=args.workers,
        threads=args.threads,
        bind_workers=args.bind_workers,
        webhook_threads=args.webhook_threads,
        registration_interval=args.registration_interval,
        allocate_latency=args.allocate_latency,
        settle=args.settle,
        profile=args.profile,
        scrape_interval=args.scrape_interval,
    )
    rows: list[dict[str, Any]] = []
    stacks: list[Stack] = []

    def sizes() -> None:
        for scenario in scenarios(args):
            say(
                f"{scenario.nodes} nodes x {scenario.gpus_per_node} GPUs, {scenario.running} running pods, "
                f"{scenario.pods} pods to schedule, {args.workers} workers"
            )
            stack = Stack(root / f"n{scenario.nodes}")
            stack.workdir.mkdir(parents=True, exist_ok=True)
            stacks.append(stack)
            try:
                rows.append(run_size(scenario, options, stack, say))
            finally:
                stack.stop()
            say(summary.table(rows[-1:]).splitlines()[-1])

    failure, code = guarded(sizes, stacks)
    report: dict[str, Any] = dict(rows[-1]) if rows else {}
    report["growth"] = [
        {key: row.get(key) for key, _ in summary.TABLE_KEYS} | {"correct": row["correctness"]["ok"]}
        for row in rows
    ]
    report["targets"] = summary.targets(report) if rows else {}
    report["settings"] = {
        "quick": args.quick,
        "seed": args.seed,
        "workers": args.workers,
        "threads": args.threads or "default",
        "bind_workers": args.bind_workers,
        "webhook_threads": args.webhook_threads,
        "registration_interval": args.registration_interval,
        "allocate_latency": args.allocate_latency,
        "scrape_interval": args.scrape_interval,
    }
    correct = bool(rows) and all(row["correctness"]["ok"] for row in rows)
    if not failure and not correct:
        failure, code = "a correctness check failed (see correctness in the report)", 3
    record(report, stacks, args, root, began, failure)
    if rows:
        say("\n" + summary.table(rows))
        if not report["targets"]["at_target_size"]:
            say(
                "  (the targets apply at 5,000 nodes x 8 GPUs, 20,000 running pods and 2 workers;"
                " shown here for this run's largest size)"
            )
        for key, check in report["targets"]["checks"].items():
            verdict = {True: "met", False: "NOT met", None: "n/a"}[check["met"]]
            say(f"  {check['what']:<42} measured {check['measured']}  {verdict}  ({key})")
    finish(report, failure, root, args)
    return code


def real_size(args: argparse.Namespace) -> tuple[int, int]:
    """(nodes, pods per run) of `--control-plane real`."""
    return (1000, 200) if args.quick else (args.nodes, args.pods or real.RealOptions.pods)


def real_options(args: argparse.Namespace) -> real.RealOptions:
    nodes, pods = real_size(args)
    return real.RealOptions(
        nodes=nodes,
        gpus_per_node=args.gpus_per_node,
        pods=pods,
        seed=args.seed,
        workers=args.workers,
        threads=args.threads,
        qps=args.qps,
        allocate_latency=args.allocate_latency,
        stall=args.stall,
        settle=args.settle,
        profile=args.profile,
        node_policy=args.node_policy,
        external=external(args),
        external_start=args.external_start,
        external_wait=args.external_wait,
        arrival_rate=args.arrival_rate,
    )


def external(args: argparse.Namespace) -> ExternalExtender | None:
    """The outside extender of `--extender-url` (None: ours, started by the harness)."""
    if not args.extender_url:
        return None
    return ExternalExtender(
        url=args.extender_url,
        ca_file=args.extender_ca,
        webhook_url=args.webhook_url,
        webhook_ca=args.webhook_ca,
        scheduler_name=args.scheduler_name,
    )


def run_real(args: argparse.Namespace) -> int:
    """`--control-plane real`: one size, three runs (bench/real.py); same exit codes and clean-up."""
    began = time.time()
    root = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="hami-bench-real-"))
    root.mkdir(parents=True, exist_ok=True)
    options = real_options(args)
    stack = Stack(root / f"real-n{options.nodes}")
    stack.workdir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {}
    failure, code = guarded(lambda: report.update(real.run_size(options, stack, say)), [stack])
    if not failure and not report.get("correct"):
        failure, code = "a correctness check failed (see phases.*.correctness in the report)", 3
    record(report, [stack], args, root, began, failure)
    if "phases" in report:
        say("\n" + real_summary.table(report))
    finish(report, failure, root, args)
    return code


def _arrival_rate(text: str) -> float:
    try:
        return arrival.arrival_rate(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--control-plane",
        choices=("emulator", "real"),
        default="emulator",
        help="emulator: our service driven by the benchmark's scheduler stand-in; real: the real"
        " kube-scheduler with our extender, without an extender and with a no-op one (make kube)",
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--running-pods", type=int, default=20000, help="bound GPU pods seeded before")
    parser.add_argument(
        "--pods", type=int, default=0, help="pods to schedule (measured; default 2000, real: 300 per run)"
    )
    parser.add_argument("--qps", type=int, default=5000, help="real: kube-scheduler qps (burst 2x)")
    parser.add_argument(
        "--node-policy",
        choices=("", "binpack", "spread"),
        default="",
        help="real: the chart's nodeSchedulerPolicy (default: the chart's, binpack)",
    )
    parser.add_argument(
        "--arrival-rate",
        type=_arrival_rate,
        default=0.0,
        metavar="R",
        help="real: latency mode, the pods of each run created at R per second while its kube-scheduler"
        " runs (default: all created before it starts, saturated)",
    )
    parser.add_argument(
        "--stall", type=float, default=120.0, help="real: a run ends after this long without a bind"
    )
    parser.add_argument("--workers", type=int, default=2, help="Gunicorn workers (HAMI_WORKERS)")
    parser.add_argument("--threads", type=int, default=0, help="HAMI_THREADS (0: the service default)")
    parser.add_argument("--quick", action="store_true", help="500 and 1,000 nodes, 300 pods (make bench)")
    parser.add_argument("--no-growth", action="store_true", help="only the requested size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--bind-workers",
        type=int,
        default=16,
        help="concurrent binds (binding goroutines); 0 = diagnostic: each bind before the next filter",
    )
    parser.add_argument("--webhook-threads", type=int, default=8, help="concurrent AdmissionReviews")
    parser.add_argument("--registration-interval", default="15s", help="HAMI_REGISTRATION_INTERVAL")
    parser.add_argument("--allocate-latency", type=float, default=0.002, help="seconds per Allocate")
    parser.add_argument("--settle", type=float, default=120.0, help="seconds to wait for Allocate to finish")
    parser.add_argument(
        "--profile", action="store_true", help="pyinstrument per request in the service (slows it down)"
    )
    parser.add_argument(
        "--scrape-interval", type=float, default=0.0, help="GET /metrics every N s in the window (Prometheus)"
    )
    parser.add_argument("--report", type=Path, default=None, help="write the JSON report here")
    parser.add_argument("--workdir", default="", help="keep logs and state here (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir after a successful run")
    outside = parser.add_argument_group(
        "an outside extender (real control plane only; bench/real_external.py)",
        "e.g. --extender-url https://127.0.0.1:9443 --extender-ca D/tls/ca.crt --webhook-url"
        " https://127.0.0.1:9443/webhook --webhook-ca D/tls/ca.crt --external-start"
        " 'python -m bench.outside --port 9443 --workdir D'",
    )
    outside.add_argument("--extender-url", default="", help="kube-scheduler's urlPrefix for the extender")
    outside.add_argument(
        "--extender-ca", default="", help="CA file for an https extender (default: insecure)"
    )
    outside.add_argument("--webhook-url", default="", help="the outside admission webhook (default: none)")
    outside.add_argument("--webhook-ca", default="", help="PEM file for the webhook's caBundle")
    outside.add_argument(
        "--scheduler-name", default="hami-scheduler", help="the outside extender's scheduler name"
    )
    outside.add_argument("--external-start", default="", help="shell command starting it (KUBECONFIG set)")
    outside.add_argument(
        "--external-wait", type=float, default=600.0, help="seconds for it to be ready (default 600)"
    )
    args = parser.parse_args(argv)
    given = [f for f in ("extender_ca", "webhook_url", "webhook_ca", "external_start") if getattr(args, f)]
    if given and not args.extender_url:
        parser.error(f"argument --{given[0].replace('_', '-')}: needs --extender-url")
    if args.extender_url and args.control_plane != "real":
        parser.error("argument --extender-url: needs --control-plane real")
    if args.webhook_ca and not args.webhook_url:
        parser.error("argument --webhook-ca: needs --webhook-url")
    if args.arrival_rate and args.control_plane != "real":
        parser.error("argument --arrival-rate: needs --control-plane real")
    if args.arrival_rate and (why := arrival.too_long(real_size(args)[1], args.arrival_rate)):
        parser.error(f"argument --arrival-rate: {why}")
    return args


def main(argv: list[str] | None = None) -> int:
    return run(parse(argv))


if __name__ == "__main__":
    sys.exit(main())
