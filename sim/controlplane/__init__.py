"""One harness, two control planes: the API emulator (`emulated`) or etcd + kube-apiserver + kube-scheduler
built from Go modules (`real`). See `base` for the interface the scenarios use and docs/real-control-plane.md.

Imports: sim.emulator (its TLS and kubeconfig writers) and sim.kit; never the cluster, actors or scenarios.
"""

from __future__ import annotations

from pathlib import Path

from sim.controlplane.base import ControlPlane, SchedulerSpec, User

KINDS = ("emulator", "real")

__all__ = ["KINDS", "ControlPlane", "SchedulerSpec", "User", "make_control_plane"]


def make_control_plane(kind: str, workdir: Path, workload_api: bool = False) -> ControlPlane:
    """A control plane of `kind` (not started); `real` needs the binaries of `make kube`. `workload_api`:
    Kubernetes' Workload API and gang scheduling (real only, Kubernetes >= 1.37; sim.controlplane.real)."""
    if workload_api and kind != "real":
        raise ValueError("the Workload API needs the real control plane")
    if kind == "emulator":
        from sim.controlplane.emulated import EmulatedControlPlane

        return EmulatedControlPlane(workdir)
    if kind == "real":
        from sim.controlplane.real import RealControlPlane

        return RealControlPlane(workdir, workload_api=workload_api)
    raise ValueError(f"unknown control plane {kind!r}: expected one of {', '.join(KINDS)}")
