"""One harness, two control planes: the API emulator (`emulated`) or etcd + kube-apiserver +
kube-controller-manager + kube-scheduler built from Go modules (`real`). See `base` for the interface the
scenarios use and docs/real-control-plane.md.

Imports: sim.emulator (its TLS and kubeconfig writers) and sim.kit; never the cluster, actors or scenarios.
"""

from __future__ import annotations

from pathlib import Path

from sim.controlplane.base import ControlPlane, SchedulerSpec, User

KINDS = ("emulator", "real")

__all__ = ["KINDS", "ControlPlane", "SchedulerSpec", "User", "make_control_plane"]


def make_control_plane(
    kind: str,
    workdir: Path,
    workload_api: bool = False,
    controller_manager: bool = True,
    kubelet_deletions: bool = False,
) -> ControlPlane:
    """A control plane of `kind` (not started); `real` needs the binaries of `make kube`. `workload_api`:
    Kubernetes' Workload API and gang scheduling (real only, Kubernetes >= 1.37; sim.controlplane.real).
    `controller_manager` (real only): kube-controller-manager with the controllers
    sim.controlplane.controllermanager lists; the emulator does their parts itself. `kubelet_deletions`
    (emulator only; kube-apiserver always does so): graceful pod deletions wait for a kubelet's grace-0
    delete."""
    if workload_api and kind != "real":
        raise ValueError("the Workload API needs the real control plane")
    if kind == "emulator":
        from sim.controlplane.emulated import EmulatedControlPlane

        return EmulatedControlPlane(workdir, ("--kubelet-deletions",) if kubelet_deletions else ())
    if kind == "real":
        from sim.controlplane.real import RealControlPlane

        return RealControlPlane(workdir, workload_api=workload_api, controller_manager=controller_manager)
    raise ValueError(f"unknown control plane {kind!r}: expected one of {', '.join(KINDS)}")
