"""The API emulator as a control plane: `python -m sim.emulator` and the simulated kube-scheduler.

The fast path of `make demo` and most tests. It authorizes every request (so `kubeconfig_for` hands out
the admin kubeconfig), does not call admission webhooks (the harness calls our `/webhook` itself before a
create) and injects API faults on request. Its scheduler is `python -m sim scheduler`, configured from the
same chart-rendered KubeSchedulerConfiguration the real kube-scheduler loads: extender URL, CA file,
httpTimeout, nodeCacheCapable and the profile's schedulerName.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from sim.controlplane.base import DEFAULT_SCHEDULER, SchedulerSpec, User
from sim.kit.processes import ChildProcess, ProcessSet, wait_for_http

PY = sys.executable
REPO_ROOT = Path(__file__).resolve().parents[2]


def scheduler_flags(config: Any) -> list[str]:
    """`python -m sim scheduler` flags equivalent to a KubeSchedulerConfiguration's extender and profile."""
    extender = (config.get("extenders") or [{}])[0]
    profile = (config.get("profiles") or [{}])[0]
    flags = ["--extender", str(extender["urlPrefix"])]
    flags += ["--scheduler-name", str(profile.get("schedulerName") or "hami-scheduler")]
    if any(p.get("schedulerName") == DEFAULT_SCHEDULER for p in (config.get("profiles") or [])[1:]):
        flags.append("--default-profile")  # a second profile: the cluster's own default scheduler
    tls = extender.get("tlsConfig") or {}
    if tls.get("insecure"):
        flags.append("--insecure")
    elif tls.get("caFile"):
        flags += ["--ca-file", str(tls["caFile"])]
    if tls.get("certFile"):  # the client certificate the extender's scheduler verbs require (issue 11)
        flags += ["--cert-file", str(tls["certFile"]), "--key-file", str(tls.get("keyFile") or "")]
    timeout = str(extender.get("httpTimeout") or "30s")
    if timeout.endswith("s") and timeout[:-1].replace(".", "").isdigit():
        flags += ["--http-timeout", timeout[:-1]]
    if extender.get("nodeCacheCapable") is False:
        flags.append("--no-node-cache")
    return flags


class EmulatedControlPlane:
    kind = "emulator"

    def __init__(self, workdir: Path, emulator_args: tuple[str, ...] = ()) -> None:
        self.workdir = workdir
        self.kubeconfig = workdir / "kubeconfig"
        self.emulator_args = emulator_args
        self.children = ProcessSet(workdir, cwd=REPO_ROOT)
        self._schedulers: dict[str, list[str]] = {}
        self.url = ""

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.kubeconfig.unlink(missing_ok=True)  # a reused work dir: never read the last run's URL
        self._start_emulator()

    def _start_emulator(self) -> None:
        argv = [PY, "-m", "sim.emulator", "--port", "0", "--kubeconfig", str(self.kubeconfig)]
        process = self.children.start("apiserver", [*argv, *self.emulator_args])
        deadline = time.monotonic() + 30
        while not self.kubeconfig.exists():
            self.children.check()
            if time.monotonic() > deadline:
                raise RuntimeError("the API emulator wrote no kubeconfig within 30s")
            time.sleep(0.05)
        from sim.kit.kube import load_kubeconfig

        self.url = load_kubeconfig(self.kubeconfig).server
        wait_for_http(f"{self.url}/version", timeout=30, process=process)

    def stop(self) -> None:
        self.children.stop_all([*self._schedulers, "apiserver"])

    def processes(self) -> dict[str, ChildProcess]:
        return dict(self.children.children)

    def stop_process(self, name: str) -> None:
        self.children.stop(name)

    def restart(self, name: str) -> None:
        if name not in self._schedulers:
            raise KeyError(f"the emulator cannot restart {name} (its state lives in its memory)")
        self.children.stop(name)
        self.children.start(name, self._schedulers[name])

    def versions(self) -> dict[str, str]:
        return {"emulator": "sim.emulator"}

    def kubectl(self) -> Path:
        return REPO_ROOT / ".tools" / "bin" / "kubectl"

    def rejections_are_final(self) -> bool:
        return True

    def admits_pods(self) -> bool:
        return False

    def kubeconfig_for(self, user: User) -> Path:
        return self.kubeconfig  # the emulator authorizes every request

    def start_scheduler(self, spec: SchedulerSpec) -> ChildProcess:
        argv = [PY, "-m", "sim", "scheduler", "--kubeconfig", str(self.kubeconfig)]
        argv += scheduler_flags(spec.config)
        if spec.stats is not None:
            argv += ["--stats", str(spec.stats)]
        for key, value in spec.sim_options.items():
            argv += [f"--{key.replace('_', '-')}", str(value)]
        self._schedulers[spec.name] = argv
        return self.children.start(spec.name, argv)
