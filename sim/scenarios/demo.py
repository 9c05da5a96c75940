"""`python -m sim demo`: the playground — a whole HAMi cluster on one machine, every actor a real process.

    python -m sim demo [--nodes 20] [--pods 150] [--seed 0] [--workers 2] [--report FILE] [--timeout 300]

Starts, each as a child process stopped by PID at the end (also on Ctrl-C or failure, process groups
included): the API emulator, the simulated GPU nodes (`python -m sim nodes`), the registration worker
(`python -m workers`), our service (`gunicorn -c config/gunicorn.conf.py wsgi:app`) and the simulated
kube-scheduler (`python -m sim scheduler`). Every pod of the mix (sim.workload.mix) goes through our
`/webhook` first — an AdmissionReview v1 CREATE whose JSON Patch is applied, standing in for the API server's
admission chain — and is then created. The demo waits until every pod is bound or rejected, prints the
placement table and per-GPU bars, and writes the report (sim.workload.report; keys in docs/demo.md). One more
pod asks for no managed device (`demo-plain`): the webhook leaves it alone and the cluster's own
`default-scheduler` places it, as in any cluster (`plain_pod` in the report).

Exit status: 0 when the run completed (the verdict is in the report), 1 with one line on stderr when the
infrastructure failed (a process died, the service never became ready, pods still pending at the timeout),
130 when interrupted.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import Any

import urllib3

from sim.cluster import image
from sim.cluster.actors import stats_of
from sim.cluster.build import build
from sim.cluster.harness import create_pod
from sim.cluster.spec import ClusterSpec
from sim.cluster.stack import DemoFailure, Stack
from sim.controlplane import KINDS
from sim.kit import podutil
from sim.kit.command import Command
from sim.kit.kube import Kube, KubeError, atomic_write_json
from sim.nodes.vendors import parse_vendors
from sim.workload.mix import DEMO_LABEL, demo_pods
from sim.workload.report import LOCKS, histogram_quantile_ms, summarize
from sim.workload.terminal import placement_table, utilisation_chart

PLAIN_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "demo-plain", "namespace": "default", "labels": {"sim.hami.io/plain": "true"}},
    "spec": {
        "containers": [
            {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
        ]
    },
}


class Interrupted(Exception):
    """SIGTERM or SIGINT."""


def demo_state(kube: Kube) -> list[dict[str, Any]]:
    return kube.list("/api/v1/pods", labelSelector=f"{DEMO_LABEL}=true")[1]


def run_pods(args: argparse.Namespace, stack: Stack, kube: Kube) -> dict[str, Any]:
    assert stack.control_plane is not None
    pods = demo_pods(args.pods, args.seed, vendors=parse_vendors(args.vendors))
    denied: dict[str, str] = {}
    started = time.time()
    plain_denied = create_pod(stack, PLAIN_POD)
    if plain_denied:
        raise DemoFailure(f"the webhook denied a pod that asks for no managed device: {plain_denied}")
    for demo in pods:
        reason = create_pod(stack, demo.manifest)
        if reason:
            denied[demo.key] = reason
    created = len(pods) - len(denied)
    # The real kube-scheduler never gives up on a pod: the outcome counts once stable for `stable` seconds.
    stable = 0.0 if stack.control_plane.rejections_are_final() else args.stable
    last_change, last_counts = time.monotonic(), (-1, -1)
    print(f"submitted {created} pods ({len(denied)} denied by the webhook) in {time.time() - started:.1f}s")
    deadline = time.monotonic() + args.timeout
    last_print = 0.0
    while True:
        stack.check()
        state = demo_state(kube)
        bound = sum(1 for p in state if podutil.node_name(p))
        rejected = sum(1 for p in state if podutil.unschedulable_reason(p) is not None)
        if (bound, rejected) != last_counts:
            last_change, last_counts = time.monotonic(), (bound, rejected)
        if time.monotonic() - last_print > 2.0:
            print(
                f"  bound {bound}/{created}  unschedulable {rejected}  waiting {created - bound - rejected}"
            )
            last_print = time.monotonic()
        done = bound + rejected >= created and time.monotonic() - last_change >= stable
        if done or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    settled = time.time() - (time.monotonic() - last_change if stable else 0.0)

    def quiet() -> bool:
        current = demo_state(kube)
        allocating = [p for p in current if podutil.node_name(p) and podutil.phase(p) == "Pending"]
        locked = [n for n in kube.list("/api/v1/nodes")[1] if LOCKS & podutil.annotations_of(n).keys()]
        return not allocating and not locked

    deadline_settle = time.monotonic() + args.settle
    while not quiet() and time.monotonic() < deadline_settle:
        stack.check()
        time.sleep(0.25)
    return {
        "denied": denied,
        "submit_started": started,
        "settled_at": settled,
        "requested": len(pods),
        "plain_pod": plain_pod(stack, kube),
    }


def plain_pod(stack: Stack, kube: Kube, timeout: float = 30.0) -> dict[str, str]:
    """Where the cluster's default scheduler placed `demo-plain` (it was created before the mix)."""
    meta = PLAIN_POD["metadata"]
    path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
    deadline = time.monotonic() + timeout
    while not podutil.node_name(pod := kube.get(path)) and time.monotonic() < deadline:
        stack.check()
        time.sleep(0.25)
    if not podutil.node_name(pod):
        raise DemoFailure(f"the pod {meta['name']} (no managed device) was not placed within {timeout:g}s")
    return {
        "pod": podutil.key(pod),
        "scheduler_name": str(podutil.spec(pod).get("schedulerName") or ""),
        "node": podutil.node_name(pod),
        "phase": podutil.phase(pod),
    }


def build_report(args: argparse.Namespace, stack: Stack, kube: Kube, run: dict[str, Any]) -> dict[str, Any]:
    pods, nodes = demo_state(kube), kube.list("/api/v1/nodes")[1]
    assert stack.control_plane is not None
    metrics = stack.http.request("GET", f"{stack.service_url}/metrics").data.decode(errors="replace")
    failed = {  # kube-scheduler's FailedScheduling events (the simulated scheduler writes none)
        f"{e['involvedObject'].get('namespace')}/{e['involvedObject'].get('name')}": e.get("message", "")
        for e in kube.list("/api/v1/events", fieldSelector="reason=FailedScheduling")[1]
    }
    stack.stop("scheduler", "nodes")  # their final stats
    scheduler, plugin = (
        stats_of(stack.workdir / "scheduler-stats.json"),
        stats_of(stack.workdir / "nodes-stats.json"),
    )
    report = summarize(pods, nodes)
    latency = {  # the simulated scheduler measures its calls; with kube-scheduler, our service's histograms
        f"{verb}_{q}_ms": (scheduler.get(verb) or {}).get(f"{q}_ms")
        or histogram_quantile_ms(metrics, f"hami_scheduler_{verb}_duration_seconds", int(q[1:]) / 100)
        for verb in ("filter", "bind")
        for q in ("p50", "p99")
    }
    elapsed = max(1e-9, (scheduler.get("last_bound_wall") or run["settled_at"]) - run["submit_started"])
    report.update(
        {
            "pods_requested": run["requested"],
            "pods_webhook_denied": len(run["denied"]),
            "webhook_denied": run["denied"],
            **latency,
            "failed_scheduling": failed,
            "pods_failed": {  # the kubelet's reason, e.g. UnexpectedAdmissionError from a failed Allocate
                podutil.key(p): str((p.get("status") or {}).get("message") or "")
                for p in pods
                if podutil.phase(p) == "Failed"
            },
            "control_plane": stack.control_plane.kind,
            "versions": stack.control_plane.versions(),
            "pods_per_second": round(report["pods_bound"] / elapsed, 2),
            "plain_pod": run["plain_pod"],
            "scheduling_seconds": round(run["settled_at"] - run["submit_started"], 2),
            "seed": args.seed,
            "settings": {
                "nodes": args.nodes,
                "pods": args.pods,
                "workers": args.workers,
                "gpus_per_node": args.gpus_per_node,
                "zones": args.zones,
                "mig_nodes": args.mig_nodes,
                "tls": args.tls,
                "control_plane": args.control_plane,
                "vendors": args.vendors,
            },
            "scheduler": scheduler,
            "device_plugin": plugin,
            "workdir": str(stack.workdir),
        }
    )
    print("\n".join(placement_table(pods, nodes)))
    print()
    print("\n".join(utilisation_chart(pods, nodes)))
    plain = run["plain_pod"]
    print(
        f"\nplain pod {plain['pod']} (no managed device, {plain['scheduler_name']}) placed on {plain['node']}"
    )
    return report


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signal.Signals(signum).name)


def run(args: argparse.Namespace) -> int:
    if image.argument_error(args):
        print(f"sim demo: {image.argument_error(args)}", file=sys.stderr)
        return 2
    began = time.time()
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="hami-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    stack = Stack(workdir)
    if args.control_plane == "real":
        args.tls = True  # the chart serves HTTPS only
    previous = {s: signal.signal(s, _interrupt) for s in (signal.SIGTERM, signal.SIGINT)}
    failure, code, report = "", 0, None
    try:
        print(f"starting the cluster in {workdir} ...")
        kube = build(ClusterSpec.of(vars(args), default_scheduler=True), stack)
        print(f"ready after {time.time() - began:.1f}s: {args.nodes} nodes, service at {stack.service_url}")
        run_info = run_pods(args, stack, kube)
        report = build_report(args, stack, kube, run_info)
        if report["pods_pending"]:
            failure, code = f"timed out: {report['pods_pending']} pods neither bound nor rejected", 1
    except DemoFailure as exc:
        failure, code = str(exc), 1
    except (KubeError, urllib3.exceptions.HTTPError, OSError, TimeoutError, RuntimeError) as exc:
        failure, code = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", 1
    except Interrupted as exc:
        failure, code = f"interrupted ({exc})", 130
    finally:
        for sig in previous:  # a second Ctrl-C must not abort the clean-up
            signal.signal(sig, signal.SIG_IGN)
        stack.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if report is not None:
        report["wall_seconds"] = round(time.time() - began, 2)  # start to stop, the clean-up included
        report["child_pids"] = stack.pids
        report["children_left"] = stack.survivors()
        report["exit"] = failure or "completed"
        if args.report:
            atomic_write_json(args.report, report)
        keys = (
            "pods_total",
            "pods_bound",
            "pods_unschedulable",
            "oversubscribed_devices",
            "node_locks_held",
            "filter_p50_ms",
            "filter_p99_ms",
            "bind_p50_ms",
            "bind_p99_ms",
            "pods_per_second",
            "wall_seconds",
        )
        print("\n" + "  ".join(f"{k}={report[k]}" for k in keys))
        by_vendor = report.get("pods_bound_by_vendor") or {}
        if set(by_vendor) - {"NVIDIA"}:  # a mixed cluster: its bound pods per vendor key
            print("bound by vendor: " + "  ".join(f"{key}={count}" for key, count in by_vendor.items()))
    if failure:
        print(f"demo failed: {failure} (logs in {workdir})", file=sys.stderr)
    elif not args.keep and not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return code


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--pods", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2, help="Gunicorn workers (HAMI_WORKERS)")
    parser.add_argument("--report", type=Path, default=None, help="write the JSON report here")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for bound/rejected")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds to wait for allocations after")
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument(
        "--vendors",
        default="nvidia",
        help="node kinds cycled over the nodes (sim.nodes.vendors), "
        "e.g. nvidia,ascend910b3,nvidia+hygon,cambricon",
    )
    parser.add_argument("--zones", type=int, default=3)
    parser.add_argument("--mig-nodes", type=int, default=0, help="nodes of MIG-capable models in MIG mode")
    parser.add_argument("--allocate-latency", type=float, default=0.002)
    parser.add_argument(
        "--unschedulable-timeout", type=float, default=5.0, help="see sim.kubescheduler.scheduler"
    )
    parser.add_argument("--max-unschedulable", type=int, default=5, help="see sim.kubescheduler.scheduler")
    parser.add_argument("--tls", action="store_true", help="serve our service over HTTPS (a throwaway CA)")
    parser.add_argument("--workdir", default="", help="keep the logs and state here (default: a temp dir)")
    parser.add_argument(
        "--control-plane",
        choices=KINDS,
        default="emulator",
        help="the API emulator and simulated kube-scheduler, or etcd + kube-apiserver + kube-scheduler",
    )
    parser.add_argument(
        "--stable", type=float, default=5.0, help="real control plane: seconds the outcome must not change"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp dir after a successful run")
    image.add_argument(parser)


COMMAND = Command(add_arguments, run)
