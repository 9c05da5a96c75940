"""A `pods/binding` request writes its annotations onto the pod, so the webhook guards it (issue 19, 2b).

Kubernetes' pod storage copies a Binding's `metadata.annotations` onto the pod it binds
(`BindingREST.setPodHostAndAnnotations`). Shown here on the real kube-apiserver with the chart's webhook:
an untrusted user's Binding carrying a scheduler-owned annotation (a forged allocation) is denied by our
webhook and the pod stays unbound and clean; one carrying other annotations binds the pod and the API
server copies them onto it; our own ServiceAccount (trusted) may carry scheduler-owned keys, and they land
on the pod too — which is why the rule is needed. One control plane start, no kube-scheduler.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from unplaced import unplaced_pod

from sim.cluster.harness import running_cluster
from sim.cluster.spec import ClusterSpec
from sim.controlplane.base import EXTENDER
from sim.kit.kube import Kube, KubeError, pod_path

pytestmark = [pytest.mark.integration, pytest.mark.real]
FORGED = {"hami.io/vgpu-devices-allocated": "GPU-forged,NVIDIA,80000,100:;", "hami.io/vgpu-node": "x"}
NOTE = {"example.com/note": "bound-with-a-note"}


def _bind(kube: Kube, pod: dict[str, Any], node: str, annotations: dict[str, str]) -> None:
    meta = pod["metadata"]
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": meta["name"], "uid": meta["uid"], "annotations": annotations},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    kube.create(pod_path("default", meta["name"], "binding"), binding)


def test_a_binding_may_not_carry_scheduler_owned_annotations(real_binaries: object, tmp_path: Path) -> None:
    options = ClusterSpec(control_plane="real", nodes=1, gpus_per_node=1, zones=1, scheduler=False)
    with running_cluster(tmp_path / "run", options) as stack:
        admin, control_plane = stack.kube, stack.control_plane
        assert admin is not None and control_plane is not None
        node = admin.list("/api/v1/nodes")[1][0]["metadata"]["name"]
        forged, plain, trusted = (
            admin.create(pod_path("default"), unplaced_pod(n)) for n in ("forged", "plain", "trusted")
        )

        with pytest.raises(KubeError) as denied:
            _bind(admin, forged, node, {**FORGED, **NOTE})
        assert denied.value.status == 403, denied.value
        expected = "admin may not set scheduler-owned annotations through a binding: "
        assert expected + "hami.io/vgpu-devices-allocated, hami.io/vgpu-node" in denied.value.message
        after = admin.get(pod_path("default", "forged"))
        assert "nodeName" not in after["spec"]
        assert not set(after["metadata"].get("annotations") or {}) & {*FORGED, *NOTE}

        _bind(admin, plain, node, NOTE)  # the webhook allows it; the API server copies the annotation
        after = admin.get(pod_path("default", "plain"))
        assert after["spec"]["nodeName"] == node
        assert after["metadata"]["annotations"]["example.com/note"] == NOTE["example.com/note"]

        ours = Kube.from_kubeconfig(control_plane.kubeconfig_for(EXTENDER))
        try:
            _bind(ours, trusted, node, {"hami.io/vgpu-node": node})
        finally:
            ours.close()
        after = admin.get(pod_path("default", "trusted"))
        assert after["spec"]["nodeName"] == node
        assert after["metadata"]["annotations"]["hami.io/vgpu-node"] == node
