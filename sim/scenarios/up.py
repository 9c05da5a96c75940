"""`python -m sim up`: the whole stack in the foreground, for kubectl, other tools and other test suites.

    python -m sim up --control-plane real|emulator --nodes N --gpus-per-node G --workdir D [--mig-nodes M]
                     [--workload-api]

Starts the control plane (real: etcd, kube-apiserver, the chart's RBAC, the chart's webhook registered with
its caBundle, the real kube-scheduler with the chart's KubeSchedulerConfiguration and the cluster's own
kube-scheduler (`default-scheduler`, no extender); emulator: the API emulator and the simulated
kube-scheduler with both profiles), the simulated GPU nodes with their kubelets and HAMi device
plugin, our registration worker and Gunicorn. Then writes `D/kubeconfig` (admin) and, once everything is
Ready, `D/ready` (JSON: control plane, versions, the service's URL and CA, every PID). Stays in the
foreground until SIGINT or SIGTERM, then stops every process it started by PID and process group, and
removes `D/ready`.

With the real control plane, `kubectl --kubeconfig D/kubeconfig` creates GPU pods that go through our
webhook and the real kube-scheduler with our extender. The emulator calls no webhook: a pod created there
must carry `schedulerName: hami-scheduler` itself. On both, a pod that asks for no managed device keeps
`default-scheduler` and is placed by it, as in any cluster.

Exit status: 0 after a clean stop, 1 with one line on stderr when the stack failed to start or a process
died, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from sim.cluster import image
from sim.cluster.actors import grace_arguments
from sim.cluster.build import build
from sim.cluster.spec import ClusterSpec
from sim.cluster.stack import DemoFailure, Stack
from sim.controlplane import KINDS
from sim.kit.command import Command, stop_on_signals
from sim.kit.kube import atomic_write_json


def run(args: argparse.Namespace) -> int:
    if args.nodes < 1 or args.gpus_per_node < 1:
        print("sim up: --nodes and --gpus-per-node must be at least 1", file=sys.stderr)
        return 2
    if image.argument_error(args):
        print(f"sim up: {image.argument_error(args)}", file=sys.stderr)
        return 2
    workdir = Path(args.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    ready = workdir / "ready"
    ready.unlink(missing_ok=True)
    done = stop_on_signals()
    stack = Stack(workdir)
    code = 0
    try:
        build(ClusterSpec.of(vars(args), default_scheduler=True, kubelet_deletions=True), stack)
        assert stack.control_plane is not None
        atomic_write_json(
            ready,
            {
                "control_plane": stack.control_plane.kind,
                "versions": stack.control_plane.versions(),
                "kubeconfig": str(stack.kubeconfig),
                "kubectl": str(stack.control_plane.kubectl()),
                "service_url": stack.service_url,
                "service_ca": str(stack.ca_file or ""),
                "nodes": args.nodes,
                "pids": {n: p.pid for n, p in stack.all_processes().items()},
            },
        )
        print(
            f"sim up: ready ({stack.control_plane.kind}); KUBECONFIG={stack.kubeconfig}"
            f" kubectl={stack.control_plane.kubectl()}",
            flush=True,
        )
        while not done.wait(0.5):
            stack.check()
    except DemoFailure as exc:
        print(f"sim up: {exc} (logs in {workdir})", file=sys.stderr)
        code = 1
    except (OSError, RuntimeError) as exc:
        print(
            f"sim up: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", file=sys.stderr
        )
        code = 1
    finally:
        ready.unlink(missing_ok=True)
        stack.stop()
        left = stack.survivors()
        if left:
            time.sleep(0.5)
            left = stack.survivors()
        if left:
            print(f"sim up: processes still alive after stop: {left}", file=sys.stderr)
            code = code or 1
    return code


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--control-plane", choices=KINDS, default="real")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--mig-nodes", type=int, default=0, help="nodes of MIG-capable models in MIG mode")
    parser.add_argument("--workdir", required=True, help="kubeconfig, ready file, logs and state")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--zones", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="Gunicorn workers (HAMI_WORKERS)")
    parser.add_argument("--allocate-latency", type=float, default=0.002)
    parser.add_argument("--unschedulable-timeout", type=float, default=30.0, help="simulated scheduler only")
    parser.add_argument("--max-unschedulable", type=int, default=1000, help="simulated scheduler only")
    parser.add_argument(
        "--workload-api",
        action="store_true",
        help="real control plane, Kubernetes >= 1.37: the Workload API and gang scheduling (docs/gangs.md)",
    )
    grace_arguments(parser)
    parser.add_argument(
        "--no-controller-manager",
        dest="controller_manager",
        action="store_false",
        help="real: no kube-controller-manager (no budget status, namespace deletion, garbage collection)",
    )
    image.add_argument(parser)
    parser.set_defaults(tls=True)


COMMAND = Command(add_arguments, run)
