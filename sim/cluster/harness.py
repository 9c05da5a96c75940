"""The harness scenarios share, whichever control plane runs: start a cluster, create pods through
admission, stop everything.

    with running_cluster(workdir, ClusterSpec(control_plane="real", nodes=4)) as stack:
        denial = create_pod(stack, manifest)      # "" when created
        ...

`create_pod` goes through our webhook either way: the real API server calls it (the chart's
MutatingWebhookConfiguration), with the emulator the harness sends the AdmissionReview itself and applies
the JSON Patch, standing in for the API server's admission chain. `running_cluster` starts the cluster
with the one builder (`sim.cluster.build.build`), stops every process it started (by PID and process group)
when the block ends, also on failure, and fails if one survived.
"""

from __future__ import annotations

import base64
import contextlib
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonpatch
import orjson
import urllib3

from sim.cluster.build import build
from sim.cluster.spec import ClusterSpec
from sim.cluster.stack import DemoFailure, Stack
from sim.kit.kube import KubeError, pod_path


@contextlib.contextmanager
def running_cluster(workdir: Path, spec: ClusterSpec) -> Iterator[Stack]:
    """The cluster `spec` describes, started (sim.cluster.build); everything stopped when the block ends."""
    workdir.mkdir(parents=True, exist_ok=True)
    stack = Stack(workdir)
    try:
        build(spec, stack)
        yield stack
    finally:
        stack.stop()
    left = stack.survivors()
    if left:
        raise DemoFailure(f"processes survived the stop: {left}")


def admit(http: urllib3.PoolManager, url: str, pod: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """Our webhook on a CREATE of `pod`: the pod to create (patch applied), or None and the denial."""
    meta = pod["metadata"]
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": f"sim-{meta['namespace']}-{meta['name']}",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": meta["name"],
            "namespace": meta["namespace"],
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:default:demo"},
            "object": pod,
            "dryRun": False,
        },
    }
    response = http.request(
        "POST", f"{url}/webhook", body=orjson.dumps(review), headers={"Content-Type": "application/json"}
    )
    if response.status != 200:
        raise DemoFailure(
            f"the webhook answered HTTP {response.status} for {meta['namespace']}/{meta['name']}"
        )
    answer = orjson.loads(response.data).get("response") or {}
    if not answer.get("allowed"):
        return None, str((answer.get("status") or {}).get("message") or "denied")
    result = dict(pod)
    if answer.get("patch"):
        result = jsonpatch.apply_patch(result, orjson.loads(base64.b64decode(answer["patch"])))
    return result, ""


WEBHOOK_ATTEMPTS = 3  # a pod's controller retries a creation whose webhook call failed; so does the harness


def create_pod(stack: Stack, pod: Mapping[str, Any]) -> str:
    """Create `pod` through admission (see the module docstring); returns the denial, "" when created.
    A creation the API server refused because calling the webhook failed (5xx) is retried, as a controller
    would."""
    assert stack.control_plane is not None and stack.kube is not None
    namespace = pod["metadata"]["namespace"]
    if not stack.control_plane.admits_pods():
        manifest, reason = admit(stack.http, stack.service_url, pod)
        if manifest is None:
            return reason
        stack.kube.create(pod_path(namespace), manifest)
        return ""
    attempt = 1
    while True:
        try:
            stack.kube.create(pod_path(namespace), dict(pod))
            return ""
        except KubeError as exc:
            if 400 <= exc.status < 500 and "admission webhook" in exc.message:
                return exc.message
            if exc.status < 500 or "failed calling webhook" not in exc.message or attempt == WEBHOOK_ATTEMPTS:
                raise
        attempt += 1
        time.sleep(1.0)  # the API server could not call the webhook (its timeout on a loaded machine)
