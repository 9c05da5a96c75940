"""What makes a started cluster a playground a newcomer can use (`python -m sim up`): the ready file's
content and the lines it prints (how to reach the cluster with the kubectl of its version, the `inspect`
commands that work, where each log is, how to stop it), the shell file to source, and, on the real control
plane, the ValidatingAdmissionPolicy that refuses `helm install` of our chart into it with a sentence.

Why the chart is refused: `sim up` already runs what the chart deploys (our worker and both servers as
processes configured from the chart's render, its webhook registration, kube-scheduler with its
configuration), and nothing here runs a Deployment's pods (no kubelet runs containers). A release would add
a second MutatingWebhookConfiguration whose Service has no endpoints, failing closed: every pod CREATE in
the cluster would then fail. The policy matches CREATE of any object carrying our chart's label
(`helm.sh/chart: hami-scheduler-<version>`, `helm install` and `helm template | kubectl apply` alike), so
the first object of a release is refused and nothing of it is left but Helm's own release record.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sim.cluster.stack import REPO_ROOT, DemoFailure, Stack
from sim.kit.kube import Kube, KubeError

TOOLS_BIN = REPO_ROOT / ".tools" / "bin"  # `make tools`: helm (and kubectl v1.35, the emulator's)
POLICY_NAME = "hami-playground-refuses-the-chart"
CHART_LABEL = "helm.sh/chart"
CHART_PREFIX = "hami-scheduler-"  # the chart's name; the label is `<name>-<version>`
REFUSAL = (
    "the playground (python -m sim up) runs the chart's pieces itself and cannot run the chart's pods: "
    "see docs/real-control-plane.md, 'Helm and the playground'"
)
# has() guards every step: an error here would refuse the request (failurePolicy Fail) for any CREATE
OUR_CHART = (
    f"has(object.metadata) && has(object.metadata.labels) && '{CHART_LABEL}' in object.metadata.labels"
    f" && object.metadata.labels['{CHART_LABEL}'].startsWith('{CHART_PREFIX}')"
)
ADMISSION = "admissionregistration.k8s.io/v1"  # ValidatingAdmissionPolicy: GA since Kubernetes 1.30
POLICY: dict[str, Any] = {
    "apiVersion": ADMISSION,
    "kind": "ValidatingAdmissionPolicy",
    "metadata": {"name": POLICY_NAME},
    "spec": {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "operations": ["CREATE"]}
            ]
        },
        "matchConditions": [{"name": "the-hami-scheduler-chart", "expression": OUR_CHART}],
        "validations": [{"expression": "false", "message": REFUSAL, "reason": "Forbidden"}],
    },
}
BINDING: dict[str, Any] = {
    "apiVersion": ADMISSION,
    "kind": "ValidatingAdmissionPolicyBinding",
    "metadata": {"name": POLICY_NAME},
    "spec": {"policyName": POLICY_NAME, "validationActions": ["Deny"]},
}
PROBE: dict[str, Any] = {  # what the policy must refuse, created as a server-side dry run only
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "hami-playground-probe", "labels": {CHART_LABEL: f"{CHART_PREFIX}probe"}},
}


def refuse_the_chart(kube: Kube, timeout: float = 30.0) -> None:
    """Install the policy and its binding, then wait until kube-apiserver enforces them (its policy
    informer lags the create): a dry-run create of a labelled ConfigMap is refused with REFUSAL."""
    try:
        kube.create(f"/apis/{ADMISSION}/validatingadmissionpolicies", POLICY)
        kube.create(f"/apis/{ADMISSION}/validatingadmissionpolicybindings", BINDING)
    except KubeError as exc:
        raise DemoFailure(f"installing the policy {POLICY_NAME} failed: {exc}") from None
    deadline, status, answer = time.monotonic() + timeout, 0, None
    while time.monotonic() < deadline:
        status, answer = kube.exchange("POST", "/api/v1/namespaces/default/configmaps", PROBE, dryRun="All")
        if status == 403 and REFUSAL in str(answer):
            return
        time.sleep(0.2)
    raise DemoFailure(
        f"the policy {POLICY_NAME} was not enforced after {timeout:g}s (HTTP {status}: {answer})"
    )


def _path_dirs(kubectl: Path) -> list[str]:
    """What the playground's shell needs on PATH, first first: the kubectl of the server's version, this
    Python's scripts (`hami-scheduler`), `make tools`'s folder (helm)."""
    dirs = [str(kubectl.parent), str(Path(sys.executable).parent), str(TOOLS_BIN)]
    return list(dict.fromkeys(dirs))


def ready_document(stack: Stack, log_level: str, detached_log: Path | None) -> dict[str, Any]:
    """The ready file's content: everything a user or a tool needs to use the running cluster."""
    assert stack.control_plane is not None
    kind, workdir = stack.control_plane.kind, stack.workdir
    kubectl = stack.control_plane.kubectl()  # the server's own version (real: built by `make kube`)
    if not kubectl.is_file():
        raise DemoFailure(f"kubectl is missing at {kubectl}: run `make tools kube`")
    extender = stack.extender_urls.get(stack.service_url, "")
    ca = str(stack.ca_file or "")
    script = Path(sys.executable).with_name("hami-scheduler")
    cli = [str(script)] if script.is_file() else [sys.executable, "-m", "app.cli"]
    # /debug/state lives on the extender listener, which requires kube-scheduler's client certificate
    # (real control plane); the emulator's single listener serves it to anyone trusting its CA
    url = extender or stack.service_url
    replica = [*cli, "inspect", "--url", url, "--ca-file", ca]
    client = workdir / "kube-scheduler-client"
    if extender:
        replica += ["--cert", str(client / "tls.crt"), "--key", str(client / "tls.key")]
    # the vendors the cluster runs, for reading the pods' annotations (Iluvatar, enabled by a switch and
    # not by a section, stays invisible there: the replica's view shows it)
    config = workdir / "device-config.yaml"
    device_config = ["--device-config", str(config)] if config.is_file() else []
    logs = {name: str(process.log_path) for name, process in sorted(stack.all_processes().items())}
    if detached_log is not None:
        logs["sim-up"] = str(detached_log)
    env = {"KUBECONFIG": str(stack.kubeconfig), "PATH": os.pathsep.join([*_path_dirs(kubectl), "$PATH"])}
    return {
        "pid": os.getpid(),
        "control_plane": kind,
        "versions": stack.control_plane.versions(),
        "workdir": str(workdir),
        "kubeconfig": str(stack.kubeconfig),
        "kubectl": str(kubectl),
        "env": env,
        "env_file": str(workdir / "env"),
        "service_url": stack.service_url,
        "service_ca": ca,
        "extender_url": extender,
        "client_cert": str(client / "tls.crt") if extender else "",
        "client_key": str(client / "tls.key") if extender else "",
        "inspect": [*cli, "inspect", "--kubeconfig", str(stack.kubeconfig), *device_config],
        "inspect_replica": replica,
        "log_level": log_level,
        "logs": logs,
        "nodes": len(stack.kube.list("/api/v1/nodes")[1]) if stack.kube is not None else 0,
        "pids": {n: p.pid for n, p in stack.all_processes().items()},
        "stop": [sys.executable, "-m", "sim", "down", "--workdir", str(workdir)],
    }


def env_file(ready: Mapping[str, Any]) -> str:
    """The shell lines `. <workdir>/env` runs (PATH keeps the caller's own after ours)."""
    env = ready["env"]
    return (
        f"export KUBECONFIG={shlex.quote(env['KUBECONFIG'])}\n"
        f'export PATH={shlex.quote(env["PATH"].removesuffix(":$PATH"))}:"$PATH"\n'
    )


def _command(argv: list[str], ready: Mapping[str, Any]) -> str:
    """`argv` as the user types it once the env file is sourced: the program's bare name if it is on PATH."""
    first = Path(argv[0])
    on_path = str(first.parent) in ready["env"]["PATH"].split(os.pathsep)
    return shlex.join([first.name if on_path else argv[0], *argv[1:]])


def ready_text(ready: Mapping[str, Any], seconds: float) -> str:
    """What `sim up` prints once ready: one line saying what runs, then how to use it."""
    server = ready["versions"].get("kube-apiserver", "")
    kubectl = Path(ready["kubectl"])
    try:
        where = kubectl.relative_to(REPO_ROOT)
    except ValueError:
        where = kubectl
    logs = sorted(Path(p).name for p in ready["logs"].values())
    direct = shlex.join([f"KUBECONFIG={ready['kubeconfig']}", str(kubectl), "get", "nodes"])
    lines = [
        f"sim up: ready in {seconds:.0f}s: {ready['nodes']} nodes on the {ready['control_plane']} control "
        f"plane{f' (Kubernetes {server})' if server else ''}, our logs at level {ready['log_level']}",
        f"  use it:   . {shlex.quote(ready['env_file'])}   # KUBECONFIG; PATH: kubectl ({where}), "
        "hami-scheduler, helm",
        f"            kubectl get nodes              # the same as: {direct}",
        f"  inspect:  {_command(ready['inspect'], ready)}",
        f"            {_command(ready['inspect_replica'], ready)}",
        f"  logs:     {ready['workdir']}/ ({', '.join(logs)})",
        f"  stop:     {shlex.join(ready['stop'])}   (or Ctrl-C where it runs in the foreground)",
    ]
    return "\n".join(lines)
