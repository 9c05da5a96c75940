"""The harness drives a kube-scheduler it did not pair with our service (what `python -m bench` needs for an
outside extender and for its no-extender baseline): with `ExternalExtender(url="")` only the control plane,
the nodes and the chart's kube-scheduler without extenders run, and a pod of our scheduler name is bound by
kube-scheduler's own plugins (`nvidia.com/gpu` counted by NodeResourcesFit) and started by the simulated
kubelet as NVIDIA's stock device plugin would (`--stock-gpus`)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sim.cluster.harness import running_cluster
from sim.cluster.spec import ClusterSpec, ExternalExtender
from sim.kit import podutil
from sim.kit.kube import pod_path

pytestmark = [pytest.mark.integration, pytest.mark.real]


def test_kube_scheduler_without_extender_binds_by_itself(tmp_path: Path, real_binaries: object) -> None:
    options = ClusterSpec(
        control_plane="real", nodes=2, gpus_per_node=2, external=ExternalExtender(url=""), scheduler_qps=500
    )
    with running_cluster(tmp_path / "run", options) as stack:
        kube = stack.kube
        assert kube is not None
        control_plane = {"etcd", "kube-apiserver", "kube-controller-manager"}
        assert set(stack.all_processes()) == {*control_plane, "nodes", "scheduler"}
        config = (stack.workdir / "scheduler" / "config.yaml").read_text()
        assert "extenders" not in config and "qps: 500" in config
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "plain", "namespace": "default"},
            "spec": {
                "schedulerName": "hami-scheduler",
                "containers": [
                    {"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "2"}}}
                ],
            },
        }
        kube.create(pod_path("default"), pod)
        deadline = time.monotonic() + 60
        while podutil.phase(kube.get(pod_path("default", "plain"))) != "Running":
            assert time.monotonic() < deadline, "the pod was not scheduled and started"
            time.sleep(0.2)
        assert kube.get(pod_path("default", "plain"))["spec"]["nodeName"].startswith("gpu-node-")
        second = {**pod, "metadata": {"name": "plain-2", "namespace": "default"}}
        kube.create(pod_path("default"), second)
        while podutil.phase(kube.get(pod_path("default", "plain-2"))) != "Running":
            assert time.monotonic() < deadline, "the second pod was not scheduled and started"
            time.sleep(0.2)
        counted = {
            n["metadata"]["name"]: n["status"]["allocatable"]["nvidia.com/gpu"]
            for n in kube.list("/api/v1/nodes")[1]
        }
        assert set(counted.values()) == {"20"}  # GPUs x split count: what NodeResourcesFit counts against
