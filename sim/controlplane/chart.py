"""Our Helm chart, rendered with `helm template` and turned into what a loopback cluster runs.

Nothing here is a test-only copy of the chart's configuration: the real kube-scheduler loads the chart's
KubeSchedulerConfiguration (only `urlPrefix` and `tlsConfig.caFile` point at the local service), the
service and the worker run with the chart's containers' environment (POD_NAME/POD_NAMESPACE resolved, file
paths, ports and the kubeconfig replaced), serve the chart's own Helm-generated TLS Secret (its SANs
include 127.0.0.1), the API server enforces the chart's ClusterRole/Role bindings for the ServiceAccount's
user, and the MutatingWebhookConfiguration is the chart's with `clientConfig.service` replaced by a
loopback URL (the chart's caBundle already names the CA that signed the serving certificate).

What the chart does not ship is added here and said so: the device plugin's RBAC (HAMi's device-plugin
chart grants it) for the simulated nodes' user.
"""

from __future__ import annotations

import base64
import copy
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sim.controlplane.base import DEVICE_PLUGIN, RELEASE_NAMESPACE
from sim.kit.kube import Kube, KubeError

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "helm" / "hami-scheduler"
RELEASE = "hami-scheduler"
Obj = dict[str, Any]
CLUSTER_SCOPED = frozenset({"Namespace", "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration"})
RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")

# The simulated device plugin and kubelet (sim nodes): what HAMi's device-plugin chart grants its
# ServiceAccount, plus what the kubelet does that we simulate (node registration, pod status, deletions).
DEVICE_PLUGIN_RBAC: tuple[Obj, ...] = (
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "hami-sim-device-plugin"},
        "rules": [
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "create", "patch"]},
            {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch", "update"]},
            {
                "apiGroups": [""],
                "resources": ["pods"],
                "verbs": ["get", "list", "watch", "patch", "update", "delete"],
            },
            {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch", "update"]},
            {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
        ],
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "hami-sim-device-plugin"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "hami-sim-device-plugin",
        },
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": DEVICE_PLUGIN.name}],
    },
)


class ChartError(RuntimeError):
    """helm is missing or the chart did not render; the message says which."""


def helm_binary() -> str:
    local = REPO_ROOT / ".tools" / "bin" / "helm"
    found = str(local) if local.exists() else shutil.which("helm")
    if not found:
        raise ChartError("helm is not installed: run `make tools`")
    return found


def render(values: Mapping[str, Any], namespace: str = RELEASE_NAMESPACE) -> list[Obj]:
    """`helm template` of our chart with `values` (the chart's tests excluded)."""
    argv = [helm_binary(), "template", RELEASE, str(CHART), "--namespace", namespace, "--values", "-"]
    done = subprocess.run(
        argv, input=yaml.safe_dump(dict(values)), capture_output=True, text=True, check=False, timeout=120
    )
    if done.returncode != 0:
        raise ChartError(f"helm template failed: {done.stderr.strip()}")
    return [d for d in yaml.safe_load_all(done.stdout) if isinstance(d, dict) and d.get("kind")]


def find(objects: Iterable[Obj], kind: str, name_suffix: str = "") -> Obj:
    for obj in objects:
        if obj["kind"] == kind and str(obj["metadata"]["name"]).endswith(name_suffix):
            return obj
    raise ChartError(f"the chart rendered no {kind} named *{name_suffix}")


def api_path(obj: Mapping[str, Any]) -> str:
    """The collection path an object is created at (plural = lower-case kind + s, true for our kinds)."""
    group_version = str(obj["apiVersion"])
    prefix = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
    plural = str(obj["kind"]).lower() + "s"
    if obj["kind"] in CLUSTER_SCOPED:
        return f"{prefix}/{plural}"
    return f"{prefix}/namespaces/{obj['metadata'].get('namespace') or 'default'}/{plural}"


def apply(kube: Kube, objects: Iterable[Obj]) -> None:
    """Create each object; one that exists already is replaced (PUT with its resourceVersion)."""
    for obj in objects:
        path = api_path(obj)
        try:
            kube.create(path, obj)
        except KubeError as exc:
            if exc.status != 409:
                raise KubeError(
                    exc.status, exc.reason, f"{obj['kind']} {obj['metadata']['name']}: {exc.message}"
                ) from None
            current = kube.get(f"{path}/{obj['metadata']['name']}")
            replacement = copy.deepcopy(obj)
            replacement["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            kube.request("PUT", f"{path}/{obj['metadata']['name']}", replacement)


def ensure_namespaces(kube: Kube, names: Iterable[str]) -> None:
    for name in names:
        try:
            kube.create(
                "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            )
        except KubeError as exc:
            if exc.status != 409:
                raise


@dataclass(frozen=True)
class TlsFiles:
    cert: Path
    key: Path
    ca: Path
    ca_pem: bytes


def write_tls(objects: Iterable[Obj], folder: Path, suffix: str = "-tls") -> TlsFiles:
    """The chart's TLS Secret (tls.crt, tls.key, ca.crt) as files; `suffix` names another Secret of the
    same shape (`-kube-scheduler-client`: kube-scheduler's client certificate and the CA the extender's
    scheduler verbs require, issue 11)."""
    secret = find(objects, "Secret", suffix)
    data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for key in ("tls.crt", "tls.key", "ca.crt"):
        if key not in data:
            raise ChartError(f"the chart's Secret *{suffix} has no {key}")
        paths[key] = folder / key
        paths[key].write_bytes(data[key])
    paths["tls.key"].chmod(0o600)
    return TlsFiles(paths["tls.crt"], paths["tls.key"], paths["ca.crt"], data["ca.crt"])


def device_config(objects: Iterable[Obj]) -> str:
    return str(find(objects, "ConfigMap", "-device")["data"]["device-config.yaml"])


def scheduler_configuration(
    objects: Iterable[Obj], extender_url: str, ca_file: Path, client: TlsFiles | None = None
) -> Obj:
    """The chart's KubeSchedulerConfiguration with the extender at `extender_url`, trusting `ca_file`,
    presenting `client`'s certificate where the chart has kube-scheduler present one (else none)."""
    config: Obj = yaml.safe_load(find(objects, "ConfigMap", "-config")["data"]["config.yaml"])
    for extender in config.get("extenders") or []:
        extender["urlPrefix"] = extender_url
        tls = extender.get("tlsConfig")
        if isinstance(tls, dict) and tls.get("caFile"):
            tls["caFile"] = str(ca_file)
        if isinstance(tls, dict) and tls.get("certFile"):
            if client is None:
                tls.pop("certFile")
                tls.pop("keyFile", None)
            else:
                tls["certFile"], tls["keyFile"] = str(client.cert), str(client.key)
    return config


def webhook_configuration(objects: Iterable[Obj], url: str) -> Obj:
    """The chart's MutatingWebhookConfiguration, every webhook's clientConfig a loopback `url`."""
    hook = copy.deepcopy(find(objects, "MutatingWebhookConfiguration"))
    for webhook in hook["webhooks"]:
        client = webhook["clientConfig"]
        client.pop("service", None)
        client["url"] = url
    return hook


def container_env(
    objects: Iterable[Obj], container: str, pod_name: str, namespace: str, node: str = ""
) -> dict[str, str]:
    """The Deployment's `container` environment, with the downward API's pod name and namespace, and the
    pod's node when it runs as a Pod on one (`node`; otherwise NODE_NAME stays unset, as for no node)."""
    deployment = find(objects, "Deployment")
    containers = {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}
    if container not in containers:
        raise ChartError(f"the chart's Deployment has no container {container}")
    fields = {"metadata.name": pod_name, "metadata.namespace": namespace}
    if node:
        fields["spec.nodeName"] = node
    env: dict[str, str] = {}
    for item in containers[container].get("env") or []:
        if "value" in item:
            env[item["name"]] = str(item["value"])
        elif ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath") in fields:
            env[item["name"]] = fields[item["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


def wait_for_webhook(kube: Kube, namespace: str, scheduler_name: str, timeout: float = 30.0) -> None:
    """The API server picks webhook configurations up asynchronously: dry-run a GPU pod until it comes
    back mutated with our schedulerName."""
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "webhook-probe-", "namespace": namespace},
        "spec": {
            "containers": [
                {"name": "probe", "image": "probe", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
            ]
        },
    }
    deadline, last = time.monotonic() + timeout, ""
    path = f"/api/v1/namespaces/{namespace}/pods"
    while time.monotonic() < deadline:
        try:
            pod = kube.request("POST", path, probe, params={"dryRun": "All"})
            if (pod.get("spec") or {}).get("schedulerName") == scheduler_name:
                return
            last = f"schedulerName {pod.get('spec', {}).get('schedulerName')!r}"
        except KubeError as exc:
            last = str(exc)
        time.sleep(0.2)
    raise ChartError(f"the webhook did not mutate a probe pod within {timeout:g}s ({last})")
