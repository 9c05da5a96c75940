"""The demo's cluster as child processes: start each actor, wait for it, check it is alive, stop all by PID.

`start_cluster` brings up, in this order and each waited for: the API emulator (`python -m sim.apiserver`),
the simulated GPU nodes (`python -m sim nodes`), the registration worker (`python -m workers`), our service
(`gunicorn -c config/gunicorn.conf.py wsgi:app`, Ready with every node registered) and the simulated
kube-scheduler (`python -m sim scheduler`). `Stack.stop` ends them in reverse dependency order through
`sim.processes` (SIGTERM to the PID, SIGKILL to its process group after a grace period) and remembers every
PID it saw — Gunicorn's workers included — so a caller can check that none survived.
"""

from __future__ import annotations

import argparse
import os
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import orjson

from sim.kube import Kube, pool_manager
from sim.processes import ChildProcess, start_process, wait_for_http

REPO_ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
STOP_PHASES = (("scheduler", "nodes"), ("service", "worker"), ("apiserver",))


class DemoFailure(Exception):
    """The infrastructure failed; the message is the one line the demo prints."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def group_members(pid: int) -> list[int]:
    """PIDs of the process group `pid` leads (Gunicorn's workers), read from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) == pid:
                members.append(int(entry.name))
    return sorted(members)


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


class Stack:
    """The child processes of one demo run and where they keep their files."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.kubeconfig = workdir / "kubeconfig"
        self.processes: dict[str, ChildProcess] = {}
        self.pids: dict[str, list[int]] = {}
        self.service_url = ""
        self.kube: Kube | None = None
        self.http = pool_manager(4, timeout=30.0)  # to our service (trusting its CA once it serves HTTPS)
        self.ca_file: Path | None = None

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> ChildProcess:
        process = start_process(argv, log_path=self.workdir / f"{name}.log", env=env, cwd=REPO_ROOT)
        self.processes[name] = process
        self.pids[name] = [process.pid]
        return process

    def check(self) -> None:
        for name, process in self.processes.items():
            if not process.alive():
                tail = process.log_tail(5).replace("\n", " | ")
                raise DemoFailure(f"{name} (pid {process.pid}) exited with {process.returncode}: {tail}")

    def _stop_one(self, name: str) -> None:
        process = self.processes.get(name)
        if process is None:
            return
        if process.alive():
            self.pids[name] = sorted(set(self.pids[name]) | set(group_members(process.pid)))
        process.stop(timeout=10.0)
        del self.processes[name]  # only once stopped: an interrupted stop is repeated later

    def stop(self, *names: str) -> None:
        """Stop the named processes (all, without names: clients first, the emulator last)."""
        for phase in [names] if names else STOP_PHASES:
            threads = [threading.Thread(target=self._stop_one, args=(n,)) for n in phase]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        if not names:
            self.http.clear()
            if self.kube is not None:
                self.kube.close()
                self.kube = None

    def survivors(self) -> list[int]:
        return [pid for pids in self.pids.values() for pid in pids if pid_alive(pid)]


def wait_until(
    what: str, predicate: Callable[[], bool], timeout: float, stack: Stack, step: float = 0.2
) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        stack.check()
        if time.monotonic() > deadline:
            raise DemoFailure(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(step)


def flags(**options: object) -> list[str]:
    """`--some-option value` pairs from keyword arguments (underscores become dashes)."""
    return [item for key, value in options.items() for item in (f"--{key.replace('_', '-')}", str(value))]


def serve_tls(stack: Stack, env: dict[str, str]) -> None:
    """A throwaway CA and server certificate for the service (HAMI_TLS_CERT_FILE/KEY_FILE); the stack's
    HTTP client and the scheduler (`--ca-file`) trust the CA, as kube-scheduler's tlsConfig.caFile would."""
    from sim.apiserver import tls

    certs = tls.generate(["127.0.0.1", "localhost"])
    folder = stack.workdir / "tls"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tls.crt").write_bytes(certs.cert_pem + certs.ca_pem)
    (folder / "tls.key").write_bytes(certs.key_pem)
    (folder / "ca.crt").write_bytes(certs.ca_pem)
    env.update({"HAMI_TLS_CERT_FILE": str(folder / "tls.crt"), "HAMI_TLS_KEY_FILE": str(folder / "tls.key")})
    stack.ca_file = folder / "ca.crt"
    stack.http.clear()
    stack.http = pool_manager(4, certs.ca_pem, timeout=30.0)
    stack.service_url = stack.service_url.replace("http://", "https://")


def start_cluster(
    args: argparse.Namespace,
    stack: Stack,
    *,
    scheduler: bool = True,
    service_env: Mapping[str, str] | None = None,
) -> Kube:
    """Emulator, nodes, worker, service (waited for until Ready with every node) and scheduler.

    `args` needs: nodes, seed, gpus_per_node, zones, allocate_latency, workers, tls, unschedulable_timeout,
    max_unschedulable (the demo's options). `scheduler=False` leaves the simulated kube-scheduler out (the
    caller plays it); `service_env` adds to or overrides the worker's and the service's environment. The
    API client returned is also `stack.kube`.
    """
    stack.kubeconfig.unlink(missing_ok=True)  # a reused work dir: never read the last run's URL
    emulator = stack.start(
        "apiserver", [PY, "-m", "sim.apiserver", *flags(port=0, kubeconfig=stack.kubeconfig)]
    )
    wait_until("the API emulator's kubeconfig", stack.kubeconfig.exists, 30, stack, 0.05)
    kube = stack.kube = Kube.from_kubeconfig(stack.kubeconfig, pool_size=16)
    wait_for_http(f"{kube.config.server}/version", timeout=30, process=emulator)
    node_flags = flags(
        kubeconfig=stack.kubeconfig,
        nodes=args.nodes,
        seed=args.seed,
        gpus_per_node=args.gpus_per_node,
        zones=args.zones,
        allocate_latency=args.allocate_latency,
        stats=stack.workdir / "nodes-stats.json",
    )
    stack.start("nodes", [PY, "-m", "sim", "nodes", *node_flags])
    wait_until(
        f"{args.nodes} simulated nodes",
        lambda: len(kube.list("/api/v1/nodes", labelSelector="sim.hami.io/node=true")[1]) >= args.nodes,
        60,
        stack,
    )
    port = free_port()
    stack.service_url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "KUBECONFIG": str(stack.kubeconfig),
        "HAMI_STATE_DIR": str(stack.workdir / "state"),
        "HAMI_REGISTRATION_INTERVAL": "2s",
        "HAMI_WORKER_METRICS_BIND": "127.0.0.1:0",
        "HAMI_LOG_LEVEL": "WARNING",
        "HAMI_BIND": f"127.0.0.1:{port}",
        "HAMI_WORKERS": str(args.workers),
        "PROMETHEUS_MULTIPROC_DIR": str(stack.workdir / "prometheus"),
        **(service_env or {}),
    }
    if args.tls:
        serve_tls(stack, env)
    stack.start("worker", [PY, "-m", "workers"], env)
    service = stack.start("service", [PY, "-m", "gunicorn", "-c", "config/gunicorn.conf.py", "wsgi:app"], env)
    context = ssl.create_default_context(cafile=str(stack.ca_file)) if stack.ca_file else None
    wait_for_http(f"{stack.service_url}/healthz", timeout=60, process=service, ssl_context=context)
    http = stack.http

    def ready() -> bool:
        if http.request("GET", f"{stack.service_url}/readyz").status != 200:
            return False
        state = orjson.loads(http.request("GET", f"{stack.service_url}/debug/state").data)
        return bool(state.get("nodes", 0) >= args.nodes)

    wait_until("the service to be ready with every node registered", ready, 90, stack, 0.25)
    if not scheduler:
        return kube
    scheduler_flags = flags(
        kubeconfig=stack.kubeconfig,
        extender=stack.service_url,
        stats=stack.workdir / "scheduler-stats.json",
        unschedulable_timeout=args.unschedulable_timeout,
        max_unschedulable=args.max_unschedulable,
    )
    if stack.ca_file is not None:
        scheduler_flags += flags(ca_file=stack.ca_file)
    stack.start("scheduler", [PY, "-m", "sim", "scheduler", *scheduler_flags])
    return kube
