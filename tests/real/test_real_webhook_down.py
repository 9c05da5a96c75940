"""With our webhook down, only what it guards waits for it (issue 28, finding 3), on the real kube-apiserver.

The chart's registration keeps `failurePolicy: Fail`, and before the fix its matchConditions sent every pod
CREATE to the webhook: whenever our pods could not serve (an image pull failure, a broken upgrade, a chart
whose Deployment never became Ready) no pod at all could be created in the selected namespaces. Here the
chart's MutatingWebhookConfiguration is pointed at a closed port — exactly what the API server sees while
no webhook pod has ever become Ready — and then:

- a plain pod is created, an annotation of it changed, and it is bound at both endpoints: none of these is
  sent to the webhook;
- a GPU pod, a pod carrying a scheduler-owned annotation and a Binding carrying a forged allocation are
  refused, naming our webhook (`failed calling webhook "vgpu.hami.io"`): admitted unmutated, a GPU pod would
  be placed by default-scheduler onto devices we count (docs/install.md);
- pointed back at the service, the GPU pod is created and routed to our scheduler (the recovery).
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest
from unplaced import unplaced_pod

from sim.cluster.harness import running_cluster
from sim.cluster.spec import ClusterSpec
from sim.controlplane.real import free_port
from sim.kit.kube import Kube, KubeError, pod_path

pytestmark = [pytest.mark.integration, pytest.mark.real]
CONFIGS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
FAILED = 'failed calling webhook "vgpu.hami.io"'


def gpu_pod(name: str) -> dict[str, Any]:
    pod = unplaced_pod(name)
    pod["spec"]["schedulerName"] = "default-scheduler"
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    return pod


def point_at(admin: Kube, url: str, *, serving: bool) -> None:
    """Our webhook's clientConfig at `url`, waited for until the API server calls it there: a dry-run GPU pod
    is mutated (`serving`) or refused for want of an answer."""
    [config] = [c for c in admin.list(CONFIGS)[1] if c["webhooks"][0]["name"] == "vgpu.hami.io"]
    changed = copy.deepcopy(config)
    changed["webhooks"][0]["clientConfig"]["url"] = url
    admin.request("PUT", f"{CONFIGS}/{config['metadata']['name']}", changed)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the API server picks a configuration up asynchronously
        status, answer = admin.exchange("POST", pod_path("default"), gpu_pod("probe"), dryRun="All")
        if serving and status == 201 and answer["spec"]["schedulerName"] == "hami-scheduler":
            return
        if not serving and status >= 500 and FAILED in str(answer):
            return
        time.sleep(0.3)
    raise AssertionError(f"kube-apiserver did not switch our webhook to {url}")


def refused(create: Any) -> str:
    with pytest.raises(KubeError) as failed:
        create()
    assert failed.value.status >= 500 and FAILED in failed.value.message, failed.value
    return failed.value.message


def test_a_plain_pod_never_waits_for_our_webhook(real_binaries: object, tmp_path: Path) -> None:
    options = ClusterSpec(control_plane="real", nodes=1, gpus_per_node=1, zones=1, scheduler=False)
    with running_cluster(tmp_path / "run", options) as stack:
        admin = stack.kube
        assert admin is not None
        node = admin.list("/api/v1/nodes")[1][0]["metadata"]["name"]
        [config] = [c for c in admin.list(CONFIGS)[1] if c["webhooks"][0]["name"] == "vgpu.hami.io"]
        served = config["webhooks"][0]["clientConfig"]["url"]
        closed = f"https://127.0.0.1:{free_port()}/webhook"
        point_at(admin, closed, serving=False)

        plain = admin.create(pod_path("default"), unplaced_pod("plain"))
        admin.patch(pod_path("default", "plain"), {"metadata": {"annotations": {"example.com/note": "n"}}})
        admin.bind("default", "plain", plain["metadata"]["uid"], node)
        legacy = admin.create(pod_path("default"), unplaced_pod("legacy"))
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "legacy", "uid": legacy["metadata"]["uid"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        admin.create("/api/v1/namespaces/default/bindings", binding)
        for name in ("plain", "legacy"):
            assert admin.get(pod_path("default", name))["spec"]["nodeName"] == node

        message = refused(lambda: admin.create(pod_path("default"), gpu_pod("gpu")))
        assert "connection refused" in message or "connect" in message, message
        forged = unplaced_pod("forged")
        forged["metadata"]["annotations"] = {"hami.io/vgpu-devices-allocated": "GPU-x,NVIDIA,1000,0:;"}
        refused(lambda: admin.create(pod_path("default"), forged))
        victim = admin.create(pod_path("default"), unplaced_pod("victim"))
        binding = {
            **binding,
            "metadata": {
                "name": "victim",
                "uid": victim["metadata"]["uid"],
                "annotations": forged["metadata"]["annotations"],
            },
        }
        refused(lambda: admin.create("/api/v1/namespaces/default/bindings", binding))
        assert "nodeName" not in admin.get(pod_path("default", "victim"))["spec"]

        point_at(admin, served, serving=True)  # the recovery: our webhook answers again
        created = admin.create(pod_path("default"), gpu_pod("gpu"))
        assert created["spec"]["schedulerName"] == "hami-scheduler"
