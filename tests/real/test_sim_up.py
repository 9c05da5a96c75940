"""`python -m sim up` as the issue specifies: D/kubeconfig (admin), then D/ready; in the foreground until
SIGTERM; then every process it started is gone (by PID) and D/ready removed. On the real control plane a pod
created with the admin kubeconfig is scheduled through our webhook, kube-scheduler and extender; on both, a
pod that asks for no managed device is placed by the cluster's default scheduler (issue 22, scope 4)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from sim.cluster.stack import group_members, pid_alive
from sim.emulator.testing import REPO_ROOT
from sim.kit import podutil
from sim.kit.kube import Kube, pod_path
from sim.kit.processes import start_process

pytestmark = pytest.mark.integration
CHART_UID = 10001  # values.yaml podSecurityContext.runAsUser (tests/image checks the image runs as it)
GPU_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "up-gpu", "namespace": "default"},
    "spec": {
        "containers": [{"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
    },
}
PLAIN_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "up-plain", "namespace": "default"},
    "spec": {
        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}]
    },
}


@pytest.mark.parametrize(
    "control_plane", ["emulator", pytest.param("real", marks=pytest.mark.real)], ids=["emulator", "real"]
)
def test_sim_up_serves_until_sigterm_and_leaves_nothing(
    tmp_path: Path, control_plane: str, from_image: str
) -> None:
    """With --from-image (real): our worker and both Gunicorn servers are the image's, as the chart's uid."""
    workdir = tmp_path / "up"
    image = ["--from-image", from_image] if from_image and control_plane == "real" else []
    argv = [
        sys.executable, "-m", "sim", "up", "--control-plane", control_plane, "--nodes", "2",
        "--gpus-per-node", "2", "--workdir", str(workdir), *image,
    ]  # fmt: skip
    up = start_process(argv, log_path=tmp_path / "up.log", cwd=REPO_ROOT)
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 180
        while not (workdir / "ready").exists():
            assert up.alive(), up.log_tail()
            assert time.monotonic() < deadline, up.log_tail()
            time.sleep(0.2)
        ready = orjson.loads((workdir / "ready").read_bytes())
        pids = list(ready["pids"].values())
        assert ready["control_plane"] == control_plane and ready["kubeconfig"] == str(workdir / "kubeconfig")
        kube = Kube.from_kubeconfig(workdir / "kubeconfig")
        pod = dict(GPU_POD)
        if control_plane == "emulator":  # the emulator calls no webhook (docs/emulator.md)
            pod = {**pod, "spec": {**pod["spec"], "schedulerName": "hami-scheduler"}}
        kube.create(pod_path("default"), pod)
        kube.create(pod_path("default"), PLAIN_POD)
        while podutil.phase(created := kube.get(pod_path("default", "up-gpu"))) != "Running":
            assert time.monotonic() < deadline, up.log_tail()
            time.sleep(0.2)
        assert podutil.annotations_of(created)["hami.io/bind-phase"] == "success"
        while not podutil.node_name(plain := kube.get(pod_path("default", "up-plain"))):
            assert time.monotonic() < deadline, up.log_tail()
            time.sleep(0.2)
        assert podutil.spec(plain)["schedulerName"] == "default-scheduler"  # the webhook left it alone
        assert podutil.annotations_of(plain).get("hami.io/vgpu-node") is None
        kube.close()
        if image:  # each container's processes: `buildah run`'s group, the chart's user inside
            for name in ("worker", "extender", "service"):
                members = group_members(ready["pids"][name])
                assert CHART_UID in {uid_of(pid) for pid in members}, (name, members)
        os.kill(up.pid, signal.SIGTERM)
        up_deadline = time.monotonic() + 60
        while up.alive():
            assert time.monotonic() < up_deadline, "sim up did not stop after SIGTERM"
            time.sleep(0.2)
        assert up.returncode == 0, up.log_tail()
    finally:
        up.stop(timeout=30)
        leftovers = [pid for pid in pids if pid_alive(pid)]
        for pid in leftovers:
            os.kill(pid, signal.SIGKILL)
    assert leftovers == [] and pids
    assert not (workdir / "ready").exists()
    if image:  # each container got SIGTERM and stopped by itself (buildah run SIGKILLs it on its own SIGTERM)
        for name in ("worker", "extender", "service"):
            assert "exited on killed" not in (workdir / f"{name}.log").read_text(errors="replace"), name
        containers = subprocess.run(
            ["buildah", "containers", "--format", "{{.ContainerName}}"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert not [c for c in containers.stdout.split() if c.startswith("hami-sim-")], containers.stdout


def uid_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line for {pid}")
