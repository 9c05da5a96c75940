"""The real control plane on loopback: etcd, kube-apiserver, kube-controller-manager and kube-scheduler
built by `make kube`.

Started the way envtest and kwokctl's binary runtime do it, without kubelets: etcd (`/health`), then
kube-apiserver (`/readyz` as admin), then (unless `controller_manager=False`) kube-controller-manager with
the few controllers sim.controlplane.controllermanager chooses and documents (`/healthz`);
kube-apiserver runs with token authentication (`tokens.csv`: the
admin in system:masters and one line per `User` the harness runs as), RBAC authorization, a serving
certificate for 127.0.0.1 signed by a CA of this run, a ServiceAccount signing key, the admission plugins
that need a controller-manager (ServiceAccount) or a kubelet (TaintNodesByCondition) turned off, and
`--endpoint-reconciler-type=none` so the loopback bind needs no routable advertise address. Every process
runs in its own process group with its log in `workdir/<name>.log`, every port comes from binding
127.0.0.1:0, and `stop` ends them by PID (schedulers, kube-controller-manager, kube-apiserver, etcd).
`kubectl()` is the kubectl built from the same k8s.io/kubernetes module: the one to hand to users and tests.

kube-scheduler is started per `SchedulerSpec` with the KubeSchedulerConfiguration the harness rendered
from our chart (`sim.controlplane.chart`), its `clientConnection` pointed at a kubeconfig of the chart's
ServiceAccount user, and, when running as root, in its own UTS namespace whose host name is the replica's
pod name (`unshare --uts`): kube-scheduler's leader-election identity is `<hostname>_<uuid>`, which the
registration worker matches against POD_NAME in follow mode, exactly as in a pod.

`workload_api=True` turns on Kubernetes' Workload API and gang scheduling (docs/gangs.md): the feature gate
`GenericWorkload` (beta in 1.37, off by default; it adds the in-tree `GangScheduling` plugin to every
profile) on kube-apiserver and kube-scheduler, and the beta group version `scheduling.k8s.io/v1beta1`
(Workload, PodGroup; beta APIs are served only when asked for) on kube-apiserver. Off by default: the
versions before 1.37 (1.34 among those we build) have no such gate or API, so asking for it there fails
with a clear error rather than starting a control plane without it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from sim.controlplane import binaries, controllermanager
from sim.controlplane.base import (
    ADMIN,
    DEVICE_PLUGIN,
    EXTENDER,
    KUBE_CONTROLLER_MANAGER,
    KUBE_SCHEDULER,
    SchedulerSpec,
    User,
)
from sim.emulator import kubeconfig as kubeconfig_file
from sim.emulator import tls
from sim.kit.processes import ChildProcess, ProcessSet

SERVICE_CIDR = "10.0.0.0/24"
WORKLOAD_API_SINCE = (
    1,
    37,
)  # GenericWorkload with scheduling.k8s.io/v1beta1 PodGroups (pod.spec.schedulingGroup)
WORKLOAD_GATES = "--feature-gates=GenericWorkload=true"
WORKLOAD_RUNTIME_CONFIG = "--runtime-config=scheduling.k8s.io/v1beta1=true"


def minor_of(version: str) -> tuple[int, int]:
    """(1, 37) for "v1.37.2"."""
    major, minor = version.removeprefix("v").split(".")[:2]
    return int(major), int(minor)


def workload_flags(version: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The (kube-apiserver, kube-scheduler) flags that turn on the Workload API at `version`."""
    if minor_of(version) < WORKLOAD_API_SINCE:
        since = ".".join(map(str, WORKLOAD_API_SINCE))
        raise ValueError(
            f"the Workload API (gang scheduling) needs Kubernetes >= {since}; this control plane is {version}"
        )
    return (WORKLOAD_GATES, WORKLOAD_RUNTIME_CONFIG), (WORKLOAD_GATES,)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class StartupError(RuntimeError):
    """A control-plane process did not become ready; the message has the tail of its log."""


def _poll(
    url: str, process: ChildProcess, timeout: float, *, token: str = "", context: ssl.SSLContext | None = None
) -> bytes:
    """GET `url` until it answers 200 (the body) or fail with the process's log tail."""
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
    )
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    deadline, last = time.monotonic() + timeout, ""
    while time.monotonic() < deadline:
        if not process.alive():
            raise StartupError(f"{url}: process exited with {process.returncode}:\n{process.log_tail(20)}")
        try:
            with opener.open(urllib.request.Request(url, headers=headers), timeout=2.0) as response:
                return bytes(response.read())
        except urllib.error.HTTPError as error:
            last = f"HTTP {error.code}"
            error.close()
        except (urllib.error.URLError, OSError) as error:
            last = str(error)
        time.sleep(0.1)
    raise StartupError(f"{url} not ready after {timeout:g}s ({last}):\n{process.log_tail(20)}")


class RealControlPlane:
    kind = "real"

    def __init__(
        self,
        workdir: Path,
        users: tuple[User, ...] = (EXTENDER, DEVICE_PLUGIN, KUBE_SCHEDULER),
        verbosity: int = 1,
        apiserver_args: tuple[str, ...] = (),
        workload_api: bool = False,
        controller_manager: bool = True,
    ) -> None:
        self.workdir = workdir
        self.bin = binaries.find()
        self.controller_manager = controller_manager
        self.workload_api = workload_api
        self.kubeconfig = workdir / "kubeconfig"
        self.verbosity = verbosity
        self.apiserver_args = apiserver_args  # e.g. a short --etcd-compaction-interval for watch expiry
        self.scheduler_args: tuple[str, ...] = ()
        if workload_api:
            api_flags, self.scheduler_args = workload_flags(self.bin.kubernetes_version)
            self.apiserver_args = (*api_flags, *apiserver_args)
        if controller_manager:
            users = (*users, KUBE_CONTROLLER_MANAGER)
        self.users = (ADMIN, *dict.fromkeys(u for u in users if u != ADMIN))
        self.tokens = {u.name: secrets.token_hex(16) for u in self.users}
        self.pki = workdir / "pki"
        self.children = ProcessSet(workdir)
        self.etcd_port, self.etcd_peer_port, self.port = free_port(), free_port(), free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.ca_pem = b""
        self._schedulers: dict[str, list[str]] = {}
        self.scheduler_urls: dict[str, str] = {}  # each kube-scheduler's secure port (/metrics needs no auth)
        self.controller_manager_port = free_port()

    # --- lifecycle ------------------------------------------------------------------------------------------

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._write_pki()
        self._start_etcd()
        self._start_apiserver()
        kubeconfig_file.write(
            self.kubeconfig, kubeconfig_file.kubeconfig(self.url, self.tokens["admin"], self.ca_pem)
        )
        if self.controller_manager:
            self._start_controller_manager()

    def stop(self) -> None:
        # its clients first (kube-controller-manager, every kube-scheduler whatever its name): kube-apiserver
        # waits for their connections and was SIGKILLed after the 10 s timeout while the default scheduler
        # was still up
        clients = [n for n in self.children.children if n not in ("kube-apiserver", "etcd")]
        self.children.stop_all([*clients, "kube-apiserver", "etcd"])

    def processes(self) -> dict[str, ChildProcess]:
        return dict(self.children.children)

    def stop_process(self, name: str) -> None:
        self.children.stop(name)

    def restart(self, name: str) -> None:
        self.children.stop(name)
        if name == "etcd":
            self._start_etcd()
        elif name == "kube-apiserver":
            self._start_apiserver()
        elif name == controllermanager.NAME and self.controller_manager:
            self._start_controller_manager()
        elif name in self._schedulers:
            self.children.start(name, self._schedulers[name])
        else:
            raise KeyError(f"no process {name} to restart")

    def versions(self) -> dict[str, str]:
        running = {controllermanager.NAME: self.bin.kubernetes_version} if self.controller_manager else {}
        return {**self.bin.versions(), **running}

    def kubectl(self) -> Path:
        return self.bin.kubectl

    def rejections_are_final(self) -> bool:
        return False

    def admits_pods(self) -> bool:
        return True

    def kubeconfig_for(self, user: User) -> Path:
        if user.name not in self.tokens:
            raise KeyError(f"{user.name} has no token: pass it in `users`")
        path = self.workdir / "users" / f"{user.name.replace(':', '_')}.kubeconfig"
        if not path.exists():
            kubeconfig_file.write(
                path, kubeconfig_file.kubeconfig(self.url, self.tokens[user.name], self.ca_pem)
            )
        return path

    # --- etcd and kube-apiserver ----------------------------------------------------------------------------

    def _write_pki(self) -> None:
        self.pki.mkdir(parents=True, exist_ok=True)
        certs = tls.generate(["127.0.0.1", "localhost", "kubernetes", "kubernetes.default.svc", "10.0.0.1"])
        self.ca_pem = certs.ca_pem
        (self.pki / "ca.crt").write_bytes(certs.ca_pem)
        (self.pki / "apiserver.crt").write_bytes(certs.cert_pem + certs.ca_pem)
        (self.pki / "apiserver.key").write_bytes(certs.key_pem)
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        (self.pki / "sa.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        (self.pki / "sa.pub").write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        lines = [
            f'{self.tokens[u.name]},{u.name},uid-{i},"{",".join(u.groups)}"' for i, u in enumerate(self.users)
        ]
        (self.pki / "tokens.csv").write_text("\n".join(lines) + "\n")

    def _start_etcd(self) -> None:
        client, peer = f"http://127.0.0.1:{self.etcd_port}", f"http://127.0.0.1:{self.etcd_peer_port}"
        argv = [
            str(self.bin.etcd),
            "--name=default",
            f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=default={peer}",
            "--unsafe-no-fsync",
            "--log-level=warn",
        ]
        process = self.children.start("etcd", argv)
        _poll(f"{client}/health", process, 60)

    def _start_apiserver(self) -> None:
        argv = [
            str(self.bin.kube_apiserver),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--tls-cert-file={self.pki / 'apiserver.crt'}",
            f"--tls-private-key-file={self.pki / 'apiserver.key'}",
            f"--client-ca-file={self.pki / 'ca.crt'}",  # publishes extension-apiserver-authentication
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={self.pki / 'sa.pub'}",
            f"--service-account-signing-key-file={self.pki / 'sa.key'}",
            f"--token-auth-file={self.pki / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            "--allow-privileged=true",
            "--endpoint-reconciler-type=none",
            "--profiling=false",
            f"--v={self.verbosity}",
            *self.apiserver_args,
        ]
        process = self.children.start("kube-apiserver", argv)
        context = ssl.create_default_context(cadata=self.ca_pem.decode())
        _poll(f"{self.url}/readyz", process, 120, token=self.tokens["admin"], context=context)

    def _start_controller_manager(self) -> None:
        port = self.controller_manager_port
        argv = controllermanager.argv(
            self.bin.kube_controller_manager,
            self.kubeconfig_for(KUBE_CONTROLLER_MANAGER),
            port,
            workload_api=self.workload_api,
            feature_gates=self.scheduler_args,  # the Workload API's gate, when on
            verbosity=self.verbosity,
        )
        process = self.children.start(controllermanager.NAME, argv)
        _poll(f"https://127.0.0.1:{port}/healthz", process, 60, context=ssl._create_unverified_context())

    # --- kube-scheduler -------------------------------------------------------------------------------------

    def start_scheduler(self, spec: SchedulerSpec) -> ChildProcess:
        """kube-scheduler with `spec.config` (a KubeSchedulerConfiguration), as `spec.user` (by default the
        chart's ServiceAccount)."""
        folder = self.workdir / spec.name
        folder.mkdir(parents=True, exist_ok=True)
        kubeconfig = str(self.kubeconfig_for(spec.user or EXTENDER))
        config: dict[str, Any] = dict(spec.config)
        config["clientConnection"] = {
            **(config.get("clientConnection") or {}),
            "kubeconfig": kubeconfig,
        }
        (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        port = free_port()
        argv = [
            str(self.bin.kube_scheduler),
            f"--config={folder / 'config.yaml'}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            f"--v={spec.verbosity}",
            *self.scheduler_args,
        ]
        if spec.hostname and os.geteuid() == 0 and shutil.which("unshare"):
            argv = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', spec.hostname, *argv]
        self._schedulers[spec.name] = argv
        self.scheduler_urls[spec.name] = f"https://127.0.0.1:{port}"
        process = self.children.start(spec.name, argv)
        _poll(f"https://127.0.0.1:{port}/healthz", process, 60, context=ssl._create_unverified_context())
        return process
