"""What a control plane is to the harness, whichever runs: the API emulator or the real one.

Scenarios (the demo, chaos, `sim up`, the end-to-end suites, the benchmark) talk to a `ControlPlane` only:
start it, read its admin kubeconfig, get a kubeconfig for a named user, start a kube-scheduler that calls our
extender, restart one of its processes, stop everything. `sim.controlplane.emulated` runs the emulator and
the simulated kube-scheduler; `sim.controlplane.real` runs etcd, kube-apiserver and the real kube-scheduler
built by `make kube`. Users are the identities the chart's RBAC is written for; the emulator authorizes
everything, the real API server enforces RBAC for each of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sim.kit.processes import ChildProcess

RELEASE_NAMESPACE = "hami-system"
SERVICE_ACCOUNT = "hami-scheduler"
DEVICE_PLUGIN_NAMESPACE = "kube-system"
DEVICE_PLUGIN_ACCOUNT = "hami-device-plugin"


@dataclass(frozen=True)
class User:
    """A token user of the API server (token-auth-file: `token,name,uid,"groups"`)."""

    name: str
    groups: tuple[str, ...] = ()

    @classmethod
    def service_account(cls, namespace: str, name: str) -> User:
        """The identity a ServiceAccount token carries, so RoleBindings to the ServiceAccount apply."""
        return cls(
            f"system:serviceaccount:{namespace}:{name}",
            ("system:serviceaccounts", f"system:serviceaccounts:{namespace}"),
        )


ADMIN = User("admin", ("system:masters",))
EXTENDER = User.service_account(RELEASE_NAMESPACE, SERVICE_ACCOUNT)  # the chart's pod: all three containers
DEVICE_PLUGIN = User.service_account(DEVICE_PLUGIN_NAMESPACE, DEVICE_PLUGIN_ACCOUNT)  # sim nodes + kubelet
# The cluster's own kube-scheduler (`default-scheduler`): the bootstrap RBAC binds system:kube-scheduler,
# system:volume-scheduler and the extension-apiserver-authentication reader to this user, as in kubeadm.
KUBE_SCHEDULER = User("system:kube-scheduler")
# kube-controller-manager (sim.controlplane.controllermanager): the bootstrap RBAC lets this user create its
# controllers' ServiceAccounts and their tokens in kube-system; each controller then runs as its own.
KUBE_CONTROLLER_MANAGER = User("system:kube-controller-manager")
DEFAULT_SCHEDULER = "default-scheduler"


@dataclass(frozen=True)
class SchedulerSpec:
    """One kube-scheduler in front of our extender: the chart's sidecar, or the simulated one.

    `config` is the KubeSchedulerConfiguration rendered from our chart, its extender pointed at our local
    service (`sim.controlplane.chart.scheduler_configuration`); the simulated scheduler reads its extender
    entry and profile name from the same dict. `hostname` is the replica's pod name (the real
    kube-scheduler's leader-election identity starts with it)."""

    name: str  # process name, unique in the harness (its log: workdir/<name>.log)
    config: Mapping[str, Any]
    hostname: str = ""
    verbosity: int = 1
    stats: Path | None = None  # the simulated scheduler's stats file
    sim_options: Mapping[str, object] = field(default_factory=dict)  # more `python -m sim scheduler` flags
    user: User | None = None  # the real kube-scheduler's identity; None: the chart's ServiceAccount


class ControlPlane(Protocol):
    kind: str  # "emulator" or "real"
    workdir: Path
    kubeconfig: Path  # admin

    def start(self) -> None: ...

    def stop(self) -> None:
        """Stop every process it started (schedulers first), by PID and process group."""
        ...

    def kubeconfig_for(self, user: User) -> Path: ...

    def start_scheduler(self, spec: SchedulerSpec) -> ChildProcess: ...

    def stop_process(self, name: str) -> None: ...

    def restart(self, name: str) -> None:
        """Stop and start one of its processes (etcd, kube-apiserver, a scheduler) with the same state."""
        ...

    def processes(self) -> dict[str, ChildProcess]: ...

    def versions(self) -> dict[str, str]: ...

    def kubectl(self) -> Path:
        """The kubectl for this control plane, within kubectl's skew policy of its server: real, the one
        `make kube` built from the same k8s.io/kubernetes module (`.tools/kube/kubernetes-<v>/kubectl`); the
        emulator, the one `make tools` installs (`.tools/bin/kubectl`, the minor the emulator reports)."""
        ...

    def admits_pods(self) -> bool:
        """True when the API server itself calls our admission webhook on pod CREATE."""
        ...

    def rejections_are_final(self) -> bool:
        """True when its scheduler gives up on unschedulable pods (the simulated one marks them rejected);
        the real kube-scheduler keeps retrying them, so a run waits for the outcome to be stable instead."""
        ...
