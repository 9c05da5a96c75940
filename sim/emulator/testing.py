"""Start the API emulator for a test and steer it through one handle, in this process or as a child process.

    from sim.emulator.testing import EmulatorOptions, node, run_emulator

    def test_something(tmp_path):
        with run_emulator(tmp_path, mode="process", options=EmulatorOptions(tls=True)) as sim:
            sim.seed([node("gpu-1")])
            with sim.api_client() as api:             # a kubernetes.client.ApiClient on sim.kubeconfig
                ...
            sim.add_fault(action="error", status=503, verb="patch", resource="nodes", count=2)
            assert sim.faults_injected() == 2

The handle's hook methods go over HTTP (``/_sim/...``) in both modes, so a test does not care which mode runs;
``handle.emulator`` additionally gives direct access in thread mode. The emulator is always stopped on exit
(a child process by PID, also when the test fails).
"""

from __future__ import annotations

import base64
import contextlib
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import urlencode

import orjson
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from sim.emulator.emulator import Emulator, EmulatorConfig
from sim.kit.processes import ChildProcess, running, wait_for_http

REPO_ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


@dataclass(frozen=True)
class EmulatorOptions:
    tls: bool = False
    event_window: int = 10_000
    pod_deletion_delay: float = 1.0
    bookmark_interval: float = 1.0
    fault_seed: int | None = None
    kubelet_deletions: bool = False  # graceful pod deletions wait for a kubelet, as on kube-apiserver

    def args(self) -> list[str]:
        args = [
            f"--event-window={self.event_window}",
            f"--pod-deletion-delay={self.pod_deletion_delay}",
            f"--bookmark-interval={self.bookmark_interval}",
        ]
        if self.kubelet_deletions:
            args.append("--kubelet-deletions")
        if self.fault_seed is not None:
            args.append(f"--fault-seed={self.fault_seed}")
        return [*args, "--tls"] if self.tls else args


class HookError(Exception):
    """A non-2xx answer to ``EmulatorHandle.call``: the HTTP status and the (Status JSON) body."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


class EmulatorHandle:
    def __init__(
        self,
        url: str,
        kubeconfig: Path,
        ca_file: Path | None,
        emulator: Emulator | None = None,
        process: ChildProcess | None = None,
    ) -> None:
        self.url = url
        self.kubeconfig = kubeconfig
        self.ca_file = ca_file
        self.emulator = emulator
        self.process = process
        context = ssl.create_default_context(cafile=str(ca_file)) if ca_file else None
        self._opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
        )

    def call(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json", **query: str
    ) -> Any:
        """One test-hook (or raw API) request; JSON in and out. Raises HookError on a non-2xx answer."""
        url = f"{self.url}{path}" + (f"?{urlencode(query)}" if query else "")
        data = orjson.dumps(body) if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", content_type)
        try:
            with self._opener.open(request, timeout=60) as response:
                return orjson.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            with error:
                raise HookError(error.code, error.read().decode(errors="replace")) from None

    # --- kubernetes client ----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def api_client(self) -> Iterator[k8s_client.ApiClient]:
        """A ``kubernetes.client.ApiClient`` configured from the kubeconfig, closed on exit."""
        api_client: k8s_client.ApiClient = k8s_config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(self.kubeconfig)
        )
        try:
            yield api_client
        finally:
            api_client.close()  # type: ignore[no-untyped-call]

    # --- faults ---------------------------------------------------------------------------------------------

    def add_fault(self, **rule: Any) -> int:
        """See sim.emulator.faults.FaultRule for the fields (action, status, verb, resource, count, ...)."""
        return int(self.call("POST", "/_sim/faults", rule)["id"])

    def faults(self) -> dict[str, Any]:
        report: dict[str, Any] = self.call("GET", "/_sim/faults")
        return report

    def remove_fault(self, rule_id: int) -> bool:
        return bool(self.call("DELETE", f"/_sim/faults/{rule_id}")["removed"])

    def clear_faults(self) -> int:
        return int(self.call("DELETE", "/_sim/faults")["cleared"])

    def faults_injected(self) -> int:
        return int(self.faults()["faults_injected"])

    def close_watches(self, resource: str, user_agent: str = "", ending: str = "dropped") -> int:
        """End the open watches of `resource` from clients whose User-Agent matches `user_agent` (a regular
        expression, searched): `closed`
        cleanly, `dropped` (connection cut) or `expired` (410: the client lists again); how many."""
        body = {"resource": resource, "user_agent": user_agent, "ending": ending}
        return int(self.call("POST", "/_sim/watches/close", body)["closed"])

    # --- request log ----------------------------------------------------------------------------------------

    def requests(self) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = self.call("GET", "/_sim/requests")["requests"]
        return records

    def clear_requests(self) -> None:
        self.call("DELETE", "/_sim/requests")

    # --- store ----------------------------------------------------------------------------------------------

    def seed(self, objects: list[dict[str, Any]]) -> str:
        """Bulk insert (status kept as given); returns the resourceVersion after the last object."""
        return str(self.call("POST", "/_sim/bulk", {"objects": objects})["resourceVersion"])

    def get(self, resource: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self.call(
                "GET", f"/_sim/store/{resource}", name=name, namespace=namespace or ""
            )
        except HookError as error:
            if error.status == 404:
                return None
            raise
        return found

    def list(
        self, resource: str, namespace: str | None = None, label_selector: str = "", field_selector: str = ""
    ) -> list[dict[str, Any]]:
        query = {
            "namespace": namespace or "",
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
        }
        items: list[dict[str, Any]] = self.call("GET", f"/_sim/store/{resource}", **query)["items"]
        return items

    def delete(self, resource: str, name: str, namespace: str | None = None) -> bool:
        return bool(
            self.call("DELETE", f"/_sim/store/{resource}", name=name, namespace=namespace or "")["deleted"]
        )

    def reset(self, fault_seed: int | None = None) -> None:
        self.call("POST", "/_sim/reset", {"fault_seed": fault_seed})

    def stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = self.call("GET", "/_sim/stats")
        return stats


def node(
    name: str, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    """A Ready node manifest for ``seed``."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def pod(
    name: str,
    namespace: str = "default",
    node_name: str = "",
    phase: str = "Pending",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A one-container pod manifest for ``seed`` (bound when ``node_name`` is given)."""
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}]}
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
        "status": {"phase": phase},
    }


def wait_for(predicate: Callable[[], T | None], timeout: float, what: str) -> T:
    """Poll ``predicate`` until it returns something truthy; AssertionError naming ``what`` on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def _await_kubeconfig(path: Path, process: ChildProcess, timeout: float) -> str:
    """The server URL from the kubeconfig the child writes once it listens (``--port 0``)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if not process.alive():
            raise RuntimeError(f"sim.emulator exited with {process.returncode}:\n{process.log_tail()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"sim.emulator wrote no kubeconfig within {timeout}s:\n{process.log_tail()}")
        time.sleep(0.02)
    config = yaml.safe_load(path.read_text())
    return str(config["clusters"][0]["cluster"]["server"])


def _write_ca(kubeconfig: Path) -> Path | None:
    cluster = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]
    if "certificate-authority-data" not in cluster:
        return None
    ca_file = kubeconfig.with_name(kubeconfig.name + ".ca.crt")
    ca_file.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    return ca_file


@contextlib.contextmanager
def run_emulator(
    workdir: Path,
    *,
    mode: Literal["thread", "process"] = "thread",
    options: EmulatorOptions | None = None,
    startup_timeout: float = 20.0,
) -> Iterator[EmulatorHandle]:
    """The emulator on an ephemeral 127.0.0.1 port, its kubeconfig in ``workdir``; stopped on exit."""
    opts = options or EmulatorOptions()
    workdir.mkdir(parents=True, exist_ok=True)
    kubeconfig = workdir / "kubeconfig"
    kubeconfig.unlink(missing_ok=True)
    if mode == "thread":
        config = EmulatorConfig(
            tls=opts.tls,
            event_window=opts.event_window,
            pod_deletion_delay=opts.pod_deletion_delay,
            kubelet_deletions=opts.kubelet_deletions,
            bookmark_interval=opts.bookmark_interval,
            fault_seed=opts.fault_seed,
        )
        with Emulator(config) as emulator:
            emulator.write_kubeconfig(kubeconfig)
            yield EmulatorHandle(emulator.url, kubeconfig, _write_ca(kubeconfig), emulator=emulator)
        return
    argv = [
        sys.executable,
        "-m",
        "sim.emulator",
        "--host=127.0.0.1",
        "--port=0",
        f"--kubeconfig={kubeconfig}",
    ]
    with running([*argv, *opts.args()], log_path=workdir / "apiserver.log", cwd=REPO_ROOT) as process:
        url = _await_kubeconfig(kubeconfig, process, startup_timeout)
        ca_file = _write_ca(kubeconfig)
        context = ssl.create_default_context(cafile=str(ca_file)) if ca_file else None
        wait_for_http(f"{url}/version", timeout=startup_timeout, process=process, ssl_context=context)
        yield EmulatorHandle(url, kubeconfig, ca_file, process=process)
