"""`python -m sim fuzz`: bad inputs against the running service, with corrupt cluster state planted around it.

    python -m sim fuzz [--seed 0] [--requests 5000] [--report FILE] [--nodes 3] [--workers 2]
                       [--concurrency 4] [--max-body-bytes 1048576] [--timeout 30] [--workdir DIR] [--keep]

Starts, as child processes stopped by PID at the end (sim.cluster.stack): the API emulator, the simulated GPU
nodes (their kubelets and device plugins), the registration worker and Gunicorn (`--workers`). Plants corrupt
nodes, pods, lock values and quotas in the emulator (sim.fuzz.plant), then sends `--requests` requests: the
seeded bad inputs of sim.fuzz.gen, interleaved with valid filter -> bind flows of real pods through the same
(partly corrupt) nodes, while the planter keeps changing lock values and registrations; then
`--hostile-rounds` of the hostile verbs (sim.fuzz.hostile: valid-looking bodies naming bound, pending and
foreign pods with missing or wrong UIDs, bodies over the per-route caps), each of which must be refused
without changing anything or growing the workers' memory. Every answer is judged (sim.fuzz.judge);
Gunicorn worker PIDs and the registration worker are watched for crashes.

The report (JSON): requests, server_errors (HTTP 5xx), crashes (Gunicorn worker restarts, master or
registration worker exits), internal_errors, unclear_errors, timeouts, connection_errors, examples of each
(truncated), the valid flows' outcomes, what was planted, the nodes the service excludes and why, the
error lines of the service's and the worker's logs, and the wall time. Exit status 0 when the run completed
(the verdict is in the numbers), 1 when the infrastructure failed.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from types import FrameType
from typing import Any

import orjson
import urllib3

from sim.chaos.forger import gpu_pod
from sim.cluster.build import build
from sim.cluster.spec import ClusterSpec
from sim.cluster.stack import DemoFailure, Stack, group_members
from sim.fuzz.gen import Case, Inputs
from sim.fuzz.hostile import FUZZ, Hostile, peaks
from sim.fuzz.judge import Tally
from sim.fuzz.plant import NAMESPACE, REGISTER, Planter
from sim.kit.command import Command
from sim.kit.kube import Kube, KubeError, atomic_write_json, pod_path, pool_manager

VALID_EVERY = 10  # one valid filter -> bind flow per this many requests
CHURN_EVERY = 50  # one planted change per this many requests
CHECK_EVERY = 100  # process checks
LIVE_PODS = 16  # valid pods kept before the oldest is deleted
LOG_MARKERS = ('"level":"error"', '"level":"critical"', "Traceback", "WORKER TIMEOUT")


class Fuzzer:
    """Sends the cases, runs the valid flows, and watches the service's processes; thread-safe tallies."""

    def __init__(self, args: argparse.Namespace, stack: Stack, kube: Kube, good: list[str]) -> None:
        self.args = args
        self.stack = stack
        self.kube = kube
        self.good = good
        self.tally = Tally()
        self.http = pool_manager(args.concurrency + 4, timeout=args.timeout)
        self.valid: Counter[str] = Counter()
        self.valid_examples: list[str] = []
        self.live: deque[str] = deque()
        self.worker_pids: set[int] = set()
        self.exits: list[str] = []
        self._lock = threading.Lock()

    def send_raw(self, case: Case) -> None:
        """Write `case.body` as the whole request on a new connection; judge the status line, if any."""
        host, _, port = self.stack.service_url.removeprefix("http://").partition(":")
        answer = b""
        try:
            with socket.create_connection((host, int(port)), timeout=self.args.timeout) as sock:
                with contextlib.suppress(OSError):  # the server may answer and close before reading it all
                    sock.sendall(case.body or b"")
                    sock.shutdown(socket.SHUT_WR)
                while chunk := sock.recv(65536):
                    answer += chunk
        except TimeoutError as exc:
            self.tally.failed(case, "timeouts", str(exc))
            return
        except OSError:
            pass  # reset after a framing error: the server refused the bytes, which is an answer
        head, _, body = answer.partition(b"\r\n\r\n")
        while head.startswith(b"HTTP/1.1 1"):  # interim answers (100 Continue) precede the real one
            head, _, body = body.partition(b"\r\n\r\n")
        fields = head.split(b" ", 2)
        if len(fields) >= 2 and fields[1].isdigit():
            self.tally.answered(case, int(fields[1]), body)
        else:
            self.tally.answered(case, 0, b"")

    def send(self, case: Case) -> urllib3.BaseHTTPResponse | None:
        started = time.perf_counter()
        try:
            return self._send(case)
        finally:
            self.tally.timed(case, time.perf_counter() - started)

    def _send(self, case: Case) -> urllib3.BaseHTTPResponse | None:
        if case.method == "RAW":
            self.send_raw(case)
            return None
        headers = {"Content-Type": case.content_type} if case.content_type else {}
        try:
            response = self.http.request(
                case.method, self.stack.service_url + case.path, body=case.body, headers=headers
            )
        except urllib3.exceptions.TimeoutError as exc:
            self.tally.failed(case, "timeouts", str(exc))
            return None
        except urllib3.exceptions.HTTPError as exc:
            self.tally.failed(case, "connection_errors", str(exc))
            return None
        self.tally.answered(case, response.status, response.data)
        return response

    def _note(self, outcome: str, detail: str = "") -> None:
        with self._lock:
            self.valid[outcome] += 1
            if detail and len(self.valid_examples) < 10:
                self.valid_examples.append(f"{outcome}: {detail[:300]}")

    def _answer(self, case: Case) -> dict[str, Any] | None:
        response = self.send(case)
        if response is None or response.status != 200:
            return None
        answer = orjson.loads(response.data)
        return answer if isinstance(answer, dict) else None

    def valid_flow(self, index: int, names: list[str]) -> None:
        """A real GPU pod through /filter (good and corrupt nodes offered) and /bind to the chosen node."""
        name = f"fuzz-ok-{index}"
        manifest = gpu_pod(name, annotations=FUZZ)
        try:
            pod = self.kube.create(pod_path(NAMESPACE), manifest)
        except KubeError as exc:
            self._note("create_failed", str(exc))
            return
        try:
            self.filter_and_bind(pod, names)
        finally:
            self._remember(name)

    def filter_and_bind(self, pod: dict[str, Any], names: list[str]) -> str:
        """The node the pod was bound to ("" when it was not), each outcome noted."""
        name = pod["metadata"]["name"]
        body = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})
        answer = self._answer(Case("valid-flow", "POST", "/filter", body))
        if answer is None or answer.get("Error"):
            self._note("filter_error", str(answer and answer.get("Error")))
            return ""
        placed = answer.get("NodeNames") or []
        if not placed:
            self._note("unschedulable", orjson.dumps(answer.get("FailedNodes")).decode())
            return ""
        node = str(placed[0])
        if node not in self.good:
            self._note("placed_on_planted_node", node)
        args = {"PodName": name, "PodNamespace": NAMESPACE, "PodUID": pod["metadata"]["uid"], "Node": node}
        answer = self._answer(Case("valid-flow", "POST", "/bind", orjson.dumps(args)))
        if answer is None or answer.get("Error"):
            self._note("bind_error", str(answer and answer.get("Error")))
            return ""
        self._note("bound")
        return node

    def _remember(self, name: str) -> None:
        with self._lock:
            self.live.append(name)
            oldest = self.live.popleft() if len(self.live) > LIVE_PODS else None
        if oldest is not None:
            with contextlib.suppress(KubeError):
                self.kube.delete(pod_path(NAMESPACE, oldest))

    def check_processes(self) -> None:
        """Record the Gunicorn worker PIDs seen so far; a dead master or registration worker is a crash."""
        for name in ("service", "worker"):
            process = self.stack.processes.get(name)
            if process is not None and not process.alive() and name not in self.exits:
                self.exits.append(name)
        service = self.stack.processes.get("service")
        if service is not None and service.alive():
            self.worker_pids |= set(group_members(service.pid)) - {service.pid}

    def run(self, inputs: Inputs, planter: Planter, names_rng: random.Random) -> int:
        """Send every case (at most 4 x concurrency queued); returns how many planted changes were made."""
        churned = 0
        all_nodes = [*self.good, *planter.bad_nodes]
        pending: set[Future[Any]] = set()
        with ThreadPoolExecutor(self.args.concurrency) as pool:
            index = checked = 0
            while index < self.args.requests:
                if index % VALID_EVERY >= VALID_EVERY - 2:  # a valid flow sends two requests
                    names = names_rng.sample(all_nodes, k=len(all_nodes))
                    pending.add(pool.submit(self.valid_flow, index, names))
                    index += 2
                else:
                    pending.add(pool.submit(self.send, inputs.next()))
                    index += 1
                if index >= (churned + 1) * CHURN_EVERY:
                    planter.churn()
                    churned += 1
                if index >= checked + CHECK_EVERY:
                    self.check_processes()
                    checked = index
                if len(pending) > 4 * self.args.concurrency:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        future.result()  # a bug in the fuzzer itself ends the run
            for future in pending:
                future.result()
        self.check_processes()
        return churned


def _log_errors(path: Path, keep: int = 5) -> dict[str, Any]:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return {"lines": 0, "examples": []}
    errors = [line for line in lines if any(marker in line for marker in LOG_MARKERS)]
    return {"lines": len(errors), "examples": [e[:500] for e in errors[:keep]]}


def _good_nodes(kube: Kube) -> tuple[list[str], list[str]]:
    nodes = kube.list("/api/v1/nodes", labelSelector="sim.hami.io/node=true")[1]
    names = sorted(n["metadata"]["name"] for n in nodes)
    uuids = [d["id"] for n in nodes for d in orjson.loads(n["metadata"]["annotations"][REGISTER])]
    return names, uuids


def fuzz(args: argparse.Namespace, stack: Stack) -> dict[str, Any]:
    began = time.time()
    env = {
        "HAMI_MAX_BODY_BYTES": str(args.max_body_bytes),
        "HAMI_BIND_LOCK_WAIT": "2s",
        "HAMI_REGISTRATION_INTERVAL": "1s",
    }
    spec = ClusterSpec.of(
        vars(args), zones=1, allocate_latency=0.0, tls=False, scheduler=False, service_env=env
    )
    kube = build(spec, stack)
    good, uuids = _good_nodes(kube)
    planter = Planter(kube, random.Random(args.seed), good, uuids)
    planter.plant()
    fuzzer = Fuzzer(args, stack, kube, good)
    inputs = Inputs(args.seed, [*good, *planter.bad_nodes], args.max_body_bytes)
    print(f"fuzzing {stack.service_url}: {args.requests} requests, seed {args.seed} ...", flush=True)
    started = time.time()
    churned = fuzzer.run(inputs, planter, random.Random(args.seed + 1))
    fuzz_seconds = time.time() - started
    hostile = Hostile(kube, fuzzer.send, good, args.max_body_bytes)
    hostile.setup(lambda pod: fuzzer.filter_and_bind(pod, good))
    fuzzer.check_processes()
    pids = set(fuzzer.worker_pids)
    before = peaks(pids)
    hostile.run(args.hostile_rounds)
    after = peaks(pids)
    fuzzer.check_processes()
    growth = max((after[pid] - before[pid] for pid in after if pid in before), default=0)
    state_reply = stack.http.request("GET", f"{stack.service_url}/debug/state")
    state = orjson.loads(state_reply.data) if state_reply.status == 200 else {}
    gunicorn_restarts = max(0, len(fuzzer.worker_pids) - args.workers)
    report = fuzzer.tally.as_json()
    report.update(
        {
            "crashes": gunicorn_restarts + len(fuzzer.exits),
            "crash_detail": {
                "gunicorn_worker_pids": sorted(fuzzer.worker_pids),
                "gunicorn_worker_restarts": gunicorn_restarts,
                "process_exits": fuzzer.exits,
            },
            "valid_flows": {**dict(sorted(fuzzer.valid.items())), "examples": fuzzer.valid_examples},
            "planted": {**planter.planted, "churn": churned},
            **hostile.summary(growth),
            "unusable_nodes": state.get("unusable", {}),
            "service_log_errors": _log_errors(stack.workdir / "service.log"),
            "worker_log_errors": _log_errors(stack.workdir / "worker.log"),
            "seed": args.seed,
            "settings": {
                "nodes": args.nodes,
                "gpus_per_node": args.gpus_per_node,
                "workers": args.workers,
                "concurrency": args.concurrency,
                "max_body_bytes": args.max_body_bytes,
            },
            "fuzz_seconds": round(fuzz_seconds, 2),
            "wall_seconds": round(time.time() - began, 2),
            "workdir": str(stack.workdir),
        }
    )
    return report


class Interrupted(Exception):
    """SIGTERM or SIGINT: stop every child by PID, then exit."""


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signal.Signals(signum).name)


def run(args: argparse.Namespace) -> int:
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="hami-fuzz-"))
    workdir.mkdir(parents=True, exist_ok=True)
    stack = Stack(workdir)
    failure, report = "", None
    previous = {s: signal.signal(s, _interrupt) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        report = fuzz(args, stack)
    except DemoFailure as exc:
        failure = str(exc)
    except (KubeError, urllib3.exceptions.HTTPError, OSError, TimeoutError, RuntimeError) as exc:
        failure = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    except Interrupted as exc:
        failure = f"interrupted ({exc})"
    finally:
        for sig in previous:  # a second signal must not abort the clean-up
            signal.signal(sig, signal.SIG_IGN)
        stack.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if report is not None:
        report["children_left"] = stack.survivors()
        if args.report:
            atomic_write_json(args.report, report)
        keys = ("requests", "server_errors", "crashes", "internal_errors", "unclear_errors", "timeouts")
        print("  ".join(f"{k}={report[k]}" for k in keys), f"wall_seconds={report['wall_seconds']}")
    if failure:
        print(f"fuzz failed: {failure} (logs in {workdir})", file=sys.stderr)
        return 1
    if not args.keep and not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--report", type=Path, default=None, help="write the JSON report here")
    parser.add_argument("--nodes", type=int, default=3, help="simulated (good) GPU nodes")
    parser.add_argument("--gpus-per-node", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2, help="Gunicorn workers (HAMI_WORKERS)")
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight")
    parser.add_argument("--max-body-bytes", type=int, default=1024 * 1024, help="HAMI_MAX_BODY_BYTES")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds before a request times out")
    parser.add_argument(
        "--hostile-rounds", type=int, default=10, help="rounds of the hostile verbs (sim.fuzz.hostile)"
    )
    parser.add_argument("--workdir", default="", help="keep the logs and state here (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir after the run")


COMMAND = Command(add_arguments, run)
