"""Bindings at both endpoints on the real kube-apiserver with the chart's webhook (issue 28, finding 1).

kube-apiserver binds a pod through `POST pods/{name}/binding` and through the legacy `POST
namespaces/{ns}/bindings`; both copy the Binding's annotations (and labels) onto the pod. Before the fix the
chart registered the webhook for `pods/binding` only, and `matchPolicy: Equivalent` does not map `bindings`
to it: a forged allocation sent to the legacy endpoint bound the pod with it. Shown here:

- a Binding carrying `hami.io/vgpu-devices-allocated` is refused at both endpoints, the pod left unbound and
  clean, and so is one setting the opt-out label;
- a plain Binding binds at both endpoints;
- Bindings carrying only labels (the zone and region PodTopologyLabels adds to every `pods/binding` from
  1.35, or given by the client) or another annotation are never sent to the webhook: kube-apiserver's own
  metrics count them as excluded by our matchConditions, with no call to us and no evaluation error.

One control plane start, no kube-scheduler (the pods name nobody's scheduler).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from admissionmetrics import Counts, counts
from unplaced import unplaced_pod

from sim.cluster.harness import running_cluster
from sim.cluster.spec import ClusterSpec
from sim.controlplane.real import minor_of
from sim.kit.kube import Kube, KubeError, pod_path

pytestmark = [pytest.mark.integration, pytest.mark.real]
FORGED = {"hami.io/vgpu-devices-allocated": "GPU-forged,NVIDIA,80000,100:;"}
TOPOLOGY = ("topology.kubernetes.io/zone", "topology.kubernetes.io/region")
ENDPOINTS = ("pods/binding", "bindings")


def _bind(kube: Kube, endpoint: str, pod: dict[str, Any], node: str, **metadata: Any) -> None:
    meta = pod["metadata"]
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": meta["name"], "uid": meta["uid"], **metadata},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    if endpoint == "bindings":  # the legacy endpoint: POST /api/v1/namespaces/{ns}/bindings
        kube.create(f"/api/v1/namespaces/{meta['namespace']}/bindings", binding)
    else:
        kube.create(pod_path(meta["namespace"], meta["name"], "binding"), binding)


def _refused(kube: Kube, endpoint: str, pod: dict[str, Any], node: str, **metadata: Any) -> str:
    with pytest.raises(KubeError) as refused:
        _bind(kube, endpoint, pod, node, **metadata)
    assert refused.value.status == 403, refused.value
    after = kube.get(pod_path("default", pod["metadata"]["name"]))
    assert "nodeName" not in after["spec"], f"{endpoint}: the refused Binding bound the pod"
    assert not set(after["metadata"].get("annotations") or {}) & set(FORGED)
    assert "hami.io/webhook" not in (after["metadata"].get("labels") or {})
    return refused.value.message


def test_bindings_at_both_endpoints(real_binaries: object, tmp_path: Path) -> None:
    options = ClusterSpec(control_plane="real", nodes=1, gpus_per_node=1, zones=1, scheduler=False)
    with running_cluster(tmp_path / "run", options) as stack:
        admin, control_plane = stack.kube, stack.control_plane
        assert admin is not None and control_plane is not None
        node = admin.list("/api/v1/nodes")[1][0]
        name, zone = node["metadata"]["name"], node["metadata"]["labels"][TOPOLOGY[0]]

        def pod(label: str) -> dict[str, Any]:
            return admin.create(pod_path("default"), unplaced_pod(label))

        for endpoint in ENDPOINTS:  # refused: sent, as they carry a scheduler-owned key
            message = _refused(admin, endpoint, pod(f"forged-{endpoint[:4]}"), name, annotations=FORGED)
            assert "admin may not set scheduler-owned annotations through a binding: " in message
            assert "hami.io/vgpu-devices-allocated" in message
            message = _refused(
                admin, endpoint, pod(f"opt-out-{endpoint[:4]}"), name, labels={"hami.io/webhook": "ignore"}
            )
            assert (
                "admin may not set scheduler-owned keys through a binding: label hami.io/webhook" in message
            )

        unsent = [
            (endpoint, label, metadata, pod(f"{label}-{endpoint[:4]}"))
            for endpoint in ENDPOINTS
            for label, metadata in (
                ("plain", {}),
                ("zone", {"labels": {TOPOLOGY[0]: zone}}),
                ("note", {"annotations": {"example.com/note": "n"}}),
            )
        ]
        # PodTopologyLabels (beta, on by default from 1.35) copies the node's zone onto every pods/binding
        topology_plugin = minor_of(control_plane.versions()["kube-apiserver"]) >= (1, 35)
        before = counts(admin, "CREATE")  # from here on only the Bindings below are created
        for endpoint, label, metadata, bound in unsent:  # allowed, and never sent to the webhook
            _bind(admin, endpoint, bound, name, **metadata)
            after = admin.get(pod_path("default", bound["metadata"]["name"]))
            assert after["spec"]["nodeName"] == name
            if label == "note":
                assert after["metadata"]["annotations"]["example.com/note"] == "n"
            if label == "zone" or (endpoint == "pods/binding" and topology_plugin):
                assert (after["metadata"].get("labels") or {}).get(TOPOLOGY[0]) == zone, after["metadata"]
        sent = counts(admin, "CREATE") - before
        assert sent == Counts(calls=0, excluded=len(unsent), errors=0), sent
