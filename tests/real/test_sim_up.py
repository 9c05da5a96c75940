"""`python -m sim up` (issue 22 scope 4, issue 31 scopes 4 and 5): what it writes and prints, the commands
it names working as written, our processes at its log level, and the chart refused with a sentence.

- D/kubeconfig, D/env and D/ready; the ready file names the kubectl of the server's version
  (`ControlPlane.kubectl()`), the `inspect` commands, every log, every PID; the printed lines
  say the same; SIGTERM stops it with one line and every process it started gone (by PID), D/ready removed;
- on the real control plane a pod applied with that kubectl goes through our webhook, kube-scheduler and
  extender; on both, a pod that asks for no managed device is placed by the cluster's default scheduler;
- both `inspect` commands of the ready file show the GPU pod's device; `inspect --url` at the public
  listener, or at the extender without kube-scheduler's client certificate, is one line naming the right
  listener and flags (exit 2); the decision log is in our logs (INFO);
- real: `helm install` of our chart is refused by the playground's ValidatingAdmissionPolicy with its
  sentence, nothing of the release is created but Helm's record, pods are still created, `helm uninstall`
  removes the record;
- `--detach` returns once ready; a second `sim up` in the same folder is refused; `sim down` stops it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from playground import Playground, sim_up

from sim.cluster.playground import REFUSAL
from sim.cluster.stack import group_members, pid_alive
from sim.controlplane import binaries
from sim.emulator.testing import REPO_ROOT, wait_for
from sim.kit import podutil
from sim.kit.kube import pod_path

pytestmark = pytest.mark.integration
CHART_UID = 10001  # values.yaml podSecurityContext.runAsUser (tests/image checks the image runs as it)
GPU_POD = """
apiVersion: v1
kind: Pod
metadata: {name: up-gpu, namespace: default}
spec:
  containers:
    - {name: main, image: cuda, resources: {limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 3000}}}
"""
PLAIN_POD = """
apiVersion: v1
kind: Pod
metadata: {name: up-plain, namespace: default}
spec:
  containers: [{name: main, image: busybox, resources: {requests: {cpu: 100m}}}]
"""


def uid_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line for {pid}")


def check_ready_file(up: Playground, control_plane: str) -> None:
    ready, workdir = up.ready, up.workdir
    assert ready["control_plane"] == control_plane and ready["kubeconfig"] == str(workdir / "kubeconfig")
    kubectl = binaries.find().kubectl if control_plane == "real" else REPO_ROOT / ".tools" / "bin" / "kubectl"
    assert ready["kubectl"] == str(kubectl) and ready["log_level"] == "INFO"
    assert set(ready["pids"]) <= set(ready["logs"]) and all(Path(p).is_file() for p in ready["logs"].values())
    env = (workdir / "env").read_text()
    assert f"export KUBECONFIG={workdir / 'kubeconfig'}\n" in env
    assert f"export PATH={Path(ready['kubectl']).parent}:" in env  # the server's kubectl comes first
    sourced = subprocess.run(
        ["bash", "-c", f". {workdir / 'env'} && command -v kubectl hami-scheduler"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert sourced[0] == ready["kubectl"] and Path(sourced[1]).parent == Path(sys.executable).parent
    printed = up.output()
    for line in (f". {workdir / 'env'}", "kubectl get nodes", "hami-scheduler inspect --kubeconfig", "--url"):
        assert line in printed, (line, printed)
    assert " -m sim down --workdir " in printed and f"{workdir}/ (" in printed
    version = up.kubectl("version", "-o", "json")
    assert version.returncode == 0, version.stderr
    if control_plane == "real":  # the server's own kubectl: the same minor
        versions = orjson.loads(version.stdout)
        assert versions["clientVersion"]["minor"] == versions["serverVersion"]["minor"], versions
        assert ready["client_cert"] and "--cert" in ready["inspect_replica"]


def running(up: Playground, name: str) -> dict[str, Any] | None:
    pod = up.kube.get(pod_path("default", name))
    return pod if podutil.phase(pod) == "Running" else None


def check_pods(up: Playground, control_plane: str) -> str:
    """The GPU pod scheduled and running, the plain pod placed by the default scheduler; the GPU's UUID."""
    gpu = (
        GPU_POD
        if control_plane == "real"
        else GPU_POD.replace("spec:", "spec:\n  schedulerName: hami-scheduler")
    )
    for manifest in (gpu, PLAIN_POD):  # the emulator calls no webhook (docs/emulator.md)
        applied = up.kubectl("apply", "-f", "-", stdin=manifest)
        assert applied.returncode == 0, applied.stderr
    created = wait_for(lambda: running(up, "up-gpu"), 120, "the GPU pod running")
    assert podutil.annotations_of(created)["hami.io/bind-phase"] == "success"
    plain = wait_for(lambda: running(up, "up-plain"), 60, "the plain pod running")
    assert podutil.spec(plain)["schedulerName"] == "default-scheduler"  # the webhook left it alone
    assert podutil.annotations_of(plain).get("hami.io/vgpu-node") is None
    return str(podutil.annotations_of(created)["hami.io/vgpu-devices-allocated"]).split(",")[0]


def check_inspect(up: Playground, uuid: str) -> None:
    ready = up.ready
    for command in (ready["inspect"], ready["inspect_replica"]):
        done = up.run([*command, "-o", "json"])
        assert done.returncode == 0 and done.stderr == "", done.stderr
        devices = {d["uuid"]: d for n in orjson.loads(done.stdout)["nodes"] for d in n["devices"]}
        assert [p["name"] for p in devices[uuid]["pods"]] == ["up-gpu"], command
    if not ready["extender_url"]:
        return
    inspect = ready["inspect"][: ready["inspect"].index("inspect") + 1]  # the program, without a source
    public = up.run([*inspect, "--url", ready["service_url"], "--ca-file", ready["service_ca"]])
    assert public.returncode == 2 and public.stderr.count("\n") == 1, public.stderr
    assert "HTTP 404: /debug/state is not served on this listener" in public.stderr
    assert "extender listener" in public.stderr and "--cert" in public.stderr
    bare = up.run([*inspect, "--url", ready["extender_url"], "--ca-file", ready["service_ca"]])
    assert bare.returncode == 2 and bare.stderr.count("\n") == 1, bare.stderr
    # the server's alert, or (when the reset of its close overtook the alert) the same cause as the likely one
    closed = "the replica closed the TLS connection ("
    assert (
        "requires a client certificate (TLSV13_ALERT_CERTIFICATE_REQUIRED)" in bare.stderr
        or closed in bare.stderr
    )
    assert "--cert <tls.crt> --key <tls.key>" in bare.stderr
    serving = Path(ready["service_ca"]).with_name("tls.crt"), Path(ready["service_ca"]).with_name("tls.key")
    other = up.run([*inspect, "--url", ready["extender_url"], "--ca-file", ready["service_ca"],
                    "--cert", str(serving[0]), "--key", str(serving[1])])  # fmt: skip
    assert other.returncode == 2 and other.stderr.count("\n") == 1, other.stderr
    refused = f"refused the client certificate {serving[0]} (TLSV1_ALERT_UNKNOWN_CA)"
    assert refused in other.stderr or closed in other.stderr, other.stderr


def check_decision_log(up: Playground, control_plane: str) -> None:
    """INFO: the one-line-per-decision log of the GPU pod's filter is in the log of the server that
    decided (the extender listener's on the real control plane)."""
    log = Path(up.ready["logs"]["extender" if control_plane == "real" else "service"]).read_text()
    lines = [line for line in log.splitlines() if '"hami.decisions"' in line and "up-gpu" in line]
    assert any('"decision":"filter"' in line.replace(" ", "") for line in lines), log[-2000:]


def check_helm_refused(up: Playground) -> None:
    chart = str(REPO_ROOT / "helm" / "hami-scheduler")
    install = up.run(["helm", "install", "hami", chart, "--namespace", "hami-system"])  # the harness's
    assert install.returncode != 0 and REFUSAL in install.stderr, install.stderr
    assert "ValidatingAdmissionPolicy 'hami-playground-refuses-the-chart'" in install.stderr
    left = up.kubectl("get", "all,configmaps,secrets,mutatingwebhookconfigurations", "-A", "-o", "name",
                      "-l", "app.kubernetes.io/instance=hami")  # fmt: skip
    assert left.returncode == 0 and left.stdout == "", left.stdout + left.stderr
    hooks = up.kubectl("get", "mutatingwebhookconfigurations", "-o", "name").stdout.split()
    assert hooks == ["mutatingwebhookconfiguration.admissionregistration.k8s.io/hami-scheduler-hami-system"]
    # pods are created as before, and Helm's own record of the failed release goes with an uninstall
    applied = up.kubectl("apply", "-f", "-", stdin=PLAIN_POD.replace("up-plain", "after-helm"))
    assert applied.returncode == 0, applied.stderr
    uninstall = up.run(["helm", "uninstall", "hami", "--namespace", "hami-system"])
    assert uninstall.returncode == 0, uninstall.stderr
    assert up.run(["helm", "list", "--all-namespaces", "--failed", "-q"]).stdout.split() == []


@pytest.mark.parametrize(
    "control_plane", ["emulator", pytest.param("real", marks=pytest.mark.real)], ids=["emulator", "real"]
)
def test_sim_up_says_what_it_is_and_leaves_nothing(
    tmp_path: Path, control_plane: str, from_image: str
) -> None:
    """With --from-image (real): our worker and both Gunicorn servers are the image's, as the chart's uid."""
    image = ["--from-image", from_image] if from_image and control_plane == "real" else []
    flags = ["--control-plane", control_plane, "--nodes", "2", "--gpus-per-node", "2", *image]
    with sim_up(tmp_path / "up", *flags) as up:
        check_ready_file(up, control_plane)
        uuid = check_pods(up, control_plane)
        check_inspect(up, uuid)
        check_decision_log(up, control_plane)
        if control_plane == "real":
            check_helm_refused(up)
        if image:  # each container's processes: `buildah run`'s group, the chart's user inside
            for name in ("worker", "extender", "service"):
                members = group_members(up.ready["pids"][name])
                assert CHART_UID in {uid_of(pid) for pid in members}, (name, members)
    if image:  # each container got SIGTERM and stopped by itself (buildah run SIGKILLs it on its own SIGTERM)
        for name in ("worker", "extender", "service"):
            assert "exited on killed" not in (tmp_path / "up" / f"{name}.log").read_text(errors="replace"), (
                name
            )
        containers = subprocess.run(
            ["buildah", "containers", "--format", "{{.ContainerName}}"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert not [c for c in containers.stdout.split() if c.startswith("hami-sim-")], containers.stdout


def test_detach_returns_once_ready_and_sim_down_stops_it(tmp_path: Path) -> None:
    """On the emulator (the same code path as the real control plane's, seconds instead of tens)."""
    workdir = tmp_path / "up"
    sim = [sys.executable, "-m", "sim"]
    up = [*sim, "up", "--control-plane", "emulator", "--nodes", "1", "--gpus-per-node", "1"]
    down = [*sim, "down", "--workdir", str(workdir)]
    try:
        started = subprocess.run([*up, "--workdir", str(workdir), "--detach"], capture_output=True, text=True,
                                 cwd=REPO_ROOT, timeout=180, check=False)  # fmt: skip
        assert started.returncode == 0, started.stderr
        assert started.stdout.startswith("sim up: ready in ") and f". {workdir / 'env'}" in started.stdout
        ready = orjson.loads((workdir / "ready").read_bytes())
        assert pid_alive(ready["pid"]) and (workdir / "sim-up.log").exists()
        again = subprocess.run([*up, "--workdir", str(workdir)], capture_output=True, text=True,
                               cwd=REPO_ROOT, timeout=60, check=False)  # fmt: skip
        assert again.returncode == 1 and f"a playground already runs in {workdir}" in again.stderr
        stopped = subprocess.run(
            down, capture_output=True, text=True, cwd=REPO_ROOT, timeout=120, check=False
        )
        assert stopped.returncode == 0 and "stopped" in stopped.stdout, stopped.stderr
        deadline = time.monotonic() + 10  # a straggler got SIGKILL; on a loaded machine it may take a moment
        while (alive := [p for p in [ready["pid"], *ready["pids"].values()] if pid_alive(p)]) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.1)
        assert not alive
        assert "sim up: stopped; the " in (workdir / "sim-up.log").read_text()
        assert not (workdir / "ready").exists() and not (workdir / "sim-up.pid").exists()
        nothing = subprocess.run(down, capture_output=True, text=True, cwd=REPO_ROOT, timeout=60, check=False)
        assert nothing.returncode == 0 and "no playground runs in" in nothing.stdout
    finally:
        subprocess.run(down, capture_output=True, cwd=REPO_ROOT, timeout=120, check=False)
