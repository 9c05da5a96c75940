"""`ClusterSpec(kubelet_deletions=True)` on the emulator: the emulator leaves graceful pod deletions to the
simulated kubelets as kube-apiserver does, so `grace_scale` means the same on both control planes (the real
one: tests/real/test_real_controllers.py)."""

from __future__ import annotations

import time
from pathlib import Path

from sim.cluster.harness import running_cluster
from sim.cluster.spec import ClusterSpec
from sim.emulator.testing import wait_for
from sim.kit import podutil
from sim.kit.kube import pod_path


def test_an_emulator_cluster_with_kubelet_deletions_honours_the_grace_period(tmp_path: Path) -> None:
    spec = ClusterSpec(nodes=1, gpus_per_node=2, scheduler=False, kubelet_deletions=True, grace_scale=0.5)
    with running_cluster(tmp_path, spec) as stack:
        kube = stack.kube
        assert kube is not None
        node = kube.list("/api/v1/nodes")[1][0]["metadata"]["name"]
        body = {
            "metadata": {"name": "web"},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "nginx"}]},
        }
        kube.create(pod_path("default"), body)
        wait_for(lambda: podutil.phase(kube.get(pod_path("default", "web"))) == "Running", 30, "the pod")
        options = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 4}
        started = time.monotonic()
        kube.request("DELETE", pod_path("default", "web"), options)
        while (pod := kube.get_or_none(pod_path("default", "web"))) is not None:
            assert podutil.terminating(pod) and podutil.phase(pod) == "Running"
            assert time.monotonic() - started < 30, "the kubelet never finished the deletion"
            time.sleep(0.05)
        assert time.monotonic() - started >= 2.0  # 4 s x 0.5, not the emulator's own 1 s delay
