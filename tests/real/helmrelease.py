"""The release under test in tests/real/test_real_helm.py: helm and kubectl against one real API server,
and what the steps compare (the release's objects by key, live copies, a TLS handshake as the API server
makes it to a webhook, minimal CRDs of the Prometheus Operator's kinds)."""

from __future__ import annotations

import base64
import os
import socket
import ssl
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sim.controlplane import chart
from sim.controlplane.real import RealControlPlane
from sim.kit.kube import Kube

RELEASE, NAMESPACE = chart.RELEASE, "hami-system"
INSTANCE = f"app.kubernetes.io/instance={RELEASE}"
Obj = dict[str, Any]
Key = tuple[str, str, str]  # kind, namespace ("" when cluster-scoped), name


class ToolError(AssertionError):
    """helm or kubectl failed; the message has its command line and stderr."""


@dataclass
class Cluster:
    control_plane: RealControlPlane
    kube: Kube
    workdir: Path

    def run(self, tool: str, *args: str, stdin: str = "") -> str:
        binary = chart.helm_binary() if tool == "helm" else str(self.control_plane.kubectl())
        done = subprocess.run(
            [binary, "--kubeconfig", str(self.control_plane.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
            timeout=180,
            env={
                **os.environ,
                "HELM_CACHE_HOME": str(self.workdir / "helm-cache"),
                "HOME": str(self.workdir),
            },
        )
        if done.returncode != 0:
            raise ToolError(f"{tool} {' '.join(args)}: {done.stderr}")
        return done.stdout

    def helm(self, verb: str, values: Mapping[str, Any]) -> None:
        self.run(
            "helm", verb, RELEASE, str(chart.CHART), "--namespace", NAMESPACE, "--values", "-",
            stdin=yaml.safe_dump(dict(values)),
        )  # fmt: skip

    def strict_dry_run(self, values: Mapping[str, Any]) -> None:
        """The render with `values` (hooks aside) through `strict_apply`."""
        self.strict_apply(
            [o for o in chart.render(values, NAMESPACE) if "helm.sh/hook" not in annotations_of(o)]
        )

    def strict_apply(self, objects: list[Obj]) -> None:
        """`objects` applied server-side as a dry run with strict field validation: an unknown or
        duplicate field is an error here, where a create would only warn and drop it. As helm's own field
        manager (Helm 4 applies server-side as `helm`), so a field the new render drops is dropped."""
        self.run(
            "kubectl", "apply", "--server-side", "--dry-run=server", "--validate=strict",
            "--field-manager=helm", "--force-conflicts", "-f", "-", stdin=yaml.safe_dump_all(objects),
        )  # fmt: skip

    def manifest(self) -> list[Obj]:
        text = self.run("helm", "get", "manifest", RELEASE, "--namespace", NAMESPACE)
        return [d for d in yaml.safe_load_all(text) if isinstance(d, dict) and d.get("kind")]

    def labelled(self) -> set[Key]:
        """Every object of every listable kind, namespaced and cluster-scoped, with the release's label."""
        kinds = self.run("kubectl", "api-resources", "--verbs=list,delete", "-o", "name").split()
        listed = yaml.safe_load(
            self.run("kubectl", "get", ",".join(kinds), "-A", "-l", INSTANCE, "-o", "json")
        )
        return {key(item) for item in listed["items"]}

    def get(self, obj: Mapping[str, Any]) -> Obj | None:
        kind = str(obj["kind"]).lower() + "." + group(obj)
        args = ["get", kind.rstrip("."), obj["metadata"]["name"], "-o", "json", "--ignore-not-found"]
        if obj["metadata"].get("namespace"):
            args += ["--namespace", obj["metadata"]["namespace"]]
        text = self.run("kubectl", *args)
        return yaml.safe_load(text) if text.strip() else None


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def group(obj: Mapping[str, Any]) -> str:
    api_version = str(obj["apiVersion"])
    return api_version.split("/")[0] if "/" in api_version else ""


def key(obj: Mapping[str, Any]) -> Key:
    return (str(obj["kind"]), str(obj["metadata"].get("namespace") or ""), str(obj["metadata"]["name"]))


def manifest_keys(objects: list[Obj]) -> set[Key]:
    """The manifest's objects as the API server names them (cluster-scoped kinds carry no namespace)."""
    scoped = {"ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration", "Namespace"}
    return {
        (
            o["kind"],
            "" if o["kind"] in scoped else o["metadata"].get("namespace") or NAMESPACE,
            o["metadata"]["name"],
        )
        for o in objects
    }


def of_kind(objects: list[Obj], kind: str) -> list[Obj]:
    return [o for o in objects if o["kind"] == kind]


def find(objects: list[Obj], kind: str, suffix: str = "") -> Obj:
    (found,) = [o for o in of_kind(objects, kind) if o["metadata"]["name"].endswith(suffix)]
    return found


def live(cluster: Cluster, objects: list[Obj], kind: str, suffix: str = "") -> Obj:
    """The API server's copy of the release's one `kind` object named *`suffix`."""
    obj = cluster.get(find(objects, kind, suffix))
    assert obj is not None, f"{kind} *{suffix} missing"
    return obj


# Minimal CRDs of the Prometheus Operator's two kinds the chart renders with monitoring on (the real ones are
# far larger; the API server validates the chart's objects against these as structural, open schemas).
MONITORING_CRDS = [
    {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": plural[:-1], "kind": kind, "listKind": f"{kind}List"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                            },
                        }
                    },
                }
            ],
        },
    }
    for plural, kind in (("servicemonitors", "ServiceMonitor"), ("prometheusrules", "PrometheusRule"))
]


def secret_data(cluster: Cluster, name: str) -> dict[str, bytes]:
    secret = cluster.kube.get(f"/api/v1/namespaces/{NAMESPACE}/secrets/{name}")
    return {k: base64.b64decode(v) for k, v in secret["data"].items()}


def handshake(cert_pem: bytes, key_pem: bytes, ca_bundle: bytes, server_name: str, folder: Path) -> str:
    """Serve `cert_pem`/`key_pem` on loopback and connect as the API server calls a webhook: trusting only
    `ca_bundle`, checking `server_name`. Returns the negotiated protocol (raises on a failed verification)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tls.crt").write_bytes(cert_pem)
    (folder / "tls.key").write_bytes(key_pem)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(folder / "tls.crt", folder / "tls.key")
    client_context = ssl.create_default_context(cadata=ca_bundle.decode())
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def accept() -> None:
            connection, _ = listener.accept()
            try:
                with server_context.wrap_socket(connection, server_side=True) as tls:
                    tls.recv(1)
            except (ssl.SSLError, OSError):
                pass  # the client's verdict is the one asserted

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        with (
            socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
            client_context.wrap_socket(raw, server_hostname=server_name) as tls,
        ):
            version = str(tls.version())
            tls.sendall(b"x")
        thread.join(10)
    return version
