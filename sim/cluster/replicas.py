"""The scheduler extender's replicas in a chaos run: each one registration worker (`python -m workers`) plus
the chart's two Gunicorn servers (`wsgi:app`), sharing the replica's own `HAMI_STATE_DIR` (the pod's
emptyDir), electing a leader in acquire mode with a short Lease.

As the chart runs them (docs/security.md): the `extender` server (`HAMI_ROUTES=scheduler`: /filter, /bind,
/debug/state) requires kube-scheduler's client certificate (`HAMI_TLS_CLIENT_CA_FILE`); the `webhook`
server (`HAMI_ROUTES=public`: /webhook, /readyz, /metrics) takes anyone, and is Ready only while the
extender server accepts connections. Both serve TLS with one throwaway CA (sim.cluster.pki), on loopback.

A replica is "killed" the way a node failure or an OOM kill ends a pod's containers: SIGKILL to the process
group of its worker and of its Gunicorn master (which holds the Gunicorn workers), then reaped. It is
restarted later with the same name, port, state dir and identity (`POD_NAME`), as the kubelet restarts
the containers of the same pod. Each incarnation is a process of its own in the `Stack` (`worker-0`,
`worker-0.1`, ...), so its log and its PIDs are kept; killed incarnations leave the stack's live set, so
`Stack.check` only watches processes that should be running. The worker alone can be killed and restarted
too (`kill_worker`, `start_worker`: its container restarted, sim.chaos.stormfaults), as `worker-0.r1`, ...; a
lock keeps the storm's killer, its long faults and its two-leader faults from acting on one replica at once.

With `clocks=True` (a storm with two-leader faults, sim.chaos.twoleaders) every process of a replica runs
under `python -m sim.cluster.skewclock <replica>/clock-offset ...`, so the replica's wall clock can be stepped
(`step_clock`), and its worker can be stalled and continued (`pause_worker`, `resume_worker`: SIGSTOP and
SIGCONT to its process group).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import urllib3

from app.state.ledger import LEDGER_FILE, Ledger
from app.state.status import ReplicaStatus
from sim.cluster.pki import ChartPki
from sim.cluster.skewclock import write_offset
from sim.cluster.stack import PY, Stack, free_port, group_members
from sim.kit.kube import pool_manager, warnings_quiet

LEASE_NAME = "hami-scheduler"
LEASE_NAMESPACE = "default"


@dataclass(frozen=True)
class Election:
    lease_duration: int = 4
    renew_deadline: int = 3
    retry_period: int = 1


GUNICORN = [PY, "-m", "gunicorn", "-c", "config/gunicorn.conf.py", "wsgi:app"]
WORKER = [PY, "-m", "workers"]


@dataclass
class Replica:
    index: int
    port: int  # the webhook server's
    extender_port: int
    env: dict[str, str]  # the worker's; the servers' add theirs (`servers`)
    servers: dict[str, dict[str, str]] = field(default_factory=dict)  # extender, service -> environment
    incarnation: int = 0
    processes: list[str] = field(default_factory=list)  # the stack names of the running incarnation
    worker_restarts: int = 0
    clock: Path | None = (
        None  # the sim.cluster.skewclock offset file its processes read (None: the real clock)
    )

    @property
    def name(self) -> str:
        """Its identity (POD_NAME), as the Lease holder shows it."""
        return f"hami-scheduler-{self.index}"

    @property
    def url(self) -> str:
        """The webhook server: /webhook, /readyz (what the Services probe), /metrics."""
        return f"https://127.0.0.1:{self.port}"

    @property
    def extender_url(self) -> str:
        """The extender server: /filter, /bind, /debug/state, with kube-scheduler's client certificate."""
        return f"https://127.0.0.1:{self.extender_port}"

    @property
    def state_dir(self) -> Path:
        return Path(self.env["HAMI_STATE_DIR"])


class Replicas:
    def __init__(
        self,
        stack: Stack,
        count: int,
        workers: int,
        election: Election,
        extra_env: dict[str, str],
        pki: ChartPki,
        *,
        clocks: bool = False,
    ) -> None:
        self.stack = stack
        self.pki = pki
        ca = pki.server_ca_pem
        self.http = pool_manager(4, ca)  # what the Services and the probes use: no client certificate
        # what kube-scheduler presents; the harness reads /debug/state with it
        self.scheduler_http = pool_manager(4, ca, client_cert=(str(pki.client[0]), str(pki.client[1])))
        self.lock = threading.RLock()  # one kill, restart or start at a time
        self.items: list[Replica] = []
        for index in range(count):
            home = stack.workdir / f"replica-{index}"
            port, extender_port = free_port(), free_port()
            env = {
                **os.environ,
                "KUBECONFIG": str(stack.kubeconfig),
                "HAMI_STATE_DIR": str(home / "state"),
                "PROMETHEUS_MULTIPROC_DIR": str(home / "prometheus-worker"),
                "HAMI_WORKER_METRICS_BIND": "127.0.0.1:0",
                "HAMI_REGISTRATION_INTERVAL": "2s",
                "HAMI_LOG_LEVEL": "WARNING",
                "HAMI_LEADER_ELECT": "true",
                "HAMI_LEADER_ELECT_MODE": "acquire",
                "HAMI_LEADER_ELECT_RESOURCE_NAME": LEASE_NAME,
                "HAMI_LEADER_ELECT_RESOURCE_NAMESPACE": LEASE_NAMESPACE,
                "HAMI_LEASE_DURATION": f"{election.lease_duration}s",
                "HAMI_RENEW_DEADLINE": f"{election.renew_deadline}s",
                "HAMI_RETRY_PERIOD": f"{election.retry_period}s",
                "POD_NAME": f"hami-scheduler-{index}",
                **extra_env,
            }
            env.pop("POD_NAMESPACE", None)  # no scheduler-role labels: there are no replica pods to label
            tls = {"HAMI_TLS_CERT_FILE": str(pki.server[0]), "HAMI_TLS_KEY_FILE": str(pki.server[1])}
            extender_metrics = str(home / "prometheus-extender")
            servers = {
                "extender": {
                    **env,
                    **tls,
                    "HAMI_ROUTES": "scheduler",
                    "HAMI_BIND": f"127.0.0.1:{extender_port}",
                    "HAMI_WORKERS": str(workers),
                    "HAMI_TLS_CLIENT_CA_FILE": str(pki.client_ca),
                    "PROMETHEUS_MULTIPROC_DIR": extender_metrics,
                },
                "service": {
                    **env,
                    **tls,
                    "HAMI_ROUTES": "public",
                    "HAMI_BIND": f"127.0.0.1:{port}",
                    "HAMI_WORKERS": "1",  # the chart's two only cost CPU here
                    "HAMI_EXTENDER_ADDRESS": f"127.0.0.1:{extender_port}",
                    "HAMI_EXTENDER_METRICS_DIR": extender_metrics,
                    "PROMETHEUS_MULTIPROC_DIR": str(home / "prometheus"),
                },
            }
            for folder in [
                env["PROMETHEUS_MULTIPROC_DIR"],
                *(e["PROMETHEUS_MULTIPROC_DIR"] for e in servers.values()),
            ]:
                Path(folder).mkdir(parents=True, exist_ok=True)
            clock = home / "clock-offset" if clocks else None
            self.items.append(Replica(index, port, extender_port, env, servers, clock=clock))

    @property
    def urls(self) -> list[str]:
        return [r.url for r in self.items]

    @property
    def extender_urls(self) -> list[str]:
        return [r.extender_url for r in self.items]

    def close(self) -> None:
        self.http.clear()
        self.scheduler_http.clear()

    def start(self, replica: Replica) -> None:
        with self.lock:
            suffix = f".{replica.incarnation}" if replica.incarnation else ""
            worker = f"worker-{replica.index}{suffix}"
            self.stack.start(worker, _argv(replica, WORKER), replica.env)
            replica.processes = [worker]
            for server, env in replica.servers.items():
                name = f"{server}-{replica.index}{suffix}"
                self.stack.start(name, _argv(replica, GUNICORN), env)
                replica.processes.append(name)

    def _kill(self, name: str) -> None:
        process = self.stack.processes.pop(name, None)
        if process is None:
            return
        self.stack.pids[name] = sorted(set(self.stack.pids[name]) | set(group_members(process.pid)))
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.stop(timeout=5.0)

    def kill(self, replica: Replica) -> None:
        """SIGKILL the replica's containers (process groups), reap them, keep their PIDs on record."""
        with self.lock:
            for name in replica.processes:
                self._kill(name)
            replica.processes = []
            replica.incarnation += 1

    def kill_worker(self, replica: Replica) -> bool:
        """SIGKILL the replica's registration worker alone (False: the replica is not running)."""
        with self.lock:
            if not replica.processes or not replica.processes[0]:
                return False
            self._kill(replica.processes[0])
            replica.processes[0] = ""
            return True

    def start_worker(self, replica: Replica) -> None:
        """Start the worker killed by `kill_worker` again, unless the whole replica was killed meanwhile."""
        with self.lock:
            if not replica.processes or replica.processes[0]:
                return
            replica.worker_restarts += 1
            suffix = f".{replica.incarnation}" if replica.incarnation else ""
            name = f"worker-{replica.index}{suffix}.r{replica.worker_restarts}"
            self.stack.start(name, _argv(replica, WORKER), replica.env)
            replica.processes[0] = name

    def step_clock(self, replica: Replica, seconds: float) -> None:
        """Set the replica's wall clock `seconds` behind the real one (0: back to it)."""
        if replica.clock is None:
            raise RuntimeError(f"{replica.name} runs on the real clock (Replicas(clocks=True) steps it)")
        write_offset(replica.clock, seconds)

    def pause_worker(self, replica: Replica) -> bool:
        """SIGSTOP the replica's registration worker (False: it is not running)."""
        return self._signal_worker(replica, signal.SIGSTOP)

    def resume_worker(self, replica: Replica) -> bool:
        """SIGCONT the worker `pause_worker` stopped."""
        return self._signal_worker(replica, signal.SIGCONT)

    def _signal_worker(self, replica: Replica, sig: signal.Signals) -> bool:
        with self.lock:
            process = self.stack.processes.get(replica.processes[0]) if replica.processes else None
            if process is None:
                return False
            try:
                os.killpg(process.pid, sig)
            except (ProcessLookupError, PermissionError):
                return False
            return True

    def running(self, replica: Replica) -> bool:
        return bool(replica.processes)

    def names(self) -> list[str]:
        """The stack names of every running incarnation (for stopping them)."""
        return [name for r in self.items for name in r.processes if name]

    def ready(self, replica: Replica) -> bool:
        """Its /readyz answers 200 (the Service would route to it)."""
        if not replica.processes:
            return False
        try:
            with warnings_quiet():
                response = self.http.request(
                    "GET", f"{replica.url}/readyz", timeout=urllib3.Timeout(total=1.0)
                )
        except urllib3.exceptions.HTTPError:
            return False
        return response.status == 200

    def ready_ones(self) -> list[Replica]:
        return [r for r in self.items if self.ready(r)]

    def standing_by(self, replica: Replica) -> bool:
        """Running, and its registration worker's loop is alive (a fresh heartbeat in its status rows):
        it can take over the Lease when the leader dies."""
        return bool(replica.processes) and all(replica.processes) and self.heartbeat(replica) > 0

    def heartbeat(self, replica: Replica) -> float:
        """The last heartbeat (unix seconds) its registration worker wrote; 0 for none or a stale one."""
        if not (replica.state_dir / LEDGER_FILE).exists():
            return 0.0
        ledger = Ledger(replica.state_dir)
        try:
            status = ReplicaStatus.from_rows(ledger.status())
        finally:
            ledger.close()
        return status.heartbeat if status.heartbeat_fresh(time.time()) else 0.0


def _argv(replica: Replica, argv: list[str]) -> list[str]:
    """`argv` (`python -m MODULE ...`), under sim.cluster.skewclock when the replica's clock can be
    stepped."""
    if replica.clock is None:
        return list(argv)
    return [PY, "-m", "sim.cluster.skewclock", str(replica.clock), *argv[2:]]
