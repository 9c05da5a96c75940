"""Bad input is told, through the real kube-apiserver and our webhook (issue 31): what HAMi admits is admitted
as HAMi decides it, and the client reads what was done — `kubectl` prints the AdmissionReview warnings —,
a controller-made pod gets the same sentences as an event, refusals state the range the code enforces, and
the quota denial keeps HAMi's text with the resource, usage, limit and request after it."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.cluster.stack import Stack
from sim.kit import podutil
from sim.kit.kube import pod_path

pytestmark = [pytest.mark.integration, pytest.mark.real]
KUBECTL = Path(__file__).resolve().parents[2] / ".tools" / "bin" / "kubectl"
CLAMPED = (
    "container main: nvidia.com/gpucores 150 is more than one whole device (100): it is treated as 100, "
    "as HAMi does"
)


def kubectl(
    stack: Stack, *args: str, manifest: dict[str, Any] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(stack.kubeconfig), *args],
        input=yaml.safe_dump(manifest) if manifest is not None else "",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def gpu_pod(name: str, limits: dict[str, str], namespace: str = "default", **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, **metadata},
        "spec": {"containers": [{"name": "main", "image": "cuda", "resources": {"limits": limits}}]},
    }


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := predicate()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.2)
    return result


def running(stack: Stack, name: str, namespace: str = "default") -> dict[str, Any]:
    assert stack.kube is not None
    kube = stack.kube

    def ready() -> dict[str, Any] | None:
        pod = kube.get(pod_path(namespace, name))
        return pod if podutil.phase(pod) == "Running" else None

    found: dict[str, Any] = wait_for(ready, 90, f"{namespace}/{name} to run")
    return found


def test_cores_above_100_are_admitted_fitted_as_100_and_told(small_cluster: Stack) -> None:
    done = kubectl(
        small_cluster,
        "create",
        "-f",
        "-",
        manifest=gpu_pod("cores-150", {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "150"}),
    )
    assert done.returncode == 0, done.stderr
    assert f"Warning: {CLAMPED}" in done.stderr  # kubectl prints the AdmissionReview warning
    pod = running(small_cluster, "cores-150")
    assert pod["spec"]["schedulerName"] == "hami-scheduler"
    device = pod["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"].split(":")[0].split(",")
    assert device[1] == "NVIDIA" and device[3] == "100"  # HAMi's clamp: the allocation holds 100 cores


def test_a_count_of_0_with_memory_and_cores_runs_without_a_device_and_is_told(small_cluster: Stack) -> None:
    limits = {"nvidia.com/gpu": "0", "nvidia.com/gpumem": "1000", "nvidia.com/gpucores": "30"}
    done = kubectl(small_cluster, "create", "-f", "-", manifest=gpu_pod("count-0", limits))
    assert done.returncode == 0, done.stderr
    assert (
        "Warning: container main: nvidia.com/gpu is 0, so nvidia.com/gpumem and nvidia.com/gpucores are "
        "ignored: the container gets no NVIDIA device (as HAMi does)"
    ) in done.stderr
    pod = running(small_cluster, "count-0")
    assert pod["spec"]["schedulerName"] == "hami-scheduler"  # routed to us, as HAMi routes it
    allocated = pod["metadata"].get("annotations", {}).get("hami.io/vgpu-devices-allocated", "")
    assert "GPU-" not in allocated  # and no device


def test_a_memory_percentage_of_0_is_the_whole_card_and_told(small_cluster: Stack) -> None:
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "0"}
    done = kubectl(small_cluster, "create", "-f", "-", manifest=gpu_pod("percent-0", limits))
    assert done.returncode == 0, done.stderr
    assert (
        "Warning: container main: nvidia.com/gpumem-percentage 0 is read as unset: the container gets the "
        "whole device's memory, as HAMi does"
    ) in done.stderr
    pod = running(small_cluster, "percent-0")
    device = pod["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"].split(":")[0].split(",")
    node = small_cluster.kube.get(f"/api/v1/nodes/{pod['spec']['nodeName']}") if small_cluster.kube else {}
    register = node["metadata"]["annotations"]["hami.io/node-nvidia-register"]
    assert f'"devmem":{device[2]},' in register  # the whole card's memory


def test_a_negative_core_value_is_refused_with_the_range_enforced(small_cluster: Stack) -> None:
    done = kubectl(
        small_cluster,
        "create",
        "-f",
        "-",
        manifest=gpu_pod("cores-neg", {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "-5"}),
    )
    assert done.returncode != 0
    assert (
        'admission webhook "vgpu.hami.io" denied the request: invalid nvidia.com/gpucores value -5: must be '
        "a whole number between 0 and 2147483647 (percent of one GPU; above 100 counts as 100) "
        "in container main"
    ) in done.stderr


def test_a_controller_made_pod_gets_the_warning_as_an_event(small_cluster: Stack) -> None:
    kube = small_cluster.kube
    assert kube is not None
    owner = kube.create(
        "/api/v1/namespaces/default/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "made-by"}},
    )
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": "made-by", "uid": owner["metadata"]["uid"]}
    manifest = gpu_pod(
        "made", {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "150"}, ownerReferences=[reference]
    )
    created = kube.create(pod_path("default"), manifest)
    uid = created["metadata"]["uid"]

    def told() -> list[dict[str, Any]]:
        events = kube.list("/api/v1/namespaces/default/events", fieldSelector=f"involvedObject.uid={uid}")[1]
        return [e for e in events if e["reason"] == "AdmissionWarning"]

    (event,) = wait_for(told, 60, "the AdmissionWarning event")
    assert (event["type"], event["message"]) == ("Warning", f"admitted with warnings: {CLAMPED}")
    assert event["source"]["component"] == "hami-scheduler"
    running(small_cluster, "made")
    time.sleep(2)
    assert len(told()) == 1  # once, not per scheduling attempt


def test_the_quota_denial_keeps_hamis_text_and_adds_the_numbers(small_cluster: Stack) -> None:
    kube = small_cluster.kube
    assert kube is not None
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu", "namespace": "team"},
        "spec": {"hard": {"limits.nvidia.com/gpumem": "4000"}},
    }
    kube.create("/api/v1/namespaces/team/resourcequotas", quota)
    pod = gpu_pod("big", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "6000"}, namespace="team")
    expected = (
        'admission webhook "vgpu.hami.io" denied the request: exceeding resource quota: '
        "limits.nvidia.com/gpumem in namespace team: used 0, limit 4000, requested 6000"
    )

    def denied() -> str:  # server-side dry runs until the worker has seen the quota
        done = kubectl(small_cluster, "create", "--dry-run=server", "-f", "-", manifest=pod)
        return done.stderr if done.returncode else ""

    assert expected in wait_for(denied, 60, "the quota denial")
