"""The webhook's matchConditions skip only calls the webhook would allow (issue 20), on the real API server.

The chart's MutatingWebhookConfiguration tells kube-apiserver, in CEL, which pod UPDATEs and Bindings cannot
be refused: no annotation changed, a trusted user's update of an unbound pod, or of a bound pod's bind phase
and times only or emptying its whole NVIDIA to-allocate list, a Binding without annotations. Everything else
still reaches the webhook, which refuses it: shown here for an untrusted user's scheduler-owned key
(unbound and bound) and for a trusted user changing a bound pod's allocation or to-allocate list; the
skipped ones go through. One control plane start, no kube-scheduler.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from unplaced import unplaced_pod

from sim.cluster.harness import running_cluster
from sim.cluster.spec import ClusterSpec
from sim.controlplane.base import DEVICE_PLUGIN, EXTENDER
from sim.kit.kube import Kube, KubeError, pod_path

# matchConditions are CEL evaluated by each kube-apiserver version
pytestmark = [pytest.mark.integration, pytest.mark.real, pytest.mark.versions("1.34", "1.37", "1.38")]
TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"


def _annotate(kube: Kube, name: str, annotations: dict[str, str | None]) -> None:
    kube.patch(pod_path("default", name), {"metadata": {"annotations": annotations}})


def _refused(kube: Kube, name: str, annotations: dict[str, str | None]) -> str:
    with pytest.raises(KubeError) as refused:
        _annotate(kube, name, annotations)
    assert refused.value.status == 403, refused.value
    return refused.value.message


def test_only_calls_that_would_be_allowed_are_skipped(real_binaries: object, tmp_path: Path) -> None:
    options = ClusterSpec(control_plane="real", nodes=1, gpus_per_node=1, zones=1, scheduler=False)
    with running_cluster(tmp_path / "run", options) as stack:
        admin, control_plane = stack.kube, stack.control_plane
        assert admin is not None and control_plane is not None
        node = admin.list("/api/v1/nodes")[1][0]["metadata"]["name"]
        ours = Kube.from_kubeconfig(control_plane.kubeconfig_for(EXTENDER))
        plugin = Kube.from_kubeconfig(control_plane.kubeconfig_for(DEVICE_PLUGIN))
        try:
            pod = admin.create(pod_path("default"), unplaced_pod("p"))
            assert "may not change scheduler-owned annotations" in _refused(
                admin, "p", {"hami.io/vgpu-node": node}
            )
            _annotate(admin, "p", {"example.com/note": "a"})  # no owned key: allowed
            written = {"hami.io/vgpu-node": node, TO_ALLOCATE: "GPU-0,NVIDIA,1000,0:;"}
            _annotate(ours, "p", {**written, "hami.io/bind-phase": "allocating"})  # skipped
            admin.bind("default", "p", pod["metadata"]["uid"], node)  # no annotations: skipped

            assert "may not change scheduler-owned annotations" in _refused(admin, "p", {TO_ALLOCATE: ";"})
            assert "the allocation of a bound pod is immutable" in _refused(
                plugin, "p", {TO_ALLOCATE: "GPU-1,NVIDIA,1000,0:;"}
            )
            _annotate(plugin, "p", {TO_ALLOCATE: ";"})  # every group emptied: skipped
            _annotate(plugin, "p", {"hami.io/bind-phase": "success", "hami.io/bind-time": "1"})  # skipped
            assert "may not change scheduler-owned annotations" in _refused(
                admin, "p", {"hami.io/bind-phase": "failed"}
            )
            assert "the allocation of a bound pod is immutable" in _refused(
                plugin, "p", {"hami.io/vgpu-node": "elsewhere", "hami.io/bind-phase": "allocating"}
            )
            assert "the allocation of a bound pod is immutable" in _refused(
                ours, "p", {"hami.io/vgpu-node": None}
            )
        finally:
            ours.close()
            plugin.close()
        annotations = admin.get(pod_path("default", "p"))["metadata"]["annotations"]
        assert annotations["hami.io/vgpu-node"] == node and annotations["hami.io/bind-phase"] == "success"
        assert annotations[TO_ALLOCATE] == ";"
        assert annotations["example.com/note"] == "a"
