"""The chart's own pod, run as local processes: its Gunicorn servers and its registration worker, bound the
way the chart binds them (issue 11).

`render(value_set, overrides)` runs the real helm on helm/hami-scheduler (the chart's ci/ value files as in
tests/chart). `ChartPod` starts every container of the rendered Deployment that runs our image —
`gunicorn -c config/gunicorn.conf.py wsgi:app` and `python -m workers` — with the container's own
environment. Only what a laptop cannot have is mapped: container ports to free local ports (the bind
address is kept: 0.0.0.0 stays every interface, 127.0.0.1 stays loopback), `/etc/hami/...` and
`/var/run/hami` to a work dir holding the files of the rendered Secrets and ConfigMap (the chart's own
Helm-generated certificates), POD_NAME/POD_NAMESPACE, and KUBECONFIG to the emulator. kube-scheduler is
not run; `kube_scheduler_url` and `kube_scheduler_tls` say how the rendered KubeSchedulerConfiguration
reaches the extender, so a test can call it exactly so.

Every process is stopped by PID in `close()` (the caller's fixture teardown).
"""

from __future__ import annotations

import base64
import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from sim.kit.processes import ChildProcess, start_process

REPO = Path(__file__).resolve().parents[2]
HELM = Path(os.environ.get("HELM") or REPO / ".tools" / "bin" / "helm")
CHART = REPO / "helm" / "hami-scheduler"
RELEASE, NAMESPACE = "hami-scheduler", "hami-system"
VALUE_FILES = {"default": (), "ha": ("ci/ha-values.yaml",), "acquire": ("ci/acquire-values.yaml",)}
POD_NAME = "hami-scheduler-0"


def render(value_set: str = "default", overrides: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    args = [str(HELM), "template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--kube-version", "1.34.0"]
    for values_file in VALUE_FILES[value_set]:
        args += ["-f", str(CHART / values_file)]
    for key, value in (overrides or {}).items():
        args += ["--set-string", f"{key}={value}"] if isinstance(value, str) else ["--set", f"{key}={value}"]
    result = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"helm template failed: {result.stderr.strip()}")
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def non_loopback_address() -> str:
    """An address of this machine that is not loopback (where a client from another pod would connect)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.254", 9))  # no packet is sent: this only picks the outgoing interface
        address = str(probe.getsockname()[0])
    if address.startswith("127."):
        raise RuntimeError("this machine has no non-loopback IPv4 address to test exposure from")
    return address


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    """One Gunicorn container: the routes it was given, where it listens (mapped), its process."""

    container: str
    env: dict[str, str]
    process: ChildProcess
    ports: dict[int, int]  # container port -> local port

    @property
    def host(self) -> str:
        return self.env["HAMI_BIND"].rpartition(":")[0]

    @property
    def port(self) -> int:
        return int(self.env["HAMI_BIND"].rpartition(":")[2])

    def worker_pids(self) -> list[int]:
        """The Gunicorn workers (the master's children)."""
        pids: list[int] = []
        for task in os.listdir(f"/proc/{self.process.pid}/task"):
            children = Path(f"/proc/{self.process.pid}/task/{task}/children").read_text().split()
            pids.extend(int(p) for p in children)
        return pids


@dataclass
class ChartPod:
    manifests: list[dict[str, Any]]
    workdir: Path
    kubeconfig: Path
    env_overrides: Mapping[str, str] = field(default_factory=dict)
    servers: dict[str, Server] = field(default_factory=dict)
    worker: ChildProcess | None = None
    ports: dict[int, int] = field(default_factory=dict)

    def one(self, kind: str, suffix: str = "") -> dict[str, Any]:
        found = [m for m in self.manifests if m["kind"] == kind and m["metadata"]["name"].endswith(suffix)]
        assert len(found) == 1, f"{kind} *{suffix}: {len(found)} rendered"
        return found[0]

    @property
    def containers(self) -> list[dict[str, Any]]:
        spec = self.one("Deployment")["spec"]["template"]["spec"]
        return list(spec["containers"])

    def _files(self) -> dict[str, str]:
        """Rendered Secrets and ConfigMaps written to the work dir; container path -> local path."""
        mapped: dict[str, str] = {}
        spec = self.one("Deployment")["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        objects = {(m["kind"], m["metadata"]["name"]): m for m in self.manifests}
        for container in spec["containers"]:
            for mount in container.get("volumeMounts", []):
                volume = volumes[mount["name"]]
                if "secret" in volume:
                    data = {
                        k: base64.b64decode(v)
                        for k, v in objects[("Secret", volume["secret"]["secretName"])]["data"].items()
                    }
                elif "configMap" in volume:
                    data = {
                        k: v.encode()
                        for k, v in objects[("ConfigMap", volume["configMap"]["name"])]["data"].items()
                    }
                else:
                    continue
                folder = self.workdir / "files" / mount["name"]
                folder.mkdir(parents=True, exist_ok=True)
                for key, value in data.items():
                    (folder / key).write_bytes(value)
                if "subPath" in mount:
                    mapped[mount["mountPath"]] = str(folder / mount["subPath"])
                else:
                    mapped[mount["mountPath"]] = str(folder)
        return mapped

    def _environment(self, container: dict[str, Any], files: dict[str, str]) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("HAMI_") and k != "PROMETHEUS_MULTIPROC_DIR"
        }
        state = self.workdir / "state"
        for entry in container.get("env", []):
            if "valueFrom" in entry:
                path = entry["valueFrom"]["fieldRef"]["fieldPath"]
                value = POD_NAME if path == "metadata.name" else NAMESPACE
            else:
                value = str(entry["value"])
            for inside, outside in sorted(files.items(), key=lambda item: -len(item[0])):
                if value.startswith(inside):
                    value = outside + value[len(inside) :]
                    break
            if value.startswith("/var/run/hami"):
                value = str(state) + value[len("/var/run/hami") :]
            if value == "/tmp":
                value = str(self.workdir / f"tmp-{container['name']}")
            env[entry["name"]] = value
        for name in ("HAMI_BIND", "HAMI_EXTENDER_ADDRESS", "HAMI_WORKER_METRICS_BIND"):
            if name in env:
                host, _, port = env[name].rpartition(":")
                env[name] = f"{host}:{self.ports.setdefault(int(port), free_port())}"
        env["KUBECONFIG"] = str(self.kubeconfig)
        env.update(self.env_overrides)
        return env

    def start(self) -> ChartPod:
        files = self._files()
        (self.workdir / "state").mkdir(parents=True, exist_ok=True)
        for container in self.containers:
            command = container.get("command") or []
            if command[:1] == ["gunicorn"]:
                argv = [sys.executable, "-m", *command]
            elif command[:3] == ["python", "-m", "workers"]:
                argv = [sys.executable, "-m", "workers"]
            else:
                continue  # kube-scheduler: played by the test
            env = self._environment(container, files)
            for path in (env.get("PROMETHEUS_MULTIPROC_DIR"),):
                if path:
                    Path(path).mkdir(parents=True, exist_ok=True)
            log = self.workdir / f"{container['name']}.log"
            process = start_process(argv, log_path=log, env=env, cwd=REPO)
            if command[:1] == ["gunicorn"]:
                self.servers[container["name"]] = Server(container["name"], env, process, dict(self.ports))
            else:
                self.worker = process
        for server in self.servers.values():
            self._wait_listening(server)
        return self

    def _wait_listening(self, server: Server, timeout: float = 60.0) -> None:
        host = "127.0.0.1" if server.host in ("0.0.0.0", "") else server.host
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not server.process.alive():
                raise RuntimeError(f"{server.container} exited:\n{server.process.log_tail()}")
            try:
                with socket.create_connection((host, server.port), timeout=1.0):
                    return
            except OSError:
                time.sleep(0.1)
        raise TimeoutError(f"{server.container} does not listen on {host}:{server.port}")

    def close(self) -> None:
        for server in self.servers.values():
            server.process.stop(15.0)
        if self.worker is not None:
            self.worker.stop(15.0)

    # -- how the chart's other parties reach the servers ---------------------------------------------------

    def scheduler_config(self) -> dict[str, Any]:
        config: dict[str, Any] = yaml.safe_load(self.one("ConfigMap", "-config")["data"]["config.yaml"])
        return config

    def kube_scheduler_target(self) -> tuple[str, int, str]:
        """(host, local port, path prefix) of the rendered extender urlPrefix (a Service host becomes
        this machine's non-loopback address: the Service's endpoint is the pod IP)."""
        url = urlsplit(self.scheduler_config()["extenders"][0]["urlPrefix"])
        host = url.hostname or ""
        local = host if host.startswith("127.") else non_loopback_address()
        return local, self.ports[int(url.port or 443)], url.path

    def kube_scheduler_tls(self) -> ssl.SSLContext:
        """kube-scheduler's TLS as its rendered tlsConfig says: the CA it verifies with, its client
        certificate when one is configured, and serverName."""
        tls = self.scheduler_config()["extenders"][0]["tlsConfig"]
        files = self._files()
        context = ssl.create_default_context(cafile=self._local(tls["caFile"], files))
        if tls.get("certFile"):
            context.load_cert_chain(self._local(tls["certFile"], files), self._local(tls["keyFile"], files))
        return context

    def server_name(self) -> str:
        return str(self.scheduler_config()["extenders"][0]["tlsConfig"]["serverName"])

    def public_port(self) -> int:
        """The local port of the container port the webhook Service targets (`https`)."""
        for container in self.containers:
            for port in container.get("ports", []):
                if port["name"] == "https":
                    return self.ports[int(port["containerPort"])]
        raise AssertionError("no container port named https")

    def public_tls(self) -> ssl.SSLContext:
        """What the API server verifies the webhook with: the caBundle's CA, no client certificate."""
        files = self._files()
        return ssl.create_default_context(cafile=self._local("/etc/hami/tls/ca.crt", files))

    @staticmethod
    def _local(path: str, files: dict[str, str]) -> str:
        for inside, outside in sorted(files.items(), key=lambda item: -len(item[0])):
            if path.startswith(inside):
                return outside + path[len(inside) :]
        raise AssertionError(f"{path} is not a mounted file")
