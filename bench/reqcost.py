"""`python -m bench.reqcost`: the service's CPU per HTTP request, by kind (issue 20).

The fixed cost of one request through Gunicorn (gthread, TLS, keep-alive), Flask, the request metrics and
our hooks, measured the way the service runs: `gunicorn -c config/gunicorn.conf.py wsgi:app` from `--tree`
(this checkout by default; a `git archive` copy of another commit for a before/after), one worker, TLS with
a throwaway certificate, the API emulator in this process as its cluster. One client sends `--requests`
keep-alive requests of each kind on one connection and reads the CPU of the Gunicorn master and its
workers from /proc before and after:

- `noop`: POST /bench/noop with an ExtenderArgs of a GPU pod and 1,000 NodeNames (the floor of /filter);
- `healthz`: GET /healthz;
- `webhook`: POST /webhook, an AdmissionReview CREATE of a GPU pod (mutated: the JSON Patch path).

The kinds alternate over `--rounds` rounds; the median CPU µs per request of each kind is printed as one
JSON object. The client's own CPU (and the emulator's) is not in the figure. On a shared machine run it
under the benchmark lock and compare trees by alternating runs.

`--client`: the other side, our API client's CPU per call (app/k8s/objects.py and exchange.py: the
request, TLS, reading the answer), measured by the client itself (`time.process_time`) in a child process
of `--tree`, against the API emulator over TLS in this process: `get` (a pod), `patch` (a pod's
annotations), `event` (an Event POST), `list` (the LIST of the 7 pods on a node that /bind makes).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from bench import procs
from sim.emulator.testing import EmulatorOptions, node, pod, run_emulator
from sim.emulator.tls import generate
from sim.kit.processes import ChildProcess, start_process

REPO = Path(__file__).resolve().parents[1]
Request = tuple[str, str, bytes, dict[str, str]]


def gpu_pod(name: str) -> dict[str, Any]:
    """A GPU pod as the API server hands it to admission (defaulted, a few labels and env entries)."""
    container = {
        "name": "main",
        "image": "nvcr.io/nvidia/cuda:12.4.0-base-ubuntu22.04",
        "command": ["sleep", "infinity"],
        "env": [{"name": f"VAR_{i}", "value": f"value-{i}"} for i in range(5)],
        "resources": {
            "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000", "cpu": "1", "memory": "1Gi"},
            "requests": {"cpu": "1", "memory": "1Gi"},
        },
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "bench", "run": name}},
        "spec": {
            "schedulerName": "default-scheduler",
            "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst",
            "terminationGracePeriodSeconds": 30,
            "containers": [container],
            "tolerations": [
                {"key": k, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
                for k in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
            ],
        },
    }


def requests(nodes: int) -> dict[str, Request]:
    """The request of each kind: (method, path, body, headers)."""
    pod = gpu_pod("bench-pod")
    names = orjson.dumps([f"node-{i:05d}" for i in range(nodes)])
    noop = b'{"Pod":' + orjson.dumps(pod) + b',"Nodes":null,"NodeNames":' + names + b"}"
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "bench-000001",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "bench-pod",
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:default:bench"},
            "object": pod,
            "dryRun": False,
        },
    }
    json_headers = {"Content-Type": "application/json"}
    return {
        "noop": ("POST", "/bench/noop", noop, json_headers),
        "healthz": ("GET", "/healthz", b"", {}),
        "webhook": ("POST", "/webhook", orjson.dumps(review), json_headers),
    }


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of `pid` and its direct children (the Gunicorn master and workers)."""
    return sum(procs.cpu_seconds(p) or 0.0 for p in (pid, *procs.children(pid)))


def send(connection: http.client.HTTPSConnection, request: Request) -> None:
    method, path, body, headers = request
    connection.request(method, path, body=body or None, headers=headers)
    answer = connection.getresponse()
    data = answer.read()
    decoded = orjson.loads(data) if data.startswith(b"{") else {}
    if answer.status != 200 or decoded.get("Error") or decoded.get("response", {}).get("allowed") is False:
        raise RuntimeError(f"{method} {path}: HTTP {answer.status}: {data[:300]!r}")


def measure(
    connection: http.client.HTTPSConnection, cpu: Callable[[], float], request: Request, count: int
) -> float:
    """CPU µs per request of the server over `count` requests (the CPU counters tick every 10 ms: use
    enough requests for a few hundred ticks)."""
    time.sleep(0.2)  # let the previous kind's last ticks land
    before = cpu()
    for _ in range(count):
        send(connection, request)
    time.sleep(0.2)
    return (cpu() - before) / count * 1e6


def serve(
    tree: Path, config: str, workdir: Path, kubeconfig: Path, port: int
) -> tuple[ChildProcess, ssl.SSLContext]:
    certs = generate(["127.0.0.1"])
    (workdir / "tls.crt").write_bytes(certs.cert_pem)
    (workdir / "tls.key").write_bytes(certs.key_pem)
    (workdir / "prometheus").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HAMI_")}
    env.update(
        {
            "HAMI_BIND": f"127.0.0.1:{port}",
            "HAMI_WORKERS": "1",
            "HAMI_THREADS": "4",
            "HAMI_ROUTES": "all",
            "HAMI_BENCH_NOOP": "1",
            "HAMI_STATE_DIR": str(workdir / "state"),
            "HAMI_TLS_CERT_FILE": str(workdir / "tls.crt"),
            "HAMI_TLS_KEY_FILE": str(workdir / "tls.key"),
            "HAMI_LOG_LEVEL": "WARNING",
            "KUBECONFIG": str(kubeconfig),
            "PROMETHEUS_MULTIPROC_DIR": str(workdir / "prometheus"),
        }
    )
    python = tree / ".venv" / "bin" / "python"
    argv = [str(python), "-m", "gunicorn", "-c", config, "wsgi:app"]
    process = start_process(argv, log_path=workdir / "gunicorn.log", env=env, cwd=tree)
    context = ssl.create_default_context(cadata=certs.ca_pem.decode())
    return process, context


def connect(port: int, context: ssl.SSLContext, process: ChildProcess) -> http.client.HTTPSConnection:
    deadline = time.monotonic() + 120.0
    while True:
        connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)
        try:
            send(connection, ("GET", "/healthz", b"", {}))
            return connection
        except (OSError, RuntimeError, http.client.HTTPException):
            connection.close()
            if not process.alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the service did not answer:\n{process.log_tail()}") from None
            time.sleep(0.2)


def run(tree: Path, config: str, count: int, rounds: int, nodes: int, only: list[str]) -> dict[str, float]:
    kinds = {kind: request for kind, request in requests(nodes).items() if not only or kind in only}
    samples: dict[str, list[float]] = {kind: [] for kind in kinds}
    with tempfile.TemporaryDirectory(prefix="reqcost-") as folder:
        workdir = Path(folder)
        with run_emulator(workdir / "emulator") as emulator:
            port = 20000 + os.getpid() % 20000
            process, context = serve(tree, config, workdir, emulator.kubeconfig, port)
            try:
                connection = connect(port, context, process)
                for request in kinds.values():  # warm-up: first-call imports and caches
                    for _ in range(max(20, count // 10)):
                        send(connection, request)
                for _ in range(rounds):
                    for kind, request in kinds.items():
                        samples[kind].append(
                            measure(connection, lambda: tree_cpu(process.pid), request, count)
                        )
                connection.close()
            finally:
                process.stop()
    return {kind: round(statistics.median(values), 1) for kind, values in samples.items()}


def client_calls(kubeconfig: str, count: int, rounds: int) -> dict[str, float]:
    """Our client's CPU µs per call of each kind (run in the process that makes the calls)."""
    from app.k8s import objects
    from app.k8s.client import connect as connect_client

    kube = connect_client(kubeconfig)
    event = {"metadata": {"generateName": "p0.", "namespace": "default"}, "reason": "Bench", "type": "Normal"}
    event["involvedObject"] = {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "p0"}
    kinds: dict[str, Callable[[], object]] = {
        "get": lambda: objects.get_pod(kube, "default", "p0"),
        "patch": lambda: objects.patch_pod_metadata(kube, "default", "p0", {"bench": "1"}),
        "event": lambda: objects.create_event(kube, "default", event),
        "list": lambda: objects.pods_on_node(kube, "node-1"),
    }
    samples: dict[str, list[float]] = {kind: [] for kind in kinds}
    for call in kinds.values():  # warm-up: connections, imports, caches
        for _ in range(max(20, count // 10)):
            call()
    for _ in range(rounds):
        for kind, call in kinds.items():
            before = time.process_time()
            for _ in range(count):
                call()
            samples[kind].append((time.process_time() - before) / count * 1e6)
    kube.close()
    return {kind: round(statistics.median(values), 1) for kind, values in samples.items()}


def run_client(tree: Path, count: int, rounds: int) -> dict[str, float]:
    """`client_calls` in a child process running `tree`'s app/ (this file as the script, so that a tree
    without it can be measured), against the emulator over TLS in this process."""
    with (
        tempfile.TemporaryDirectory(prefix="reqcost-") as folder,
        run_emulator(Path(folder), options=EmulatorOptions(tls=True)) as emulator,
    ):
        emulator.seed([node("node-1"), *(pod(f"p{i}", node_name="node-1") for i in range(7))])
        argv = [str(tree / ".venv" / "bin" / "python"), __file__, "--calls-of", str(emulator.kubeconfig)]
        argv += ["--requests", str(count), "--rounds", str(rounds)]
        env = {**os.environ, "PYTHONPATH": str(tree)}
        done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"the client failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reqcost", description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=REPO, help="the checkout whose service runs")
    parser.add_argument("--requests", type=int, default=1000, help="requests of each kind per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--config", default="config/gunicorn.conf.py", help="Gunicorn config, in --tree")
    parser.add_argument("--kind", action="append", default=[], help="only these kinds (repeatable)")
    parser.add_argument("--nodes", type=int, default=1000, help="NodeNames in the /bench/noop body")
    parser.add_argument("--client", action="store_true", help="our API client's CPU per call instead")
    parser.add_argument("--calls-of", default="", help=argparse.SUPPRESS)  # the child of --client
    args = parser.parse_args(argv)
    if args.calls_of:
        json.dump(client_calls(args.calls_of, args.requests, args.rounds), sys.stdout)
        return 0
    if args.client:
        calls = run_client(args.tree.resolve(), args.requests, args.rounds)
        json.dump({"tree": str(args.tree), "client_cpu_us_per_call": calls}, sys.stdout)
        print()
        return 0
    result = run(args.tree.resolve(), args.config, args.requests, args.rounds, args.nodes, args.kind)
    json.dump({"tree": str(args.tree), "cpu_us_per_request": result}, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
