"""The chart for real (issue 22): `helm install`, `helm upgrade` and `helm uninstall` against the real
kube-apiserver, one control plane (etcd + kube-apiserver, no nodes) for the whole module.

There is no kubelet and no kube-controller-manager, so the Deployment never gets pods: what is checked is
what the API server does with the release. Every object is created by the API server with its validation
(and, before each step, a strict server-side dry run of the render refuses unknown or duplicate fields,
which a plain create would drop with a warning); the upgrade changes what its values say; the uninstall
leaves none of the objects that carry the release's label, namespaced or cluster-scoped; the webhook's
serving certificate the chart generates is verified by the caBundle it registers (a TLS handshake as the
API server makes it, to the Service's DNS name); and the release's own ServiceAccount, with a token from
the TokenRequest API, is what our registration worker runs as: it syncs and takes its Lease, and what the
chart does not grant is forbidden.

The steps share the one release: install (module fixture) -> TLS -> RBAC -> upgrade -> uninstall; each
test also runs alone (the fixture installs, upgrade and uninstall do their own step).
"""

from __future__ import annotations

import base64
import os
import ssl
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helmrelease import (
    MONITORING_CRDS,
    NAMESPACE,
    RELEASE,
    Cluster,
    Obj,
    ToolError,
    find,
    handshake,
    key,
    live,
    manifest_keys,
    of_kind,
    secret_data,
)

from sim.controlplane import binaries, chart
from sim.controlplane.real import RealControlPlane
from sim.emulator import kubeconfig as kubeconfig_file
from sim.emulator.testing import REPO_ROOT
from sim.kit.kube import Kube, KubeError
from sim.kit.processes import start_process

# the chart's KubeSchedulerConfiguration (strict decoding) and RBAC on every supported kube-apiserver
pytestmark = [pytest.mark.integration, pytest.mark.real, pytest.mark.versions("1.34", "1.37", "1.38")]

# acquire: the worker holds a Lease of its own (follow mode would wait for a kube-scheduler sidecar's)
INSTALL_VALUES: dict[str, Any] = {"leaderElection": {"mode": "acquire"}}
UPGRADE_VALUES: dict[str, Any] = {
    **INSTALL_VALUES,
    "replicas": 2,
    "devices": {"cambricon": {"enabled": True}},
    "serviceMonitor": {"enabled": True},
    "monitoring": {"rules": {"enabled": True}, "dashboard": {"enabled": True}},
}
# What a release installs whatever its values (the Secrets: generated TLS and kube-scheduler's client).
INSTALLED_KINDS = {
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "ConfigMap",
    "Secret",
    "Service",
    "Deployment",
    "MutatingWebhookConfiguration",
}


@pytest.fixture(scope="module")
def cluster(real_binaries: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("real-helm")
    control_plane = RealControlPlane(workdir / "control-plane")
    try:
        control_plane.start()
        kube = Kube.from_kubeconfig(control_plane.kubeconfig)
        try:
            yield Cluster(control_plane, kube, workdir)
        finally:
            kube.close()
    finally:
        control_plane.stop()


@pytest.fixture(scope="module")
def release(cluster: Cluster) -> list[Obj]:
    """The release installed with INSTALL_VALUES; its manifest (what `helm install` created)."""
    chart.ensure_namespaces(cluster.kube, [NAMESPACE])
    cluster.strict_dry_run(INSTALL_VALUES)
    cluster.helm("install", INSTALL_VALUES)
    return cluster.manifest()


def test_install_creates_every_object_through_the_api_servers_validation(
    cluster: Cluster, release: list[Obj]
) -> None:
    assert {o["kind"] for o in release} >= INSTALLED_KINDS
    for obj in release:
        live = cluster.get(obj)
        assert live is not None, f"{key(obj)} missing after helm install"
        assert live["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    # the release label names exactly what helm created: what the uninstall test relies on
    assert cluster.labelled() == manifest_keys(release)
    status = yaml.safe_load(cluster.run("helm", "status", RELEASE, "--namespace", NAMESPACE, "-o", "yaml"))
    assert status["info"]["status"] == "deployed" and status["version"] == 1
    # the strict dry run the steps start with does refuse what a create would silently drop
    bogus = {**find(release, "ConfigMap", "-device"), "bogus": True}
    with pytest.raises(ToolError, match=r"\.bogus: field not declared in schema"):
        cluster.strict_apply([bogus])


def webhook_tls(cluster: Cluster, release: list[Obj]) -> tuple[dict[str, bytes], bytes, str]:
    """The serving Secret's data, the registered caBundle and the Service DNS name the API server dials."""
    (registered,) = of_kind(release, "MutatingWebhookConfiguration")
    live = cluster.get(registered)
    assert live is not None
    client = live["webhooks"][0]["clientConfig"]
    bundles = {w["clientConfig"]["caBundle"] for w in live["webhooks"]}
    assert len(bundles) == 1  # every webhook of the configuration trusts the same CA
    service = client["service"]
    (secret,) = [
        s
        for s in of_kind(release, "Secret")
        if s.get("type") == "kubernetes.io/tls" and s["metadata"]["name"].endswith("-tls")
    ]
    return (
        secret_data(cluster, secret["metadata"]["name"]),
        base64.b64decode(client["caBundle"]),
        f"{service['name']}.{service['namespace']}.svc",
    )


def test_webhook_tls_as_the_chart_provisions_it(cluster: Cluster, release: list[Obj], tmp_path: Path) -> None:
    data, ca_bundle, server_name = webhook_tls(cluster, release)
    assert data["ca.crt"] == ca_bundle  # the Secret's CA is the one registered with the API server
    assert handshake(data["tls.crt"], data["tls.key"], ca_bundle, server_name, tmp_path).startswith("TLS")
    # and the check is real: another CA, or another name, is refused
    other_ca = cluster.control_plane.ca_pem  # the API server's CA, not the chart's
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(data["tls.crt"], data["tls.key"], other_ca, server_name, tmp_path / "other-ca")
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(data["tls.crt"], data["tls.key"], ca_bundle, "other.default.svc", tmp_path / "other-name")


def service_account_kubeconfig(cluster: Cluster, release: list[Obj], path: Path) -> tuple[Path, str]:
    """A kubeconfig with a token of the release's ServiceAccount from the TokenRequest API."""
    (account,) = of_kind(release, "ServiceAccount")
    name = account["metadata"]["name"]
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600},
    }
    token = cluster.kube.create(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{name}/token", request)
    control = cluster.control_plane
    config = kubeconfig_file.kubeconfig(control.url, token["status"]["token"], control.ca_pem)
    return kubeconfig_file.write(path, config), f"system:serviceaccount:{NAMESPACE}:{name}"


def allowed(kube: Kube, verb: str, resource: str, namespace: str = "", group_: str = "") -> bool:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {
            "resourceAttributes": {
                "verb": verb,
                "resource": resource,
                "namespace": namespace,
                "group": group_,
            }
        },
    }
    answer = kube.create("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review)
    return bool(answer["status"].get("allowed"))


# What the worker and the extender do (granted), and what the chart must not grant (least privilege).
PERMISSIONS = [
    ("list", "nodes", "", "", True),
    ("watch", "nodes", "", "", True),
    ("patch", "nodes", "", "", True),
    ("list", "pods", "", "", True),
    ("watch", "pods", "", "", True),
    ("create", "pods/binding", "default", "", True),
    ("watch", "resourcequotas", "", "", True),
    ("update", "leases", NAMESPACE, "coordination.k8s.io", True),
    ("create", "pods", "default", "", False),
    ("delete", "nodes", "", "", False),
    ("list", "secrets", NAMESPACE, "", False),
    ("update", "deployments", NAMESPACE, "apps", False),
    ("list", "configmaps", NAMESPACE, "", False),
    ("update", "leases", "default", "coordination.k8s.io", False),
]


def test_the_release_rbac_is_what_the_worker_runs_with(
    cluster: Cluster, release: list[Obj], tmp_path: Path
) -> None:
    kubeconfig, user = service_account_kubeconfig(cluster, release, tmp_path / "sa.kubeconfig")
    kube = Kube.from_kubeconfig(kubeconfig)
    try:
        review = kube.create(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
        assert review["status"]["userInfo"]["username"] == user
        verdicts = {(v, r, ns, g): allowed(kube, v, r, ns, g) for v, r, ns, g, _ in PERMISSIONS}
        assert verdicts == {(v, r, ns, g): want for v, r, ns, g, want in PERMISSIONS}
        with pytest.raises(KubeError) as refused:  # and a real request of a forbidden verb
            kube.create(
                "/api/v1/namespaces/default/pods", {"metadata": {"name": "x"}, "spec": {"containers": []}}
            )
        assert refused.value.status == 403
    finally:
        kube.close()
    # the worker as the installed Deployment runs it: its container's environment and device config
    deployment = live(cluster, release, "Deployment")
    device_config = live(cluster, release, "ConfigMap", "-device")["data"]["device-config.yaml"]
    (tmp_path / "device-config.yaml").write_text(device_config)
    pod = f"{RELEASE}-7d9f-abcde"
    env = {
        **os.environ,
        **chart.container_env([deployment], "worker", pod, NAMESPACE),
        "KUBECONFIG": str(kubeconfig),
        "HAMI_DEVICE_CONFIG_FILE": str(tmp_path / "device-config.yaml"),
        "HAMI_STATE_DIR": str(tmp_path / "state"),
        "HAMI_WORKER_METRICS_BIND": "127.0.0.1:0",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prometheus"),
        "HAMI_REGISTRATION_INTERVAL": "2s",
    }
    (tmp_path / "prometheus").mkdir()
    assert env["HAMI_LEADER_ELECT_MODE"] == "acquire"
    lease_path = (
        f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{env['HAMI_LEADER_ELECT_RESOURCE_NAME']}"
    )
    worker = start_process(
        [sys.executable, "-m", "workers"], log_path=tmp_path / "worker.log", env=env, cwd=REPO_ROOT
    )
    try:
        deadline = time.monotonic() + 60
        while ((cluster.kube.get_or_none(lease_path) or {}).get("spec") or {}).get("holderIdentity") != pod:
            assert worker.alive(), worker.log_tail()
            assert time.monotonic() < deadline, f"the worker took no Lease:\n{worker.log_tail()}"
            time.sleep(0.25)
        time.sleep(2.5)  # a registration round after the Lease: its lists and watches as that user
        assert worker.alive(), worker.log_tail()
    finally:
        worker.stop(timeout=15)
    log = (tmp_path / "worker.log").read_text()
    assert "forbidden" not in log.lower() and " 403" not in log, log[-3000:]


def test_upgrade_changes_what_the_values_say(cluster: Cluster, release: list[Obj]) -> None:
    tls_before = webhook_tls(cluster, release)
    cluster.run("kubectl", "apply", "-f", "-", stdin=yaml.safe_dump_all(MONITORING_CRDS))
    cluster.run("kubectl", "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    cluster.strict_dry_run(UPGRADE_VALUES)
    cluster.helm("upgrade", UPGRADE_VALUES)
    upgraded = cluster.manifest()
    assert live(cluster, upgraded, "Deployment")["spec"]["replicas"] == 2
    device = yaml.safe_load(live(cluster, upgraded, "ConfigMap", "-device")["data"]["device-config.yaml"])
    assert "cambricon" in device
    assert "cambricon" not in yaml.safe_load(
        find(release, "ConfigMap", "-device")["data"]["device-config.yaml"]
    )
    scheduler = yaml.safe_load(live(cluster, upgraded, "ConfigMap", "-config")["data"]["config.yaml"])
    managed = {m["name"] for e in scheduler["extenders"] for m in e["managedResources"]}
    assert "cambricon.com/vmlu" in managed and "nvidia.com/gpu" in managed
    for kind in ("ServiceMonitor", "PrometheusRule"):
        (obj,) = of_kind(upgraded, kind)
        assert cluster.get(obj) is not None, kind
        assert kind not in {o["kind"] for o in release}
    assert cluster.labelled() == manifest_keys(upgraded)
    status = yaml.safe_load(cluster.run("helm", "status", RELEASE, "--namespace", NAMESPACE, "-o", "yaml"))
    assert status["info"]["status"] == "deployed" and status["version"] >= 2
    # the generated certificate is kept across the upgrade, and the caBundle still names its CA
    assert webhook_tls(cluster, upgraded) == tls_before


def test_uninstall_leaves_none_of_our_objects(cluster: Cluster, release: list[Obj]) -> None:
    installed = cluster.manifest()
    assert cluster.labelled() == manifest_keys(installed)
    cluster.run("helm", "uninstall", RELEASE, "--namespace", NAMESPACE)
    deadline = time.monotonic() + 30
    while (left := cluster.labelled()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert left == set()
    assert [key(o) for o in installed if cluster.get(o) is not None] == []
    assert cluster.run("helm", "list", "--all-namespaces", "-q").split() == []
