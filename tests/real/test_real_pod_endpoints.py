"""Every pod endpoint each supported kube-apiserver serves, classified: can it change a pod's metadata, and is
it guarded by the chart's webhook registration (issue 28; architecture invariant 8).

Hand-made endpoint lists missed the legacy `bindings` endpoint (finding 1). Here, per version of
tools/kube/versions.tsv whose binaries are built, kube-apiserver (with etcd, nothing else) is started and
its discovery read; every resource `pods/*` it lists, and `bindings`, is classified:

- by a probe, where one can be sent: an update/patch of the subresource, or a create of a Binding, that
  sets an annotation and a label; the pod is read back to see whether they landed;
- by its nature, where no probe can be sent without a kubelet: the streaming endpoints (`exec`, `attach`,
  `portforward`, `proxy`, `log`) read or proxy and store nothing; `eviction` deletes the pod (or is refused)
  and stores none of its metadata;
- a subresource not named here fails the test until someone classifies it.

Each endpoint that changes metadata must be registered in the chart's MutatingWebhookConfiguration for the
operations its verbs map to (create -> CREATE, update/patch -> UPDATE). Versions without built binaries are
listed as skipped with the reason and the command that builds them; the default version must be built.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from sim.controlplane import binaries, chart
from sim.controlplane.real import RealControlPlane
from sim.kit.kube import Kube, KubeError, pod_path

pytestmark = [pytest.mark.integration, pytest.mark.real]
ROWS = binaries.supported(binaries.VERSIONS_FILE.read_text())
DEFAULT = ROWS[0][0]
NO_STORAGE = {  # subresources that store nothing of the request on the pod, and why
    "attach": "streams to the kubelet (connect)",
    "exec": "streams to the kubelet (connect)",
    "portforward": "streams to the kubelet (connect)",
    "proxy": "proxies to the pod (connect)",
    "log": "reads the container log from the kubelet",
    "eviction": "deletes the pod through its PodDisruptionBudgets, or refuses; stores no metadata",
}
PROBED = {"status", "ephemeralcontainers", "resize", "binding"}  # probed below
OPERATIONS = {"create": "CREATE", "update": "UPDATE", "patch": "UPDATE"}
PROBE_ANNOTATION, PROBE_LABEL = "example.com/probe", "example.com/probe"


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "nobody",
            "containers": [
                {
                    "name": "c",
                    "image": "i",
                    "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "100m"}},
                }
            ],
        },
    }


def _landed(kube: Kube, name: str) -> bool:
    meta = kube.get(pod_path("default", name))["metadata"]
    return PROBE_ANNOTATION in (meta.get("annotations") or {}) or PROBE_LABEL in (meta.get("labels") or {})


def _probe(kube: Kube, resource: str, verbs: set[str]) -> bool:
    """Does a write to this endpoint that sets an annotation and a label store them on the pod?"""
    name = f"probe-{resource.replace('/', '-')}"
    created = kube.create(pod_path("default"), _pod(name))
    meta = {"annotations": {PROBE_ANNOTATION: "x"}, "labels": {PROBE_LABEL: "x"}}
    if resource in ("pods/binding", "bindings"):
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "uid": created["metadata"]["uid"], **meta},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "node-x"},
        }
        path = (
            "/api/v1/namespaces/default/bindings"
            if resource == "bindings"
            else pod_path("default", name, "binding")
        )
        kube.create(path, binding)
        return _landed(kube, name)
    assert verbs & {"update", "patch"}, f"{resource}: no write verb to probe ({sorted(verbs)})"
    sub = resource.split("/", 1)[1]
    try:
        kube.patch(pod_path("default", name, sub), {"metadata": meta})
    except KubeError as exc:  # refused outright: nothing stored either, but say so if it is not a 4xx
        assert 400 <= exc.status < 500, exc
    return _landed(kube, name)


def _guarded(rules: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(op, resource) for rule in rules for op in rule["operations"] for resource in rule["resources"]}


@pytest.mark.parametrize(("kubernetes", "etcd"), ROWS, ids=[row[0] for row in ROWS])
def test_every_pod_endpoint_that_changes_metadata_is_guarded(
    kubernetes: str, etcd: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {**os.environ, "HAMI_KUBE_VERSION": kubernetes, "HAMI_ETCD_VERSION": etcd}
    try:
        binaries.find(env)
    except binaries.MissingBinaries as exc:
        if kubernetes == DEFAULT:
            pytest.fail(f"the default version is not built: {exc}")
        pytest.skip(f"Kubernetes {kubernetes} skipped: {exc}")
    monkeypatch.setenv("HAMI_KUBE_VERSION", kubernetes)
    monkeypatch.setenv("HAMI_ETCD_VERSION", etcd)
    rules = chart.find(chart.render({}), "MutatingWebhookConfiguration")["webhooks"][0]["rules"]
    guarded = _guarded(rules)
    control_plane = RealControlPlane(tmp_path / "cp", users=())
    try:
        control_plane.start()
        kube = Kube.from_kubeconfig(control_plane.kubeconfig)
        listed = {r["name"]: set(r.get("verbs") or ()) for r in kube.get("/api/v1")["resources"]}
        endpoints = {
            name: verbs for name, verbs in listed.items() if name == "bindings" or name.startswith("pods/")
        }
        assert {"pods/binding", "bindings", "pods/status"} <= set(endpoints), sorted(endpoints)
        unclassified = {
            name
            for name in endpoints
            if name != "bindings" and name.split("/", 1)[1] not in {*NO_STORAGE, *PROBED}
        }
        assert not unclassified, (
            f"{kubernetes} serves unclassified pod endpoints {sorted(unclassified)}: classify them"
        )
        writes = {"pods": listed["pods"] & {"create", "update", "patch"}}
        for name, verbs in sorted(endpoints.items()):
            probed = name == "bindings" or name.split("/", 1)[1] in PROBED
            if probed and _probe(kube, name, verbs):
                writes[name] = verbs & set(OPERATIONS)
        kube.close()
    finally:
        control_plane.stop()
    assert {"pods/status", "pods/binding", "bindings"} <= set(writes), writes  # known to copy metadata
    unguarded = sorted(
        f"{name} {OPERATIONS[verb]}"
        for name, verbs in writes.items()
        for verb in verbs
        if (OPERATIONS[verb], name) not in guarded
    )
    assert not unguarded, f"{kubernetes}: pod endpoints that change metadata and are not guarded: {unguarded}"
