"""`python -m sim up`: the whole stack, for kubectl, other tools and other test suites.

    python -m sim up --workdir D [--control-plane real|emulator] [--nodes N] [--gpus-per-node G]
                     [--vendors KINDS] [--mig-nodes M] [--workload-api] [--log-level LEVEL] [--detach]
                     [--grace-scale S] [--grace-cap SECONDS] [--no-controller-manager]
    python -m sim down --workdir D

Starts the control plane (real: etcd, kube-apiserver, the chart's RBAC, the chart's webhook registered with
its caBundle, the real kube-scheduler with the chart's KubeSchedulerConfiguration and the cluster's own
kube-scheduler (`default-scheduler`, no extender); emulator: the API emulator and the simulated
kube-scheduler with both profiles), the simulated GPU nodes with their kubelets and HAMi device
plugin, our registration worker and Gunicorn. Then writes `D/kubeconfig` (admin) and, once everything is
Ready, `D/env` (`. D/env`: KUBECONFIG, and PATH with the kubectl of the server's version, `hami-scheduler`
and helm) and `D/ready` (JSON, sim.cluster.playground.ready_document: the kubectl, the `inspect` commands
that work, every log, every PID), and prints the same as a few lines. On the real control plane it also
installs a ValidatingAdmissionPolicy that refuses `helm install` of our chart with a sentence
(sim.cluster.playground). Our processes log at `--log-level` (INFO: the one-line-per-decision log is there).

In the foreground until SIGINT or SIGTERM; with `--detach` it returns once ready (exit 0) or failed (exit 1,
the log's last lines) and keeps running in its own session, logging to `D/sim-up.log`, until
`python -m sim down --workdir D` (SIGTERM, waited for). Either way it then stops every process it started by
PID and process group, removes `D/ready`, and prints one line saying so.

With the real control plane, `kubectl --kubeconfig D/kubeconfig` creates GPU pods that go through our
webhook and the real kube-scheduler with our extender. The emulator calls no webhook: a pod created there
must carry `schedulerName: hami-scheduler` itself. On both, a pod that asks for no managed device keeps
`default-scheduler` and is placed by it, as in any cluster.

Exit status: 0 after a clean stop, 1 with one line on stderr when the stack failed to start or a process
died (or a playground already runs in D), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

import orjson

from sim.cluster import image
from sim.cluster.actors import grace_arguments
from sim.cluster.build import build
from sim.cluster.playground import env_file, ready_document, ready_text, refuse_the_chart
from sim.cluster.spec import ClusterSpec
from sim.cluster.stack import DemoFailure, Stack, pid_alive
from sim.controlplane import KINDS
from sim.kit.command import Command, stop_on_signals
from sim.kit.kube import atomic_write_json
from sim.nodes.vendors import parse_vendors

PID_FILE = "sim-up.pid"  # from the start until the stop, for `sim down` and for cleaning up after a failure
DETACHED_LOG = "sim-up.log"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def running_pid(workdir: Path) -> int | None:
    """The PID of the `sim up` serving `workdir`, if one runs."""
    try:
        pid = int((workdir / PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    return pid if pid_alive(pid) and b"sim" in command and b"up" in command else None


def problem(args: argparse.Namespace) -> str:
    if args.nodes < 1 or args.gpus_per_node < 1:
        return "--nodes and --gpus-per-node must be at least 1"
    try:
        parse_vendors(args.vendors)
    except ValueError as exc:
        return f"--vendors: {exc}"
    return image.argument_error(args) or ""


def run(args: argparse.Namespace) -> int:
    if problem(args):
        print(f"sim up: {problem(args)}", file=sys.stderr)
        return 2
    workdir = Path(args.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    running = running_pid(workdir)
    if running is not None:
        stop = f"{sys.executable} -m sim down --workdir {workdir}"
        print(f"sim up: a playground already runs in {workdir} (pid {running}); stop it first: {stop}",
              file=sys.stderr)  # fmt: skip
        return 1
    if not args.detach:
        return serve(args, workdir, None)
    log = workdir / DETACHED_LOG
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the playground itself, in a session of its own, logging to the file
        os.setsid()
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        os.close(null)
        return serve(args, workdir, log)
    return wait_detached(pid, workdir, log, args.ready_timeout)


def wait_detached(pid: int, workdir: Path, log: Path, timeout: float) -> int:
    """The caller of `--detach`: print the ready lines and return 0 once the playground is ready; 1 with
    the end of its log when it failed; on Ctrl-C or after `timeout`, stop it first."""
    started, ready = time.monotonic(), workdir / "ready"
    try:
        while True:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
                print(
                    f"sim up: the playground did not start: {' | '.join(tail)} (log: {log})", file=sys.stderr
                )
                return 1
            if ready.exists():
                print(ready_text(orjson.loads(ready.read_bytes()), time.monotonic() - started), flush=True)
                return 0
            if time.monotonic() - started > timeout:
                print(f"sim up: not ready after {timeout:g}s; stopping it (log: {log})", file=sys.stderr)
                break
            time.sleep(0.2)
    except KeyboardInterrupt:
        print("sim up: interrupted; stopping it", file=sys.stderr)
    os.kill(pid, signal.SIGTERM)
    os.waitpid(pid, 0)
    return 1 if time.monotonic() - started > timeout else 130


def serve(args: argparse.Namespace, workdir: Path, detached_log: Path | None) -> int:
    """Start the stack, say how to use it, serve until SIGINT/SIGTERM, stop everything."""
    began = time.monotonic()
    ready, pid_file = workdir / "ready", workdir / PID_FILE
    ready.unlink(missing_ok=True)
    pid_file.write_text(f"{os.getpid()}\n")
    done = stop_on_signals()
    stack = Stack(workdir)
    code = 0
    try:
        build(ClusterSpec.of(vars(args), default_scheduler=True, kubelet_deletions=True), stack)
        assert stack.control_plane is not None and stack.kube is not None
        if stack.control_plane.kind == "real":
            refuse_the_chart(stack.kube)
        document = ready_document(stack, args.log_level, detached_log)
        (workdir / "env").write_text(env_file(document))
        atomic_write_json(ready, document)
        print(ready_text(document, time.monotonic() - began), flush=True)
        while not done.wait(0.5):
            stack.check()
    except DemoFailure as exc:
        print(f"sim up: {exc} (logs in {workdir})", file=sys.stderr)
        code = 1
    except (OSError, RuntimeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        print(f"sim up: {type(exc).__name__}: {first} (logs in {workdir})", file=sys.stderr)
        code = 1
    finally:
        ready.unlink(missing_ok=True)
        stack.stop()
        left = stack.survivors()
        if left:
            time.sleep(0.5)
            left = stack.survivors()
        pid_file.unlink(missing_ok=True)
    if left:
        print(f"sim up: processes still alive after stop: {left}", file=sys.stderr)
        return code or 1
    count = len({pid for pids in stack.pids.values() for pid in pids})
    print(f"sim up: stopped; the {count} processes it started are gone (logs kept in {workdir})", flush=True)
    return code


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workdir", required=True, help="kubeconfig, env and ready files, logs and state")
    parser.add_argument("--control-plane", choices=KINDS, default="real", help="the Kubernetes API server")
    parser.add_argument("--nodes", type=int, default=4, help="simulated nodes")
    parser.add_argument("--gpus-per-node", type=int, default=8, help="NVIDIA GPUs per NVIDIA node")
    parser.add_argument(
        "--vendors",
        default="nvidia",
        help="node kinds cycled over the nodes (sim.nodes.vendors; `+` puts two on one node), "
        "e.g. nvidia,ascend910b3,nvidia+hygon (the demo's: the Makefile's DEMO_VENDORS)",
    )
    parser.add_argument("--mig-nodes", type=int, default=0, help="nodes of MIG-capable models in MIG mode")
    parser.add_argument(
        "--workload-api",
        action="store_true",
        help="real control plane, Kubernetes >= 1.37: the Workload API and gang scheduling (docs/gangs.md)",
    )
    parser.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default="INFO",
        help="our processes' HAMI_LOG_LEVEL (INFO: the one-line-per-decision log, docs/metrics.md)",
    )
    parser.add_argument(
        "--detach",
        action="store_true",
        help="return once ready and keep running in the background (log: WORKDIR/sim-up.log); "
        "stop with `python -m sim down --workdir WORKDIR`",
    )
    parser.add_argument("--ready-timeout", type=float, default=600.0, help="--detach: seconds to wait")
    grace_arguments(parser)
    parser.add_argument(
        "--no-controller-manager",
        dest="controller_manager",
        action="store_false",
        help="real: no kube-controller-manager (no budget status, namespace deletion, garbage collection)",
    )
    parser.add_argument("--seed", type=int, default=0, help="the simulated nodes' seed")
    parser.add_argument("--zones", type=int, default=3, help="topology zones the nodes are spread over")
    parser.add_argument("--workers", type=int, default=2, help="Gunicorn workers (HAMI_WORKERS)")
    parser.add_argument(
        "--allocate-latency", type=float, default=0.002, help="seconds the device plugin's Allocate takes"
    )
    parser.add_argument("--unschedulable-timeout", type=float, default=30.0, help="simulated scheduler only")
    parser.add_argument("--max-unschedulable", type=int, default=1000, help="simulated scheduler only")
    image.add_argument(parser)
    parser.set_defaults(tls=True)


COMMAND = Command(add_arguments, run)
