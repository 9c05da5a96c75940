"""A run's cluster as child processes: start each actor, wait for it, check it is alive, stop all by PID.

`Stack` holds the run's control plane (`sim.controlplane`) and every other process it starts (nodes, worker,
service; `sim.cluster.build.build` starts them in order). `Stack.stop` ends them in reverse dependency
order through
`sim.kit.processes` (SIGTERM to the PID, SIGKILL to its process group after a grace period) and remembers
every PID it saw — Gunicorn's workers included — so a caller can check that none survived.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import yaml

from sim.cluster.image import BUILDAH, ImageRunner, container_process
from sim.cluster.spec import ClusterSpec
from sim.controlplane import ControlPlane, SchedulerSpec, make_control_plane
from sim.kit.kube import Kube, pool_manager
from sim.kit.processes import ChildProcess, start_process
from sim.nodes.twobackends import TWO_BACKEND_SECTIONS
from sim.nodes.vendors import parse_vendors

REPO_ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
STOP_PHASES = (("scheduler", "nodes"), ("service", "extender", "worker"))


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
    """The child processes of one run, its control plane, and where they keep their files."""

    def __init__(self, workdir: Path, image: str = "") -> None:
        self.workdir = workdir
        # with an image, our containers run from it (sim.cluster.image, real control plane only)
        self.image = ImageRunner(image) if image else None
        self.kubeconfig = workdir / "kubeconfig"
        self.processes: dict[str, ChildProcess] = {}
        self.pids: dict[str, list[int]] = {}
        self.service_url = ""
        self.kube: Kube | None = None
        self.http = pool_manager(4, timeout=30.0)  # to our service (trusting its CA once it serves HTTPS)
        self.ca_file: Path | None = None
        self.control_plane: ControlPlane | None = None
        self.replica_urls: list[str] = []  # our replicas' service URLs (the first is also service_url)
        # replica URL -> its server of kube-scheduler's verbs, where the chart's layout serves them apart
        # (/filter, /bind, /debug/state; issue 11); a replica not listed serves every route
        self.extender_urls: dict[str, str] = {}
        self.closers: list[Callable[[], None]] = []  # in-process helpers to stop before the control plane
        self._recipes: dict[str, tuple[list[str], dict[str, str] | None]] = {}

    def extender_http(self) -> tuple[Any, str]:
        """A connection pool presenting kube-scheduler's client certificate (the extender listener serves
        /filter, /bind and /debug/state to it alone), and the URL of the first replica's extender server.
        The caller clears the pool."""
        client = self.workdir / "kube-scheduler-client"
        assert self.ca_file is not None
        http = pool_manager(
            1, self.ca_file.read_bytes(), client_cert=(str(client / "tls.crt"), str(client / "tls.key"))
        )
        return http, self.extender_urls.get(self.service_url, self.service_url)

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> ChildProcess:
        process = start_process(argv, log_path=self.workdir / f"{name}.log", env=env, cwd=REPO_ROOT)
        if self.image is not None and argv[:2] == [BUILDAH, "run"]:
            process.term_target = container_process  # SIGTERM to the container, as a kubelet sends it
        self.processes[name] = process
        self.pids[name] = [*self.pids.get(name, []), process.pid]
        self._recipes[name] = (list(argv), env)
        return process

    def restart(self, name: str) -> ChildProcess:
        """Start `name` again as it was started last (a container restarted in the same pod)."""
        old = self.processes.get(name)
        if old is not None:
            old.stop(timeout=5.0)
        argv, env = self._recipes[name]
        return self.start(name, argv, env)

    def start_control_plane(
        self,
        kind: str,
        workload_api: bool = False,
        controller_manager: bool = True,
        kubelet_deletions: bool = False,
    ) -> ControlPlane:
        """Start the emulator or the real control plane (etcd, kube-apiserver, kube-controller-manager unless
        `controller_manager` is False) and keep it in the stack; `workload_api`: with Kubernetes' Workload
        API and gang scheduling (real, >= 1.37); `kubelet_deletions`: the emulator leaves graceful pod
        deletions to the kubelets (sim.controlplane.make_control_plane)."""
        try:
            self.control_plane = make_control_plane(
                kind, self.workdir, workload_api, controller_manager, kubelet_deletions
            )
        except ValueError as exc:
            raise DemoFailure(f"the {kind} control plane cannot start: {exc}") from None
        try:
            self.control_plane.start()
        except (RuntimeError, OSError) as exc:
            raise DemoFailure(f"the {kind} control plane did not start: {exc}") from None
        finally:
            self._note_control_plane()
        self.kube = Kube.from_kubeconfig(self.control_plane.kubeconfig, pool_size=16)
        return self.control_plane

    def start_scheduler(self, spec: SchedulerSpec) -> ChildProcess:
        if self.control_plane is None:
            raise DemoFailure("no control plane to run a scheduler on")
        try:
            return self.control_plane.start_scheduler(spec)
        except (RuntimeError, OSError) as exc:
            raise DemoFailure(f"{spec.name} did not start: {exc}") from None
        finally:
            self._note_control_plane()

    def _note_control_plane(self) -> None:
        for name, process in (self.control_plane.processes() if self.control_plane else {}).items():
            self.pids[name] = sorted(set(self.pids.get(name, [])) | {process.pid})

    def all_processes(self) -> dict[str, ChildProcess]:
        planes = self.control_plane.processes() if self.control_plane else {}
        return {**planes, **self.processes}

    def check(self) -> None:
        for name, process in self.all_processes().items():
            if not process.alive():
                tail = process.log_tail(5).replace("\n", " | ")
                raise DemoFailure(f"{name} (pid {process.pid}) exited with {process.returncode}: {tail}")

    def _stop_one(self, name: str) -> None:
        process = self.processes.get(name)
        if process is None:
            if self.control_plane is not None and name in self.control_plane.processes():
                self._note_control_plane()
                self.control_plane.stop_process(name)
            return
        if process.alive():
            self.pids[name] = sorted(set(self.pids[name]) | set(group_members(process.pid)))
        process.stop(timeout=10.0)
        del self.processes[name]  # only once stopped: an interrupted stop is repeated later

    def stop(self, *names: str) -> None:
        """Stop the named processes (all, without names: clients first, the control plane last)."""
        for phase in [names] if names else STOP_PHASES:
            threads = [threading.Thread(target=self._stop_one, args=(n,)) for n in phase]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        if not names:
            for name in list(self.processes):  # anything else started under another name
                self._stop_one(name)
            while self.closers:
                self.closers.pop()()
            if self.control_plane is not None:
                self._note_control_plane()
                self.control_plane.stop()
            self.http.clear()
            if self.kube is not None:
                self.kube.close()
                self.kube = None
            if self.image is not None:  # last: its processes are gone, and a failure here stops nothing else
                self.image.close()

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
    from sim.emulator import tls

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


def service_ready(stack: Stack, nodes: int) -> bool:
    """Our service answers /readyz 200 and its state has `nodes` nodes registered."""
    http = stack.http
    if http.request("GET", f"{stack.service_url}/readyz").status != 200:
        return False
    debug = stack.extender_urls.get(stack.service_url, stack.service_url)
    state = orjson.loads(http.request("GET", f"{debug}/debug/state").data)
    return bool(state.get("nodes", 0) >= nodes)


def device_config(vendors: str) -> tuple[dict[str, Any], frozenset[str]]:
    """The device-config.yaml sections and the HAMI_ENABLE_* families (lower case) a cluster of these node
    kinds runs with (sim.nodes.vendors; HAMi's chart values); ({}, {}) for NVIDIA alone: the chart's
    defaults."""
    parts = {part for kind in parse_vendors(vendors) for part in kind}
    if parts <= {"nvidia"}:
        return {}, frozenset()
    sections: dict[str, Any] = {"nvidia": {"resourceCountName": "nvidia.com/gpu"}}
    for part, section, count in (
        ("hygon", "hygon", "hygon.com/dcunum"),
        ("cambricon", "cambricon", "cambricon.com/vmlu"),
        ("mthreads", "mthreads", "mthreads.com/vgpu"),
        ("awsneuron", "awsneuron", "aws.amazon.com/neuron"),
        ("amd", "amd", "amd.com/gpu"),
        ("vastai", "vastai", "vastaitech.com/va"),
        ("biren", "biren", "birentech.com/gpu"),
    ):
        if part in parts:
            sections[section] = {"resourceCountName": count}
    for section, values in TWO_BACKEND_SECTIONS.items():
        if any(part.startswith(section) for part in parts):
            sections[section] = dict(values)
    families = {"ascend"} if any(part.startswith("ascend") for part in parts) else set()
    if "iluvatar" in parts:
        families.add("iluvatar")
    return sections, frozenset(families)


def vendor_env(vendors: str, workdir: Path) -> dict[str, str]:
    """The worker's and the service's settings for a cluster of these node kinds (sim.nodes.vendors): a
    device-config.yaml with the sections of the vendors present (HAMi's chart values) and Ascend's switch."""
    sections, families = device_config(vendors)
    if not sections:
        return {}
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "device-config.yaml"
    path.write_text(yaml.safe_dump(sections), encoding="utf-8")
    env = {"HAMI_DEVICE_CONFIG_FILE": str(path)}
    if "ascend" in families:
        env["HAMI_ENABLE_ASCEND"] = "true"  # the chart's seven chips (devices.ascend.enabled)
    if "iluvatar" in families:
        env["HAMI_ENABLE_ILUVATAR"] = "true"  # the chart's four chips (devices.iluvatar.enabled)
    return env


CHART_SECTIONS = (  # sim.nodes.vendors part prefix -> the chart's devices.<section> (HAMi's chart values)
    *("ascend", "hygon", "cambricon", "mthreads", "awsneuron", "amd", "vastai", "biren"),
    *("metax", "iluvatar", "kunlun", "enflame"),
)


def vendor_values(vendors: str) -> dict[str, Any]:
    """The chart values for a cluster of these node kinds on the real control plane: what `vendor_env` is
    for the emulator, but through the chart (`devices.<vendor>.enabled`: its device-config section, its
    switch and kube-scheduler's managedResources), as an operator enables them."""
    parts = {part for kind in parse_vendors(vendors) for part in kind}
    enabled = {section for section in CHART_SECTIONS for part in parts if part.startswith(section)}
    return {"devices": {section: {"enabled": True} for section in sorted(enabled)}} if enabled else {}


def start_nodes(
    stack: Stack, spec: ClusterSpec, kubeconfig: Path, *extra: str, timeout: float = 60
) -> ChildProcess:
    """The spec's simulated GPU nodes (`python -m sim nodes`, as `kubeconfig`'s user; `extra`: more of its
    flags), waited for until every node exists; with `--no-register` (the caller created the Node objects,
    as the benchmark does in bulk) until their kubelets and device plugins report ready. Returns the
    process."""
    node_flags = flags(
        kubeconfig=kubeconfig,
        nodes=spec.nodes,
        seed=spec.seed,
        gpus_per_node=spec.gpus_per_node,
        zones=spec.zones,
        allocate_latency=spec.allocate_latency,
        grace_scale=spec.grace_scale,
        grace_cap=spec.grace_cap,
        mig_nodes=spec.mig_nodes,
        stats=stack.workdir / "nodes-stats.json",
        vendors=spec.vendors,
    )
    process = stack.start("nodes", [PY, "-m", "sim", "nodes", *extra, *node_flags])
    if "--no-register" in extra:
        wait_until(
            "the simulated kubelets", lambda: "nodes ready" in process.log_tail(5), timeout, stack, 0.1
        )
        return process
    assert stack.kube is not None
    kube = stack.kube
    wait_until(
        f"{spec.nodes} simulated nodes",
        lambda: len(kube.list("/api/v1/nodes", labelSelector="sim.hami.io/node=true")[1]) >= spec.nodes,
        timeout,
        stack,
    )
    return process
