"""`hami-scheduler inspect` on the real control plane shows what the pods' annotations say.

GPU pods created through the chart's webhook are placed by the real kube-scheduler with our extender and
allocated by the simulated device plugin. `inspect` then reads (1) the live kube-apiserver through the admin
kubeconfig, (2) a dump written by the real `kubectl get nodes,pods,resourcequotas -A -o json`, (3) the
replica's /debug/state over HTTPS (the extender listener, kube-scheduler's client certificate); each must
show per device exactly the memory, cores and slots — and the pods — that the
`hami.io/vgpu-devices-allocated` annotations add up to (`sim.workload.inspection`, parsed independently of the
scheduler's codec). The emulator twin is tests/integration/test_inspect_sources.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sim.cluster.harness import create_pod, running_cluster
from sim.cluster.spec import ClusterSpec
from sim.emulator.testing import wait_for
from sim.kit import podutil
from sim.workload.inspection import expected_usage, inspected, kubectl_dump

pytestmark = [pytest.mark.integration, pytest.mark.real]
PODS = {"one": (1, 3000, 20), "two": (2, 8000, 0), "three": (1, 12000, 50)}  # gpus, MiB, cores


def gpu_pod(name: str, gpus: int, memory: int, cores: int) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(gpus), "nvidia.com/gpumem": str(memory)}
    if cores:
        limits["nvidia.com/gpucores"] = str(cores)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"test": "inspect"}},
        "spec": {"containers": [{"name": "main", "image": "cuda", "resources": {"limits": limits}}]},
    }


def test_every_source_shows_the_annotations(real_binaries: object, tmp_path: Path) -> None:
    options = ClusterSpec(control_plane="real", nodes=2, gpus_per_node=2)
    with running_cluster(tmp_path / "cluster", options) as stack:
        kube = stack.kube
        assert kube is not None and stack.ca_file is not None
        for name, shape in PODS.items():
            assert create_pod(stack, gpu_pod(name, *shape)) == ""

        def placed() -> list[dict[str, Any]]:
            pods = kube.list("/api/v1/namespaces/default/pods", labelSelector="test=inspect")[1]
            running = [p for p in pods if podutil.phase(p) == "Running"]
            return running if len(running) == len(PODS) else []

        pods = wait_for(placed, 90, "every pod bound and running")
        expected = expected_usage(pods)
        assert sum(e["slots"] for e in expected.values()) == 4
        assert {p for e in expected.values() for p in e["pods"]} == {f"default/{n}" for n in PODS}

        assert inspected("--kubeconfig", str(stack.kubeconfig)) == expected
        assert stack.control_plane is not None
        dump = kubectl_dump(stack.kubeconfig, tmp_path / "cluster.json", stack.control_plane.kubectl())
        assert inspected("--cluster", str(dump)) == expected
        # /debug/state: only on the extender listener, to kube-scheduler's client certificate (issue 11)
        client = stack.workdir / "kube-scheduler-client"
        extender = stack.extender_urls[stack.service_url]
        replica = ("--url", extender, "--ca-file", str(stack.ca_file), "--cert", str(client / "tls.crt"))
        assert inspected(*replica, "--key", str(client / "tls.key")) == expected
